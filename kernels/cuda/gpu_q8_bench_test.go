package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"oengine/ggml"
)

// BenchmarkGPUGemvQ8 measures the int8-activation decode GEMV (gemv_q8_*,
// one launch for all the step's tokens) on Llama-3-8B shapes: q/o
// (4096x4096), gate or up (14336x4096) and down (4096x14336), for batch 1
// and 32 (the decode targets of docs: batch 32 aggregate against batch 1)
// and 8 and 64. GB/s counts the weight bytes read once per launch: the
// figure scripts/gpu-check.sh holds against the copy bandwidth; tok/s is n
// tokens per launch. The activations are quantized once before timing
// (the decoder quantizes once per use site; BenchmarkGPUQuantizeQ8 times
// that).
func BenchmarkGPUGemvQ8(b *testing.B) {
	d := gpu(b)
	shapes := []struct {
		name       string
		rows, cols int
	}{{"4096x4096", 4096, 4096}, {"14336x4096", 14336, 4096}, {"4096x14336", 4096, 14336}}
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeQ6_K} {
		for _, sh := range shapes {
			for _, n := range []int{1, 8, 32, 64} {
				b.Run(fmt.Sprintf("%s/%s/n=%d", typ, sh.name, n), func(b *testing.B) {
					benchGemvQ8(b, d, typ, sh.rows, sh.cols, n)
				})
			}
		}
	}
}

// randBytes returns n seeded random bytes (weights whose timing, not
// values, matters; F16 scales may be inf or NaN).
func randBytes(seed uint64, n int) []byte {
	data := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, seed))
	for i := 0; i < len(data); i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8 && i+j < len(data); j++ {
			data[i+j] = byte(v >> (8 * j))
		}
	}
	return data
}

func benchGemvQ8(b *testing.B, d *Device, typ ggml.Type, rows, cols, n int) {
	rb, _ := typ.RowBytes(cols)
	bytes := rows * rb
	data := randBytes(3, bytes)
	var el time.Duration
	do(b, d, func(s *Stream) error {
		w, err := s.UploadWeight(typ, rows, cols, data)
		if err != nil {
			return err
		}
		defer s.Free(w.Ptr)
		x, _ := s.Alloc(uint64(4 * n * cols))
		kind := Q8KindOf(typ)
		xq, _ := s.Alloc(uint64(n * Q8ActRowBytes(kind, cols)))
		y, _ := s.Alloc(uint64(4 * n * rows))
		defer s.Free(x)
		defer s.Free(xq)
		defer s.Free(y)
		if err := s.UploadF32(x, randF32(rand.New(rand.NewPCG(4, 4)), n*cols, 1)); err != nil {
			return err
		}
		if err := s.QuantizeAct(kind, xq, x, n, cols); err != nil {
			return err
		}
		for i := 0; i < 3; i++ { // warm-up
			if err := s.GemvQ8(y, w, xq, n); err != nil {
				return err
			}
		}
		if err := s.Sync(); err != nil {
			return err
		}
		b.ResetTimer()
		t0 := time.Now()
		for i := 0; i < b.N; i++ {
			if err := s.GemvQ8(y, w, xq, n); err != nil {
				return err
			}
		}
		err = s.Sync()
		el = time.Since(t0)
		return err
	})
	b.ReportMetric(float64(bytes)*float64(b.N)/el.Seconds()/1e9, "GB/s")
	b.ReportMetric(float64(n)*float64(b.N)/el.Seconds(), "tok/s")
}

// BenchmarkGPUQuantizeQ8 times the fused RMSNorm + q8_1 quantization of a
// step's hidden states (dim 4096) for batch 1 and 32.
func BenchmarkGPUQuantizeQ8(b *testing.B) {
	d := gpu(b)
	const cols = 4096
	for _, n := range []int{1, 32} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var el time.Duration
			do(b, d, func(s *Stream) error {
				x, err := upF32(s, randF32(rand.New(rand.NewPCG(5, 5)), n*cols, 1))
				if err != nil {
					return err
				}
				defer s.Free(x)
				xq, _ := s.Alloc(uint64(Q8Bytes(n, cols)))
				defer s.Free(xq)
				if err := s.RMSNormQ8(xq, 0, x, 0, n, cols, 1e-5); err != nil {
					return err
				}
				if err := s.Sync(); err != nil {
					return err
				}
				b.ResetTimer()
				t0 := time.Now()
				for i := 0; i < b.N; i++ {
					if err := s.RMSNormQ8(xq, 0, x, 0, n, cols, 1e-5); err != nil {
						return err
					}
				}
				err = s.Sync()
				el = time.Since(t0)
				return err
			})
			b.ReportMetric(float64(el.Nanoseconds())/1e3/float64(b.N), "us/op")
		})
	}
}
