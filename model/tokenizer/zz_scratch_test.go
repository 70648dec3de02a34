package tokenizer

import (
	"fmt"
	"testing"
	"encoding/binary"

	"oengine/model/gguf"
)

func TestZZScratch(t *testing.T) {
	for _, p := range []string{"/tmp/ugm/test_model.gguf", "/tmp/ugm/test_ja_model.gguf"} {
		f, err := gguf.Open(p)
		if err != nil { t.Fatal(err) }
		for _, k := range f.Keys() { v, _ := f.Value(k); _ = v; fmt.Println(k) }
		toks, _ := f.Strings(keyTokens)
		types, _ := f.Int32s(keyTypes)
		scores, _ := f.Float32s(keyScores)
		cnt := map[int32]int{}
		maxLen := 0
		for i, ty := range types {
			cnt[ty]++
			if ty != 1 { fmt.Printf("%d %q type %d score %v\n", i, toks[i], ty, scores[i]) }
			maxLen = max(maxLen, len(toks[i]))
		}
		fmt.Println(p, len(toks), cnt, "maxlen", maxLen)
		v, _ := f.Value("tokenizer.ggml.precompiled_charsmap")
		b, ok := v.AsBytes()
		fmt.Println("charsmap", len(b), ok)
		if len(b) >= 4 { n := binary.LittleEndian.Uint32(b); fmt.Println("xcda", n, n/4, n%1024, len(b)-4-int(n)) }
		f.Close()
	}
}
