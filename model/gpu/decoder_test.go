package gpu

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"oengine/ggml"
	"oengine/kernels/cuda"
	"oengine/kernels/cuda/cudaemu"
)

// emuDevice opens an emulated device closed at the end of the test.
func emuDevice(t testing.TB) *cudaemu.Device {
	t.Helper()
	d, err := cudaemu.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// tinyDecoder builds a 1-layer F32 decoder on the emulated device.
func tinyDecoder(t *testing.T) (*Decoder, *KV) { return tinyDecoderN(t, 8) }

// tinyDecoderN builds a 1-layer F32 decoder with pseudo-random weights and
// steps of maxT tokens.
func tinyDecoderN(t *testing.T, maxT int) (*Decoder, *KV) {
	t.Helper()
	cfg := DecoderConfig{Dim: 64, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 32, FFN: 64, Vocab: 16,
		RopeDims: 32, RopeBase: 10000, NormEps: 1e-5, Context: 64}
	m32 := func(rows, cols int) HostMatrix {
		data := make([]byte, rows*cols*4)
		x := uint32(rows*131 + cols)
		for i := 0; i < len(data); i += 4 {
			x = x*1664525 + 1013904223
			v := math.Float32bits((float32(x>>8)/(1<<24) - 0.5) / 4)
			binary.LittleEndian.PutUint32(data[i:], v)
		}
		return HostMatrix{Type: ggml.TypeF32, Rows: rows, Cols: cols, Data: data}
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	w := HostWeights{Embed: m32(16, 64), OutNorm: ones(64),
		Layers: []HostLayer{{AttnNorm: ones(64), FFNNorm: ones(64), Q: m32(64, 64), K: m32(32, 64), V: m32(32, 64),
			O: m32(64, 64), Gate: m32(64, 64), Up: m32(64, 64), Down: m32(64, 64)}}}
	m, err := NewDecoder(emuDevice(t).Device, cfg, w, maxT)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	kv, err := m.NewKV(4, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kv.Close)
	return m, kv
}

func TestDecoderRejectsBadBatches(t *testing.T) {
	m, kv := tinyDecoder(t)
	ok := func() *DecoderBatch {
		return &DecoderBatch{Tokens: []int32{1, 2}, Pos: []int32{0, 1}, Seq: []int32{0, 0}, Seqs: [][]int32{{3}}, Logits: []int32{1}}
	}
	logits := make([]float32, 16)
	if err := m.Forward(kv, ok(), logits); err != nil {
		t.Fatalf("valid batch: %v", err)
	}
	tests := []struct {
		name string
		edit func(b *DecoderBatch)
		buf  []float32
		want string
	}{
		{"split with unordered logits", func(b *DecoderBatch) {
			for i := 0; i < 8; i++ {
				b.Tokens, b.Pos, b.Seq = append(b.Tokens, 1), append(b.Pos, int32(2+i)), append(b.Seq, 0)
			}
			b.Logits = []int32{9, 1}
		}, make([]float32, 32), "must increase"},
		{"position beyond the context", func(b *DecoderBatch) { b.Pos[1] = 64 }, logits, "out of range"},
		{"length mismatch", func(b *DecoderBatch) { b.Pos = b.Pos[:1] }, logits, "tokens"},
		{"token id", func(b *DecoderBatch) { b.Tokens[0] = 16 }, logits, "out of range"},
		{"negative position", func(b *DecoderBatch) { b.Pos[0] = -1 }, logits, "out of range"},
		{"sequence id", func(b *DecoderBatch) { b.Seq[1] = 1 }, logits, "out of range"},
		{"no page for position", func(b *DecoderBatch) { b.Pos[1] = 16 }, logits, "no page"},
		{"page id", func(b *DecoderBatch) { b.Seqs[0][0] = 4 }, logits, "outside"},
		{"too many pages", func(b *DecoderBatch) { b.Seqs[0] = []int32{0, 1, 2, 3, 0} }, logits, "pages"},
		{"logits index", func(b *DecoderBatch) { b.Logits[0] = 2 }, logits, "outside the batch"},
		{"logits buffer", func(b *DecoderBatch) { b.Logits = []int32{0, 1} }, logits, "logits rows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := ok()
			tc.edit(b)
			err := m.Forward(kv, b, tc.buf)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	// Greedy checks its output slice too.
	if err := m.Greedy(kv, ok(), nil); err == nil {
		t.Fatal("Greedy into an empty slice")
	}
}

func TestNewDecoderChecksShapes(t *testing.T) {
	d := emuDevice(t).Device
	cfg := DecoderConfig{Dim: 64, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 32, FFN: 64, Vocab: 16, RopeDims: 32, RopeBase: 1e4, Context: 64}
	bad := HostMatrix{Type: ggml.TypeF32, Rows: 3, Cols: 64, Data: make([]byte, 3*64*4)}
	_, err := NewDecoder(d, cfg, HostWeights{Embed: bad, Layers: make([]HostLayer, 1)}, 8)
	if err == nil || !strings.Contains(err.Error(), "token_embd is 3x64, want 16x64") {
		t.Fatalf("err %v", err)
	}
	if _, err := NewDecoder(d, cfg, HostWeights{}, 8); err == nil {
		t.Fatal("layer count not checked")
	}
}

func TestDecoderSample(t *testing.T) {
	m, kv := tinyDecoder(t)
	b := &DecoderBatch{Tokens: []int32{1, 2, 3}, Pos: []int32{0, 1, 0}, Seq: []int32{0, 0, 1}, Seqs: [][]int32{{0}, {1}}, Logits: []int32{1, 2}}
	logits := make([]float32, 2*16)
	if err := m.Forward(kv, b, logits); err != nil {
		t.Fatal(err)
	}
	ps := []SampleParams{{Temperature: 0}, {Temperature: 0.8, TopK: 5, TopP: 0.9, U: 0.37}}
	out := make([]int32, 2)
	if err := m.Sample(kv, b, ps, out); err != nil {
		t.Fatal(err)
	}
	if want := cuda.ArgmaxRef(logits[:16]); out[0] != want {
		t.Fatalf("greedy row: %d, want %d", out[0], want)
	}
	if want, _, _ := cuda.SampleRef(logits[16:], 0.8, 5, 0.9, 0.37); out[1] != want {
		t.Fatalf("sampled row: %d, want %d", out[1], want)
	}
	if err := m.Sample(kv, b, ps[:1], out); err == nil {
		t.Fatal("params count not checked")
	}
	if err := m.Sample(kv, b, []SampleParams{{}, {Temperature: 1, U: 1}}, out); err == nil {
		t.Fatal("u = 1 accepted")
	}
}

// A batch longer than the decoder's step runs as several device steps and
// gives the logits one step gives: two sequences, prompt chunks and
// decode tokens mixed, 20 tokens through steps of 8 and of 32.
func TestForwardSplitsLongBatches(t *testing.T) {
	small, kvS := tinyDecoderN(t, 8)
	big, kvB := tinyDecoderN(t, 32)
	b := &DecoderBatch{Seqs: [][]int32{{0, 1}, {2}}}
	for i := 0; i < 14; i++ {
		b.Tokens, b.Pos, b.Seq = append(b.Tokens, int32(i%16)), append(b.Pos, int32(i)), append(b.Seq, 0)
	}
	for i := 0; i < 6; i++ {
		b.Tokens, b.Pos, b.Seq = append(b.Tokens, int32((3*i+1)%16)), append(b.Pos, int32(i)), append(b.Seq, 1)
	}
	b.Logits = []int32{0, 7, 8, 13, 15, 19}
	want, got := make([]float32, 6*16), make([]float32, 6*16)
	if err := big.Forward(kvB, b, want); err != nil {
		t.Fatal(err)
	}
	if err := small.Forward(kvS, b, got); err != nil {
		t.Fatal(err)
	}
	distinct := false
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-5 {
			t.Fatalf("logit %d: %v split, %v whole", i, got[i], want[i])
		}
		distinct = distinct || want[i] != want[i%16]
	}
	if !distinct {
		t.Fatal("every row has the same logits: the test cannot tell rows apart")
	}
}

// CopyPage copies a page's K and V rows of every layer on the device: a
// sequence whose table names the copy gives the logits the original gives.
// A copy outside the pool is kept as an error for the next Forward.
func TestKVCopyPage(t *testing.T) {
	m, kv := tinyDecoder(t)
	prompt := &DecoderBatch{Tokens: []int32{1, 5, 9, 3}, Pos: []int32{0, 1, 2, 3}, Seq: []int32{0, 0, 0, 0}, Seqs: [][]int32{{2}}}
	if err := m.Forward(kv, prompt, nil); err != nil {
		t.Fatal(err)
	}
	step := func(page int32) []float32 {
		out := make([]float32, 16)
		b := &DecoderBatch{Tokens: []int32{7}, Pos: []int32{4}, Seq: []int32{0}, Seqs: [][]int32{{page}}, Logits: []int32{0}}
		if err := m.Forward(kv, b, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := step(2)
	kv.CopyPage(0, 2)
	got := step(0)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("logit %d: %v on the copy, %v on the original", i, got[i], want[i])
		}
	}
	kv.CopyPage(1, 3) // page 3 was never written: the copy differs
	if other := step(1); other[0] == want[0] && other[1] == want[1] {
		t.Fatal("a page of other keys gives the same logits: the test cannot fail")
	}
	kv.CopyPage(9, 0)
	if err := m.Forward(kv, prompt, nil); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("Forward after a bad copy: %v", err)
	}
	if err := m.Forward(kv, prompt, nil); err != nil {
		t.Fatalf("the copy error is reported once: %v", err)
	}
}

// Decode steps replayed from CUDA graphs give the logits of steps launched
// one kernel at a time: three sequences, positions crossing a page, the
// batch shrinking and growing again (graphs per batch size, captured once
// and replayed with new positions, tokens and page tables).
func TestForwardGraphsMatchDirect(t *testing.T) {
	direct, kvD := tinyDecoderN(t, 8)
	graphed, kvG := tinyDecoderN(t, 8)
	graphed.UseGraphs = true
	tables := [][]int32{{0, 1}, {2, 3}, {1, 2}}
	prompt := &DecoderBatch{Seqs: tables[:2]}
	for s := int32(0); s < 2; s++ {
		for p := int32(0); p < 3; p++ {
			prompt.Tokens, prompt.Pos, prompt.Seq = append(prompt.Tokens, (s*5+p)%16), append(prompt.Pos, p), append(prompt.Seq, s)
		}
	}
	for _, m := range []struct {
		d  *Decoder
		kv *KV
	}{{direct, kvD}, {graphed, kvG}} {
		if err := m.d.Forward(m.kv, prompt, nil); err != nil {
			t.Fatal(err)
		}
	}
	for pos := int32(3); pos < 20; pos++ {
		n := 2
		if pos%5 == 4 {
			n = 1
		}
		b := &DecoderBatch{Seqs: tables[:n]}
		for s := 0; s < n; s++ {
			b.Tokens, b.Pos, b.Seq, b.Logits = append(b.Tokens, (pos*3+int32(s))%16), append(b.Pos, pos), append(b.Seq, int32(s)), append(b.Logits, int32(s))
		}
		want, got := make([]float32, n*16), make([]float32, n*16)
		if err := direct.Forward(kvD, b, want); err != nil {
			t.Fatal(err)
		}
		if err := graphed.Forward(kvG, b, got); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("pos %d logit %d: %v replayed, %v direct", pos, i, got[i], want[i])
			}
		}
	}
	if len(graphed.graphs) < 2 || len(direct.graphs) != 0 {
		t.Fatalf("graphs: %d replayed model, %d direct", len(graphed.graphs), len(direct.graphs))
	}
}

// A batch naming more sequences than a step holds (some without tokens in
// this step) runs with only the sequences its tokens use.
func TestForwardManySequences(t *testing.T) {
	m, kv := tinyDecoderN(t, 2)
	b := &DecoderBatch{Tokens: []int32{3}, Pos: []int32{0}, Seq: []int32{4}, Seqs: [][]int32{{0}, {1}, {2}, {3}, {1}}, Logits: []int32{0}}
	got := make([]float32, 16)
	if err := m.Forward(kv, b, got); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 16)
	one := &DecoderBatch{Tokens: []int32{3}, Pos: []int32{0}, Seq: []int32{0}, Seqs: [][]int32{{1}}, Logits: []int32{0}}
	if err := m.Forward(kv, one, want); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("logit %d: %v, want %v", i, got[i], want[i])
		}
	}
}
