package cudaemu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
	"oengine/kernels/cpu"
	"oengine/kernels/cuda"
)

// MatMul at prefill batch sizes on the emulated device (sm_90, no cuBLAS)
// runs gemm_mma for quantized and F16 weights. Its result is within the
// F16 bound of the plain float64 product of the exactly decoded weights:
// rounding w and x to F16 moves each product by at most (2^-10 + 2^-22)
// of |w·x|, and float32 accumulation over cols terms adds at most
// cols·2^-24 of Σ|w·x|; 1e-6 absolute covers F16 subnormals. It also
// equals the product of the F16-rounded operands within float32
// accumulation, and differs from the exact product by more than float32
// rounding (the GEMV path would not), so the reduced-precision path is
// the one that ran.
func TestEmulatedMatMulMMA(t *testing.T) {
	d, err := Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rng := rand.New(rand.NewPCG(31, 32))
	for _, tc := range []struct {
		typ           ggml.Type
		rows, cols, n int
	}{
		{ggml.TypeF16, 150, 96, cuda.MMAMinTokens},
		{ggml.TypeQ8_0, 130, 160, 130},
		{ggml.TypeQ4_0, 67, 256, 100},
		{ggml.TypeQ4_K, 129, 512, 75},
		{ggml.TypeQ6_K, 70, 256, 129},
	} {
		t.Run(fmt.Sprintf("%s/n=%d", tc.typ, tc.n), func(t *testing.T) {
			rows, cols, n := tc.rows, tc.cols, tc.n
			wf := make([]float32, rows*cols)
			for i := range wf {
				wf[i] = float32(rng.NormFloat64())
			}
			data := encodeWeights(t, tc.typ, wf, rows, cols)
			w := make([]float32, rows*cols)
			if err := cpu.Dequantize(tc.typ, data, w); err != nil {
				t.Fatal(err)
			}
			x := make([]float32, n*cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			got := make([]float32, n*rows)
			err := d.Do(func(s *cuda.Stream) error {
				wt, err := s.UploadWeight(tc.typ, rows, cols, data)
				if err != nil {
					return err
				}
				defer s.Free(wt.Ptr)
				xp, _ := s.Alloc(uint64(4 * len(x)))
				defer s.Free(xp)
				yp, _ := s.Alloc(uint64(4 * len(got)))
				defer s.Free(yp)
				if err := s.UploadF32(xp, x); err != nil {
					return err
				}
				if err := s.MatMul(yp, wt, xp, n); err != nil {
					return err
				}
				return s.DownloadF32(got, yp)
			})
			if err != nil {
				t.Fatal(err)
			}
			h := func(v float32) float64 { return float64(cpu.F16ToF32(cpu.F32ToF16(v))) }
			bound := math.Ldexp(1, -10) + math.Ldexp(1, -22) + float64(cols)*math.Ldexp(1, -24)
			var maxRel float64
			for tk := 0; tk < n; tk++ {
				for r := 0; r < rows; r++ {
					var exact, f16, mag float64
					for k := 0; k < cols; k++ {
						wv, xv := w[r*cols+k], x[tk*cols+k]
						exact += float64(wv) * float64(xv)
						f16 += h(wv) * h(xv)
						mag += math.Abs(float64(wv) * float64(xv))
					}
					g := float64(got[tk*rows+r])
					if d := math.Abs(g - exact); !(d <= bound*mag+1e-6) {
						t.Fatalf("y[%d][%d] = %v, exact %v: off by %g > F16 bound %g", tk, r, g, exact, d, bound*mag+1e-6)
					}
					if d := math.Abs(g - f16); !(d <= float64(cols)*math.Ldexp(1, -24)*mag+1e-7) {
						t.Fatalf("y[%d][%d] = %v, F16-operand product %v", tk, r, g, f16)
					}
					maxRel = math.Max(maxRel, math.Abs(g-exact)/mag)
				}
			}
			if maxRel < 1e-5 {
				t.Fatalf("max error %g of Σ|w·x|: no F16 rounding, the GEMV path ran", maxRel)
			}
		})
	}
}

// encodeWeights returns the rows×cols matrix x in type typ.
func encodeWeights(t *testing.T, typ ggml.Type, x []float32, rows, cols int) []byte {
	t.Helper()
	rb, err := typ.RowBytes(cols)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, rows*rb)
	if typ == ggml.TypeF16 {
		for i, v := range x {
			h := cpu.F32ToF16(v)
			out[2*i], out[2*i+1] = byte(h), byte(h>>8)
		}
		return out
	}
	if err := cpu.Quantize(typ, x, out); err != nil {
		t.Fatal(err)
	}
	return out
}
