package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"oengine/ggml"
)

// BenchmarkGPUQuantGemm measures prefill matrix products at 2048 tokens on
// Llama-3-8B shapes (4096x4096: q/o; 14336x4096: gate/up): MatMul's
// tensor-core GEMM over quantized weights (gemm_mma_<type>, activations
// rounded to F16 included) next to cuBLAS on the same shape with F16
// weights (GemmF16, activations already F16). Each quantized case reports
// TFLOPS, the cuBLAS TFLOPS measured beside it and "of_cuBLAS", their
// ratio (the prefill target is >= 0.5). Not named BenchmarkGPUGemm*:
// scripts/gpu-check.sh reads that one as the cuBLAS reference.
func BenchmarkGPUQuantGemm(b *testing.B) {
	d := gpu(b)
	const n = 2048
	for _, sh := range [][2]int{{4096, 4096}, {14336, 4096}} {
		for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeQ6_K} {
			b.Run(fmt.Sprintf("%dx%d/%s", sh[0], sh[1], typ), func(b *testing.B) {
				rows, cols := sh[0], sh[1]
				flops := 2 * float64(rows) * float64(cols) * n
				var tq, tb time.Duration
				for i := 0; i < b.N; i++ {
					tq, tb = benchQuantGemm(b, d, typ, rows, cols, n)
				}
				if tb == 0 {
					b.Fatal(ErrNoCUBLAS)
				}
				b.ReportMetric(flops/tq.Seconds()/1e12, "TFLOPS")
				b.ReportMetric(flops/tb.Seconds()/1e12, "cuBLAS_TFLOPS")
				b.ReportMetric(tb.Seconds()/tq.Seconds(), "of_cuBLAS")
			})
		}
	}
}

// benchQuantGemm returns the time of one MatMul of n tokens over a random
// rows×cols matrix of type typ, and of one cuBLAS F16 GEMM of that shape
// (0 without cuBLAS).
func benchQuantGemm(b testing.TB, d *Device, typ ggml.Type, rows, cols, n int) (quant, blas time.Duration) {
	rb, _ := typ.RowBytes(cols)
	data := make([]byte, rows*rb)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i+8 <= len(data); i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8; j++ {
			data[i+j] = byte(v >> (8 * j))
		}
	}
	// Finite block scales: clear the top exponent bits of every F16 scale.
	bs, be := typ.BlockBytes(), typ.BlockElems()
	for blk := 0; blk < rows*cols/be; blk++ {
		p := blk * bs
		switch typ {
		case ggml.TypeQ8_0, ggml.TypeQ4_0:
			data[p+1] &= 0x3b
		case ggml.TypeQ4_K:
			data[p+1] &= 0x3b
			data[p+3] &= 0x3b
		case ggml.TypeQ6_K:
			data[p+209] &= 0x3b
		}
	}
	time3 := func(s *Stream, f func() error) (time.Duration, error) {
		if err := f(); err != nil { // warm-up
			return 0, err
		}
		if err := s.Sync(); err != nil {
			return 0, err
		}
		const reps = 5
		t0 := time.Now()
		for r := 0; r < reps; r++ {
			if err := f(); err != nil {
				return 0, err
			}
		}
		err := s.Sync()
		return time.Since(t0) / reps, err
	}
	do(b, d, func(s *Stream) error {
		w, err := s.UploadWeight(typ, rows, cols, data)
		if err != nil {
			return err
		}
		defer s.Free(w.Ptr)
		w16, err := s.Alloc(uint64(rows * cols * 2))
		if err != nil {
			return err
		}
		defer s.Free(w16)
		x, err := s.Alloc(uint64(n * cols * 4))
		if err != nil {
			return err
		}
		defer s.Free(x)
		x16, err := s.Alloc(uint64(n * cols * 2))
		if err != nil {
			return err
		}
		defer s.Free(x16)
		y, err := s.Alloc(uint64(n * rows * 4))
		if err != nil {
			return err
		}
		defer s.Free(y)
		for _, p := range []struct {
			p DevPtr
			n int
		}{{w16, rows * cols * 2}, {x, n * cols * 4}, {x16, n * cols * 2}} {
			if err := s.Zero(p.p, uint64(p.n)); err != nil {
				return err
			}
		}
		if matmulRoute(typ, n, s.HasBLAS(), s.Info().CC()) != pathMMA {
			return fmt.Errorf("MatMul of %d tokens of %s does not take the tensor-core path", n, typ)
		}
		if quant, err = time3(s, func() error { return s.MatMul(y, w, x, n) }); err != nil {
			return err
		}
		if !s.HasBLAS() {
			return nil
		}
		blas, err = time3(s, func() error { return s.GemmF16(y, w16, x16, rows, cols, n) })
		return err
	})
	return quant, blas
}

// The benchmark's code runs on the fake driver (kernels do nothing there;
// the path and buffer sizes are what is checked before a GPU run).
func TestQuantGemmBenchOnFake(t *testing.T) {
	d, _, err := OpenFake(func(*FakeMemory, string, Dim3, Dim3, uint32, []Arg) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeQ6_K} {
		if q, _ := benchQuantGemm(t, d, typ, 256, 512, 128); q <= 0 {
			t.Fatalf("%s: time %v", typ, q)
		}
	}
}
