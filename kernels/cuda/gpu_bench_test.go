package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"oengine/ggml"
)

// BenchmarkGPUGemv measures decode-time matmul bandwidth on Llama-3-8B
// shapes: the q/o projection (4096x4096), the fused gate/up (28672x4096)
// and the down projection (4096x14336). It reports the weight bytes read
// per second (GB/s): the number that bounds decode tokens/s.
func BenchmarkGPUGemv(b *testing.B) {
	d := gpu(b)
	shapes := []struct {
		name       string
		rows, cols int
	}{{"4096x4096", 4096, 4096}, {"28672x4096", 28672, 4096}, {"4096x14336", 4096, 14336}}
	for _, typ := range []ggml.Type{ggml.TypeF16, ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeQ6_K} {
		for _, sh := range shapes {
			for _, n := range []int{1, 8} {
				b.Run(fmt.Sprintf("%s/%s/n=%d", typ, sh.name, n), func(b *testing.B) {
					benchGemv(b, d, typ, sh.rows, sh.cols, n)
				})
			}
		}
	}
}

func benchGemv(b *testing.B, d *Device, typ ggml.Type, rows, cols, n int) {
	rb, _ := typ.RowBytes(cols)
	bytes := rows * rb
	data := make([]byte, bytes)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < len(data); i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8 && i+j < len(data); j++ {
			data[i+j] = byte(v >> (8 * j))
		}
	}
	if typ == ggml.TypeF16 {
		for i := 1; i < len(data); i += 2 {
			data[i] &= 0x3b // finite halves
		}
	}
	var el time.Duration
	do(b, d, func(s *Stream) error {
		w, err := s.UploadWeight(typ, rows, cols, data)
		if err != nil {
			return err
		}
		defer s.Free(w.Ptr)
		x, _ := s.Alloc(uint64(4 * n * cols))
		y, _ := s.Alloc(uint64(4 * n * rows))
		defer s.Free(x)
		defer s.Free(y)
		s.Zero(x, uint64(4*n*cols))
		for i := 0; i < 3; i++ { // warm-up
			if err := s.Gemv(y, w, x, n); err != nil {
				return err
			}
		}
		if err := s.Sync(); err != nil {
			return err
		}
		b.ResetTimer()
		t0 := time.Now()
		for i := 0; i < b.N; i++ {
			if err := s.Gemv(y, w, x, n); err != nil {
				return err
			}
		}
		err = s.Sync()
		el = time.Since(t0)
		return err
	})
	b.ReportMetric(float64(bytes)*float64(b.N)/el.Seconds()/1e9, "GB/s")
}

// BenchmarkGPUAttnDecode: one decode token per sequence, 32 sequences or 1,
// Llama-3-8B heads (32/8, D 128), over contexts of 512 and 8192.
func BenchmarkGPUAttnDecode(b *testing.B) {
	d := gpu(b)
	for _, ctx := range []int{512, 8192} {
		for _, T := range []int{1, 32} {
			b.Run(fmt.Sprintf("ctx=%d/T=%d", ctx, T), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(2, 2))
				lens := make([]int, T)
				batch := make([][2]int32, T)
				for i := range lens {
					lens[i] = ctx
					batch[i] = [2]int32{int32(i), int32(ctx - 1)}
				}
				c := newAttnCaseFill(rng, 32, 8, 128, lens, batch, false)
				npos := make([]int32, T)
				for i := range npos {
					npos[i] = int32(ctx)
				}
				var el time.Duration
				do(b, d, func(s *Stream) error {
					var ptrs []DevPtr
					defer func() {
						for _, p := range ptrs {
							s.Free(p)
						}
					}()
					kc, _ := s.Alloc(uint64(2 * len(c.kc)))
					vc, _ := s.Alloc(uint64(2 * len(c.vc)))
					s.Upload(kc, bytesOf(c.kc))
					s.Upload(vc, bytesOf(c.vc))
					tables, _ := upI32(s, c.tables)
					seq, _ := upI32(s, c.seq)
					np, _ := upI32(s, npos)
					qp, _ := upF32(s, c.q)
					op, _ := s.Alloc(uint64(4 * len(c.q)))
					ptrs = append(ptrs, kc, vc, tables, seq, np, qp, op)
					run := func() error { return s.AttnDecode(op, qp, kc, vc, tables, seq, np, T, ctx, c.a) }
					if err := run(); err != nil {
						return err
					}
					s.Sync()
					b.ResetTimer()
					t0 := time.Now()
					for i := 0; i < b.N; i++ {
						if err := run(); err != nil {
							return err
						}
					}
					err := s.Sync()
					el = time.Since(t0)
					return err
				})
				kvBytes := float64(T * ctx * 8 * 128 * 2 * 2)
				b.ReportMetric(kvBytes*float64(b.N)/el.Seconds()/1e9, "GB/s")
				b.ReportMetric(float64(el.Microseconds())/float64(b.N), "us/op")
			})
		}
	}
}

