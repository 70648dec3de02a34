package tokenizer

import (
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

func threadCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestCPUEncode(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b := &testing.B{}
	_ = b
	text := benchTextT(t)
	for _, name := range []string{"llama3", "llama-spm", "qwen3", "gpt-2", "deepseek-llm", "falcon"} {
		tok := loadTokenizer(t, filepath.Join("tokenizer", "ggml-vocab-"+name+".gguf"))
		tok.Encode(text, EncodeOptions{})
		c0 := threadCPU()
		n := 5
		for i := 0; i < n; i++ {
			tok.Encode(text, EncodeOptions{})
		}
		d := (threadCPU() - c0) / time.Duration(n)
		t.Logf("%s: %v cpu per %d bytes = %.1f MB/s", name, d, len(text), float64(len(text))/d.Seconds()/1e6)
	}
}
