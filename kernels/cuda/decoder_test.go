package cuda

import (
	"strings"
	"testing"

	"oengine/ggml"
)

// tinyDecoder builds a 1-layer F32 decoder on the emulated device.
func tinyDecoder(t *testing.T) *Decoder {
	t.Helper()
	cfg := DecoderConfig{Dim: 64, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 32, FFN: 64, Vocab: 16,
		RopeDims: 32, RopeBase: 10000, NormEps: 1e-5}
	m32 := func(rows, cols int) HostMatrix {
		data := make([]byte, rows*cols*4)
		for i := 0; i < len(data); i += 4 {
			data[i+3] = 0x3c // 0.0078125
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
	m, err := NewDecoder(NewEmulatedDevice(t), cfg, w, 4, 16, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func TestDecoderRejectsBadBatches(t *testing.T) {
	m := tinyDecoder(t)
	ok := func() *DecoderBatch {
		return &DecoderBatch{Tokens: []int32{1, 2}, Pos: []int32{0, 1}, Seq: []int32{0, 0}, Seqs: [][]int32{{3}}, Logits: []int32{1}}
	}
	logits := make([]float32, 16)
	if err := m.Forward(ok(), logits); err != nil {
		t.Fatalf("valid batch: %v", err)
	}
	tests := []struct {
		name string
		edit func(b *DecoderBatch)
		buf  []float32
		want string
	}{
		{"too many tokens", func(b *DecoderBatch) {
			for i := 0; i < 8; i++ {
				b.Tokens, b.Pos, b.Seq = append(b.Tokens, 1), append(b.Pos, int32(2+i)), append(b.Seq, 0)
			}
		}, logits, "at most 8"},
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
			err := m.Forward(b, tc.buf)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	// Greedy checks its output slice too.
	if err := m.Greedy(ok(), nil); err == nil {
		t.Fatal("Greedy into an empty slice")
	}
}

func TestNewDecoderChecksShapes(t *testing.T) {
	d := NewEmulatedDevice(t)
	cfg := DecoderConfig{Dim: 64, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 32, FFN: 64, Vocab: 16, RopeDims: 32, RopeBase: 1e4}
	bad := HostMatrix{Type: ggml.TypeF32, Rows: 3, Cols: 64, Data: make([]byte, 3*64*4)}
	_, err := NewDecoder(d, cfg, HostWeights{Embed: bad, Layers: make([]HostLayer, 1)}, 4, 16, 8)
	if err == nil || !strings.Contains(err.Error(), "token_embd is 3x64, want 16x64") {
		t.Fatalf("err %v", err)
	}
	if _, err := NewDecoder(d, cfg, HostWeights{}, 4, 16, 8); err == nil {
		t.Fatal("layer count not checked")
	}
}

func TestDecoderSample(t *testing.T) {
	m := tinyDecoder(t)
	b := &DecoderBatch{Tokens: []int32{1, 2, 3}, Pos: []int32{0, 1, 0}, Seq: []int32{0, 0, 1}, Seqs: [][]int32{{0}, {1}}, Logits: []int32{1, 2}}
	logits := make([]float32, 2*16)
	if err := m.Forward(b, logits); err != nil {
		t.Fatal(err)
	}
	ps := []SampleParams{{Temperature: 0}, {Temperature: 0.8, TopK: 5, TopP: 0.9, U: 0.37}}
	out := make([]int32, 2)
	if err := m.Sample(b, ps, out); err != nil {
		t.Fatal(err)
	}
	if want := ArgmaxRef(logits[:16]); out[0] != want {
		t.Fatalf("greedy row: %d, want %d", out[0], want)
	}
	if want, _, _ := SampleRef(logits[16:], 0.8, 5, 0.9, 0.37); out[1] != want {
		t.Fatalf("sampled row: %d, want %d", out[1], want)
	}
	if err := m.Sample(b, ps[:1], out); err == nil {
		t.Fatal("params count not checked")
	}
	if err := m.Sample(b, []SampleParams{{}, {Temperature: 1, U: 1}}, out); err == nil {
		t.Fatal("u = 1 accepted")
	}
}
