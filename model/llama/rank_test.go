package llama

import (
	"errors"
	"math"
	"testing"

	"oengine/ggml"
	"oengine/kernels/cpu"
	"oengine/model/gguf"
	"oengine/model/synth"
)

// rankTensor dequantizes one of f's tensors.
func rankTensor(t *testing.T, f *gguf.File, name string) []float32 {
	t.Helper()
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("no tensor %s", name)
	}
	v := make([]float32, ti.Elements())
	if err := cpu.Dequantize(ti.Type, ti.Data, v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRankHeads: ModernBERT's head is LN(gelu(W·x))·w then W'·h + b'
// (mean pooled), Qwen3-Reranker's the difference of its two rows' dot
// products with the last state (the log-odds of "yes"), both against
// float64 formulas over the F32 weights.
func TestRankHeads(t *testing.T) {
	x := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Sin(float64(3*i + 1)))
		}
		return v
	}
	dot := func(w []float32, row, n int, v []float64) float64 {
		s := 0.0
		for j := 0; j < n; j++ {
			s += float64(w[row*n+j]) * v[j]
		}
		return s
	}

	f := synthBuild(t, synth.Options{Arch: "modern-bert", Preset: "tiny", Type: ggml.TypeF32, Seed: 5, Rerank: true})
	m, err := Load(f, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := m.Config()
	if c.RankOutputs != 1 || c.RankPooling != PoolMean || c.RankLogOdds {
		t.Fatalf("modern-bert head: %d outputs, %v, log-odds %v", c.RankOutputs, c.RankPooling, c.RankLogOdds)
	}
	in := x(c.Dim)
	in64 := make([]float64, c.Dim)
	for i, v := range in {
		in64[i] = float64(v)
	}
	W, nw, Wo, bo := rankTensor(t, f, "cls.weight"), rankTensor(t, f, "cls.norm.weight"), rankTensor(t, f, "cls.output.weight"), rankTensor(t, f, "cls.output.bias")
	h := make([]float64, c.Dim)
	mean := 0.0
	for r := range h {
		s := dot(W, r, c.Dim, in64)
		h[r] = 0.5 * s * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(s+0.044715*s*s*s)))
		mean += h[r] / float64(c.Dim)
	}
	vr := 0.0
	for _, v := range h {
		vr += (v - mean) * (v - mean) / float64(c.Dim)
	}
	for r := range h {
		h[r] = (h[r] - mean) / math.Sqrt(vr+float64(c.NormEps)) * float64(nw[r])
	}
	want := dot(Wo, 0, c.Dim, h) + float64(bo[0])
	got := make([]float32, 1)
	if err := m.Rank(got, in); err != nil || math.Abs(float64(got[0])-want) > 1e-4*(1+math.Abs(want)) {
		t.Fatalf("modern-bert score %g (%v), want %g", got[0], err, want)
	}

	f = synthBuild(t, synth.Options{Arch: "qwen3", Preset: "tiny", Type: ggml.TypeF32, Seed: 5, Rerank: true})
	q, err := Load(f, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	c = q.Config()
	if c.RankOutputs != 1 || c.RankPooling != PoolLast || !c.RankLogOdds || c.Pooling != PoolRank {
		t.Fatalf("qwen3 head: %d outputs, %v, log-odds %v, pooling %v", c.RankOutputs, c.RankPooling, c.RankLogOdds, c.Pooling)
	}
	in = x(c.Dim)
	in64 = make([]float64, c.Dim)
	for i, v := range in {
		in64[i] = float64(v)
	}
	Wo = rankTensor(t, f, "cls.output.weight")
	want = dot(Wo, 0, c.Dim, in64) - dot(Wo, 1, c.Dim, in64)
	if err := q.Rank(got, in); err != nil || math.Abs(float64(got[0])-want) > 1e-4*(1+math.Abs(want)) {
		t.Fatalf("qwen3 log-odds %g (%v), want %g", got[0], err, want)
	}
	if err := q.Rank(got, in[:3]); !errors.Is(err, ErrBadBatch) {
		t.Fatalf("a state of 3 values: %v", err)
	}
}

// TestAlibiSlopes: ALiBi's slopes with maximum bias 8 are 2^−1 … 2^−8 for
// 8 heads; with 12, the first 8 as those and the others 2^−0.5, 2^−1.5,
// 2^−2.5, 2^−3.5 (the odd powers of 2^−1/2, as in ALiBi's paper and ggml).
func TestAlibiSlopes(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []float64
	}{
		{8, []float64{-1, -2, -3, -4, -5, -6, -7, -8}},
		{12, []float64{-1, -2, -3, -4, -5, -6, -7, -8, -0.5, -1.5, -2.5, -3.5}},
	} {
		got := alibiSlopes(tc.n, alibiMaxBias)
		for h, e := range tc.want {
			if w := math.Pow(2, e); math.Abs(float64(got[h])-w) > 1e-6*w {
				t.Fatalf("%d heads: slope %d = %g, want 2^%g", tc.n, h, got[h], e)
			}
		}
	}
}
