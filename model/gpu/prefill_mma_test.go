package gpu

import (
	"encoding/binary"
	"math"
	"testing"

	"oengine/ggml"
)

// mmaDecoder builds a 1-layer F32 decoder with head dim hd (2 query heads,
// 1 KV head) and steps of maxT tokens on the emulated device.
func mmaDecoder(t *testing.T, hd, maxT int) (*Decoder, *KV) {
	t.Helper()
	dim := 2 * hd
	cfg := DecoderConfig{Dim: dim, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: hd, FFN: 64, Vocab: 16,
		RopeDims: hd, RopeBase: 10000, NormEps: 1e-5, Context: 256}
	m32 := func(rows, cols int) HostMatrix {
		data := make([]byte, rows*cols*4)
		x := uint32(rows*131 + cols)
		for i := 0; i < len(data); i += 4 {
			x = x*1664525 + 1013904223
			v := math.Float32bits((float32(x>>8)/(1<<24) - 0.5) / 2)
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
	w := HostWeights{Embed: m32(16, dim), OutNorm: ones(dim),
		Layers: []HostLayer{{AttnNorm: ones(dim), FFNNorm: ones(dim), Q: m32(dim, dim), K: m32(hd, dim), V: m32(hd, dim),
			O: m32(dim, dim), Gate: m32(64, dim), Up: m32(64, dim), Down: m32(dim, 64)}}}
	m, err := NewDecoder(emuDevice(t).Device, cfg, w, maxT)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	kv, err := m.NewKV(16, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kv.Close)
	return m, kv
}

// Prefill steps run attn_prefill_mma for head dims 64 and 128: with hi+lo
// F16 pairs (the default) their logits are the scalar kernel's
// (ScalarPrefill) within float32 noise, with F16Prefill within F16
// rounding, and in neither case equal (the kernel did run); head dim 32
// keeps the scalar kernel either way. The batch mixes a 100-token prompt
// of one sequence (tiles of 32 tokens) and a 20-token chunk of another.
func TestPrefillUsesMMAKernel(t *testing.T) {
	for _, tc := range []struct {
		hd  int
		mma bool
	}{{64, true}, {128, true}, {32, false}} {
		m, kv := mmaDecoder(t, tc.hd, 128)
		b := &DecoderBatch{Seqs: [][]int32{{3, 5, 0, 9, 1, 2, 4}, {7, 8}}}
		for i := 0; i < 100; i++ {
			b.Tokens, b.Pos, b.Seq = append(b.Tokens, int32((i*7)%16)), append(b.Pos, int32(i)), append(b.Seq, 0)
		}
		for i := 0; i < 20; i++ {
			b.Tokens, b.Pos, b.Seq = append(b.Tokens, int32((i*5+3)%16)), append(b.Pos, int32(i)), append(b.Seq, 1)
		}
		for i := 0; i < 120; i += 3 {
			b.Logits = append(b.Logits, int32(i))
		}
		run := func(scalar, f16 bool) []float32 {
			m.ScalarPrefill, m.F16Prefill = scalar, f16
			out := make([]float32, len(b.Logits)*16)
			if err := m.Forward(kv, b, out); err != nil {
				t.Fatal(err)
			}
			return out
		}
		scalar := run(true, false)
		var size float64
		for _, v := range scalar {
			size = math.Max(size, math.Abs(float64(v)))
		}
		for _, f16 := range []bool{false, true} {
			got := run(false, f16)
			var worst float64
			for i := range scalar {
				worst = math.Max(worst, math.Abs(float64(got[i]-scalar[i])))
			}
			t.Logf("head dim %d F16Prefill=%v: max logit difference %.3g (largest logit %.3g)", tc.hd, f16, worst, size)
			bound := 1e-5 * size // float32 noise
			if f16 {
				bound = 2e-3 * size // relative F16 rounding (2^-11) through one layer
			}
			switch {
			case tc.mma && worst == 0:
				t.Errorf("head dim %d F16Prefill=%v: identical logits: the tensor-core kernel did not run", tc.hd, f16)
			case tc.mma && worst > bound:
				t.Errorf("head dim %d F16Prefill=%v: logits differ by %.3g, bound %.3g", tc.hd, f16, worst, bound)
			case !tc.mma && worst != 0:
				t.Errorf("head dim %d: logits differ by %.3g: the scalar kernel must run for both", tc.hd, worst)
			}
		}
	}
}
