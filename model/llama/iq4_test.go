package llama

import (
	"math"
	"testing"

	"oengine/ggml"
	"oengine/kernels/cpu"
	"oengine/model/gguf"
	"oengine/model/synth"
)

// TestIQ4MatchesDequantized: models whose matrices are IQ4_NL or IQ4_XS
// compute nearly the logits of the same file with those matrices decoded
// to F32 by cpu.Dequantize (which kernels/cpu checks value for value
// against ggml's). The only difference left is the 8-bit quantization
// of the activations the IQ4 kernels multiply with. The logits must also
// be bitwise the same whether the prompt runs at once or token by token,
// and through the server's load path.
func TestIQ4MatchesDequantized(t *testing.T) {
	dims := synth.Dims{Dim: 256, Layers: 2, Heads: 4, KVHeads: 2, FFN: 768, Vocab: 520, CtxLen: 256, RopeBase: 10000}
	cases := []struct {
		name string
		o    synth.Options
		want ggml.Type // the type of blk.0.ffn_down.weight
	}{
		{"llama-IQ4_XS", synth.Options{Arch: "llama", Dims: dims, Type: ggml.TypeIQ4_XS, Seed: 9}, ggml.TypeIQ4_XS},
		{"qwen2-IQ4_NL", synth.Options{Arch: "qwen2", Dims: dims, Type: ggml.TypeIQ4_NL, Seed: 9}, ggml.TypeIQ4_NL},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := synthBuild(t, c.o)
			if ti, _ := f.Tensor("blk.0.ffn_down.weight"); ti.Type != c.want {
				t.Fatalf("ffn_down is %s", ti.Type)
			}
			decoded := 0
			f32 := rewrite(t, f, nil, func(ti *gguf.TensorInfo) (ggml.Type, []uint64, []byte) {
				if ti.Type != ggml.TypeIQ4_NL && ti.Type != ggml.TypeIQ4_XS {
					return ti.Type, ti.Dims, ti.Data
				}
				decoded++
				vals := make([]float32, ti.Elements())
				if err := cpu.Dequantize(ti.Type, ti.Data, vals); err != nil {
					t.Fatal(err)
				}
				out := make([]byte, 4*len(vals))
				if err := cpu.Quantize(ggml.TypeF32, vals, out); err != nil {
					t.Fatal(err)
				}
				return ggml.TypeF32, ti.Dims, out
			})
			if decoded < 7*2 {
				t.Fatalf("%d IQ4 matrices", decoded)
			}
			m, err := Load(f, Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ref, err := Load(f32, Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			served := synthLoadServed(t, c.o)
			defer served.Close()

			V := m.Config().Vocab
			const n = 24
			tokens := testTokens(n, V, 5)
			table := []int32{0, 1, 2}
			kv := func(m *Model) *KV {
				kv, err := m.NewKV(4, 16, KVF16)
				if err != nil {
					t.Fatal(err)
				}
				return kv
			}
			got := runChunks(t, m, kv(m), table, tokens, []int{n})
			want := runChunks(t, ref, kv(ref), table, tokens, []int{n})
			if i := firstDiff(runChunks(t, m, kv(m), table, tokens, []int{1}), got); i >= 0 {
				t.Fatalf("token by token differs from one prefill at logit %d", i)
			}
			if i := firstDiff(runChunks(t, served, kv(served), table, tokens, []int{n}), got); i >= 0 {
				t.Fatalf("served load differs at logit %d", i)
			}
			var worst, sum float64
			for p := 0; p < n; p++ {
				lg, lw := logSoftmax(got[p*V:(p+1)*V]), logSoftmax(want[p*V:(p+1)*V])
				for i := range lg {
					d := math.Abs(lg[i] - lw[i])
					worst = max(worst, d)
					sum += d
				}
			}
			mean := sum / float64(n*V)
			t.Logf("log-prob difference to the F32 twin: max %.3g mean %.3g", worst, mean)
			// The same comparison gives max 0.14 / mean 0.028 for a Q4_0 and
			// 0.21 / 0.044 for a Q4_K model of these shapes (IQ4: 0.14-0.19 /
			// 0.028-0.040); a wrong level or scale gives whole units.
			if worst > 0.4 || mean > 0.08 {
				t.Fatalf("log-probs differ from the dequantized model: max %.3g mean %.3g", worst, mean)
			}
		})
	}
}

func logSoftmax(x []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	var z float64
	for _, v := range x {
		z += math.Exp(float64(v) - m)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - m - math.Log(z)
	}
	return out
}