// BenchmarkGPUCopy measures the device's memory bandwidth with a
// device-to-device copy of 2 GiB (each byte read once and written once):
// GB/s counts both directions, the traffic a read-bound kernel can reach;
// scripts/gpu-check.sh holds decode throughput against it.
func BenchmarkGPUCopy(b *testing.B) {
	d := gpu(b)
	var gbps float64
	for i := 0; i < b.N; i++ {
		gbps = copyBandwidth(b, d, 1<<30, 10)
	}
	b.ReportMetric(gbps, "GB/s")
}

// copyBandwidth copies n bytes reps times (after a warm-up) and returns
// the read+write traffic in GB/s.
func copyBandwidth(t testing.TB, d *Device, n uint64, reps int) float64 {
	var el time.Duration
	do(t, d, func(s *Stream) error {
		src, err := s.Alloc(n)
		if err != nil {
			return err
		}
		defer s.Free(src)
		dst, err := s.Alloc(n)
		if err != nil {
			return err
		}
		defer s.Free(dst)
		if err := s.Zero(src, n); err != nil {
			return err
		}
		if err := s.Copy(dst, src, n); err != nil {
			return err
		}
		if err := s.Sync(); err != nil {
			return err
		}
		t0 := time.Now()
		for i := 0; i < reps; i++ {
			if err := s.Copy(dst, src, n); err != nil {
				return err
			}
		}
		err = s.Sync()
		el = time.Since(t0)
		return err
	})
	return 2 * float64(n) * float64(reps) / el.Seconds() / 1e9
}

// BenchmarkGPUGemm measures cuBLAS (cublasGemmEx, F16 operands, F32
// accumulation) on the Llama-3-8B matrix shapes at 2048 tokens: the rate
// prefill is held against. It reports TFLOPS for the whole set of a
// layer's matrices (q, k, v, o, gate, up, down).
func BenchmarkGPUGemm(b *testing.B) {
	d := gpu(b)
	const n = 2048
	shapes := [][2]int{{4096, 4096}, {1024, 4096}, {1024, 4096}, {4096, 4096}, {14336, 4096}, {14336, 4096}, {4096, 14336}}
	var flops float64
	for _, sh := range shapes {
		flops += 2 * float64(sh[0]) * float64(sh[1]) * n
	}
	var el time.Duration
	for i := 0; i < b.N; i++ {
		do(b, d, func(s *Stream) error {
			if !s.HasBLAS() {
				return ErrNoCUBLAS
			}
			x, err := s.Alloc(n * 14336 * 2)
			if err != nil {
				return err
			}
			defer s.Free(x)
			y, err := s.Alloc(n * 14336 * 4)
			if err != nil {
				return err
			}
			defer s.Free(y)
			var ws []DevPtr
			for _, sh := range shapes {
				w, err := s.Alloc(uint64(sh[0] * sh[1] * 2))
				if err != nil {
					return err
				}
				defer s.Free(w)
				s.Zero(w, uint64(sh[0]*sh[1]*2))
				ws = append(ws, w)
			}
			s.Zero(x, n*14336*2)
			run := func() error {
				for j, sh := range shapes {
					if err := s.GemmF16(y, ws[j], x, sh[0], sh[1], n); err != nil {
						return err
					}
				}
				return nil
			}
			if err := run(); err != nil { // warm-up: heuristics, workspace
				return err
			}
			if err := s.Sync(); err != nil {
				return err
			}
			t0 := time.Now()
			const reps = 5
			for r := 0; r < reps; r++ {
				if err := run(); err != nil {
					return err
				}
			}
			err = s.Sync()
			el = time.Since(t0) / reps
			return err
		})
	}
	b.ReportMetric(flops/el.Seconds()/1e12, "TFLOPS")
}
