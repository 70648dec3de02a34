package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"oengine/ggml"
	"oengine/kernels/cpu"
)

// GPU parity tests: every kernel against its CPU twin. They skip on a
// machine without a usable GPU, and fail there when REQUIRE_GPU=1 (the GPU
// check script sets it). All tests share one Device.

var (
	gpuOnce sync.Once
	gpuDev  *Device
	gpuErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if gpuDev != nil {
		gpuDev.Close()
	}
	os.Exit(code)
}

// gpu returns the shared test device or skips (fails under REQUIRE_GPU=1).
func gpu(t testing.TB) *Device {
	t.Helper()
	gpuOnce.Do(func() {
		gpuDev, gpuErr = Open(0, Options{})
		if gpuErr == nil {
			fmt.Fprintf(os.Stderr, "cuda tests on %s\n", gpuDev.Info())
		}
	})
	if gpuErr != nil {
		if os.Getenv("REQUIRE_GPU") == "1" {
			t.Fatalf("REQUIRE_GPU=1 but no usable GPU: %v", gpuErr)
		}
		t.Skipf("no usable GPU: %v", gpuErr)
	}
	return gpuDev
}

// do runs fn on the device and fails the test on error.
func do(t testing.TB, d *Device, fn func(s *Stream) error) {
	t.Helper()
	if err := d.Do(fn); err != nil {
		t.Fatal(err)
	}
}

func randF32(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

// upF32 allocates and uploads float32 values.
func upF32(s *Stream, v []float32) (DevPtr, error) {
	p, err := s.Alloc(uint64(4 * max(1, len(v))))
	if err != nil {
		return 0, err
	}
	return p, s.UploadF32(p, v)
}

func upI32(s *Stream, v []int32) (DevPtr, error) {
	p, err := s.Alloc(uint64(4 * max(1, len(v))))
	if err != nil {
		return 0, err
	}
	return p, s.UploadI32(p, v)
}

// encode returns the rows×cols matrix x in type t (row-major blocks).
func encode(t testing.TB, typ ggml.Type, x []float32, rows, cols int) []byte {
	t.Helper()
	rb, err := typ.RowBytes(cols)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, rows*rb)
	switch typ {
	case ggml.TypeF32:
		copy(out, bytesOf(x))
	case ggml.TypeF16:
		for i, v := range x {
			h := cpu.F32ToF16(v)
			out[2*i], out[2*i+1] = byte(h), byte(h>>8)
		}
	case ggml.TypeBF16:
		for i, v := range x {
			h := cpu.F32ToBF16(v)
			out[2*i], out[2*i+1] = byte(h), byte(h>>8)
		}
	default:
		if err := cpu.Quantize(typ, x, out); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

var gpuTypes = []ggml.Type{ggml.TypeF32, ggml.TypeF16, ggml.TypeBF16, ggml.TypeQ8_0, ggml.TypeQ4_0, ggml.TypeQ4_K, ggml.TypeQ6_K}

func TestGPUInfo(t *testing.T) {
	d := gpu(t)
	info := d.Info()
	if info.Name == "" || info.Major < 7 || info.TotalMem == 0 || info.SMs == 0 {
		t.Fatalf("info %+v", info)
	}
	do(t, d, func(s *Stream) error {
		free, total, err := s.MemInfo()
		if err != nil {
			return err
		}
		if free == 0 || free > total {
			t.Errorf("meminfo free %d total %d", free, total)
		}
		t.Logf("%s: %.1f GiB free of %.1f, nominal bandwidth %.2f TB/s, cuBLAS %v", info, float64(free)/(1<<30), float64(total)/(1<<30), info.Bandwidth/1e12, s.HasBLAS())
		return nil
	})
}

// TestGPUGemvAndMatMul: y = x·Wᵀ for every weight type against
// cpu.MatMulRef (float64 over exactly decoded weights). The device
// accumulates in float32: tolerance 1e-5 of Σ|w·x| plus 1e-6.
// The GEMM paths (see MatMul) round x and W to F16: 2e-3 (x to BF16: 4e-3).
func TestGPUGemvAndMatMul(t *testing.T) {
	d := gpu(t)
	rng := rand.New(rand.NewPCG(7, 8))
	const rows, cols = 67, 512
	for _, typ := range gpuTypes {
		for _, n := range []int{1, 3, 8, 11, 40, 130} {
			t.Run(fmt.Sprintf("%s/n=%d", typ, n), func(t *testing.T) {
				data := encode(t, typ, randF32(rng, rows*cols, 1), rows, cols)
				m, err := cpu.NewMatrix(typ, rows, cols, data)
				if err != nil {
					t.Fatal(err)
				}
				x := randF32(rng, n*cols, 1)
				want := make([]float32, n*rows)
				cpu.MatMulRef(want, m, x, n)
				// Σ|w||x| per output for the tolerance.
				wf := make([]float32, rows*cols)
				cpu.Dequantize(typ, data, wf)
				got := make([]float32, n*rows)
				do(t, d, func(s *Stream) error {
					w, err := s.UploadWeight(typ, rows, cols, data)
					if err != nil {
						return err
					}
					defer s.Free(w.Ptr)
					xp, err := upF32(s, x)
					if err != nil {
						return err
					}
					defer s.Free(xp)
					yp, err := s.Alloc(uint64(4 * n * rows))
					if err != nil {
						return err
					}
					defer s.Free(yp)
					if err := s.MatMul(yp, w, xp, n); err != nil {
						return err
					}
					return s.DownloadF32(got, yp)
				})
				rel := 1e-5
				var route matmulPath
				var q8 bool
				d.Do(func(s *Stream) error {
					route, q8 = matmulRoute(typ, n, s.HasBLAS(), s.Info().CC()), s.UsesQ8(typ, n)
					return nil
				})
				switch route {
				case pathMMA, pathCublasF16:
					rel = 2e-3 // F16 operands
				case pathCublasBF16:
					rel = 4e-3 // BF16 activations
				}
				// The int8 route rounds each activation to its block's grid:
				// |x - x̂| <= amax(block)/254 (ops_q8.go), so the product
				// moves by at most Σ|w|·amax/254 beyond float rounding.
				qblock := 32
				if Q8KindOf(typ) == Q8K {
					qblock = 256
				}
				for i := 0; i < n; i++ {
					amax := make([]float64, cols/qblock)
					for c := 0; c < cols; c++ {
						amax[c/qblock] = math.Max(amax[c/qblock], math.Abs(float64(x[i*cols+c])))
					}
					for r := 0; r < rows; r++ {
						var mag, qerr float64
						for c := 0; c < cols; c++ {
							mag += math.Abs(float64(wf[r*cols+c]) * float64(x[i*cols+c]))
							qerr += math.Abs(float64(wf[r*cols+c])) * amax[c/qblock] / 254
						}
						tol := rel*mag + 1e-6
						if q8 {
							tol += 1.001 * qerr
						}
						g, w := got[i*rows+r], want[i*rows+r]
						if math.Abs(float64(g-w)) > tol {
							t.Fatalf("y[%d][%d] = %v, reference %v (Σ|wx| %g)", i, r, g, w, mag)
						}
					}
				}
			})
		}
	}
}

// TestGPUGetRows: embedding gather equals cpu.Dequantize (up to FMA
// contraction in the K-quant scale/min step).
func TestGPUGetRows(t *testing.T) {
	d := gpu(t)
	rng := rand.New(rand.NewPCG(9, 10))
	const rows, cols = 40, 256
	for _, typ := range gpuTypes {
		t.Run(typ.String(), func(t *testing.T) {
			data := encode(t, typ, randF32(rng, rows*cols, 0.5), rows, cols)
			want := make([]float32, rows*cols)
			cpu.Dequantize(typ, data, want)
			ids := []int32{3, 0, 39, 3, 17, -1, 40}
			got := make([]float32, len(ids)*cols)
			do(t, d, func(s *Stream) error {
				w, err := s.UploadWeight(typ, rows, cols, data)
				if err != nil {
					return err
				}
				defer s.Free(w.Ptr)
				ip, _ := upI32(s, ids)
				defer s.Free(ip)
				op, _ := s.Alloc(uint64(4 * len(got)))
				defer s.Free(op)
				if err := s.GetRows(op, w, ip, len(ids)); err != nil {
					return err
				}
				return s.DownloadF32(got, op)
			})
			for i, id := range ids {
				for c := 0; c < cols; c++ {
					g := got[i*cols+c]
					var w float32
					if id >= 0 && id < rows {
						w = want[int(id)*cols+c]
					}
					if math.Abs(float64(g-w)) > 1e-6*math.Abs(float64(w))+1e-7 {
						t.Fatalf("row %d (id %d) col %d: %v, want %v", i, id, c, g, w)
					}
				}
			}
		})
	}
}

func TestGPUElementwise(t *testing.T) {
	d := gpu(t)
	rng := rand.New(rand.NewPCG(11, 12))
	const rows, n = 5, 4096
	x := randF32(rng, rows*n, 2)
	w := randF32(rng, n, 1)
	b := randF32(rng, rows*n, 1)
	bias := randF32(rng, n, 1)
	norm := make([]float32, rows*n)
	normNoW := make([]float32, rows*n)
	sum := make([]float32, rows*n)
	silu := make([]float32, rows*n)
	split := make([]float32, rows*n/2)
	biased := make([]float32, rows*n)
	do(t, d, func(s *Stream) error {
		xp, _ := upF32(s, x)
		wp, _ := upF32(s, w)
		bp, _ := upF32(s, b)
		biasp, _ := upF32(s, bias)
		o, _ := s.Alloc(4 * rows * n)
		defer func() {
			for _, p := range []DevPtr{xp, wp, bp, biasp, o} {
				s.Free(p)
			}
		}()
		steps := []struct {
			run func() error
			dst []float32
		}{
			{func() error { return s.RMSNorm(o, xp, wp, rows, n, 1e-5) }, norm},
			{func() error { return s.RMSNorm(o, xp, 0, rows, n, 1e-6) }, normNoW},
			{func() error { return s.Add(o, xp, bp, rows*n) }, sum},
			{func() error { return s.SiLUMul(o, xp, bp, rows*n) }, silu},
			{func() error { return s.SiLUMulSplit(o, xp, rows, n/2) }, split},
			{func() error {
				if err := s.Copy(o, xp, 4*rows*n); err != nil {
					return err
				}
				return s.AddBias(o, biasp, rows, n)
			}, biased},
		}
		for _, st := range steps {
			if err := st.run(); err != nil {
				return err
			}
			if err := s.DownloadF32(st.dst, o); err != nil {
				return err
			}
		}
		return nil
	})
	check := func(name string, got, want []float32, tol float64) {
		t.Helper()
		for i := range want {
			if math.Abs(float64(got[i]-want[i])) > tol*math.Max(1, math.Abs(float64(want[i]))) {
				t.Fatalf("%s[%d] = %v, want %v", name, i, got[i], want[i])
			}
		}
	}
	want := make([]float32, rows*n)
	for r := 0; r < rows; r++ {
		cpu.RMSNormRef(want[r*n:(r+1)*n], x[r*n:(r+1)*n], w, 1e-5)
	}
	check("rms_norm", norm, want, 1e-5)
	for r := 0; r < rows; r++ {
		cpu.RMSNormRef(want[r*n:(r+1)*n], x[r*n:(r+1)*n], nil, 1e-6)
	}
	check("rms_norm no weight", normNoW, want, 1e-5)
	for i := range want {
		want[i] = x[i] + b[i]
	}
	check("add", sum, want, 0)
	cpu.SwiGLURef(want, x, b)
	check("silu_mul", silu, want, 1e-6)
	half := n / 2
	for r := 0; r < rows; r++ {
		cpu.SwiGLURef(want[r*half:(r+1)*half], x[r*n:r*n+half], x[r*n+half:(r+1)*n])
	}
	check("silu_mul_split", split, want[:rows*half], 1e-6)
	for i := range want {
		want[i] = x[i] + bias[i%n]
	}
	check("add_bias", biased, want, 0)
}

// TestGPURopeKVWrite: both layouts, large positions, with and without
// frequency factors, against cpu.RopeCache + cpu.Rope (bit-exact up to one
// float32 step from the sin/cos rounding) and the F16 cache rows.
func TestGPURopeKVWrite(t *testing.T) {
	d := gpu(t)
	rng := rand.New(rand.NewPCG(13, 14))
	const Hq, Hk, D, pageSize = 8, 2, 64, 16
	pos := []int32{0, 1, 17, 999, 4095, 70000}
	T := len(pos)
	for _, neox := range []bool{false, true} {
		for _, withFactors := range []bool{false, true} {
			t.Run(fmt.Sprintf("neox=%v/factors=%v", neox, withFactors), func(t *testing.T) {
				nRot := D
				if withFactors {
					nRot = 48 // partial rotation too
				}
				var factors []float32
				if withFactors {
					factors = make([]float32, nRot/2)
					for i := range factors {
						factors[i] = 1 + float32(i)/4
					}
				}
				q := randF32(rng, T*Hq*D, 1)
				k := randF32(rng, T*Hk*D, 1)
				v := randF32(rng, T*Hk*D, 1)
				slots := []int32{5, 0, 63, -1, 12, 40}
				gq := make([]float32, len(q))
				gk := make([]float32, len(k))
				kc := make([]uint16, 64*Hk*D)
				vc := make([]uint16, 64*Hk*D)
				p := RopeParams{Heads: Hq, KVHeads: Hk, HeadDim: D, NRot: nRot, Base: 10000, FreqScale: 0.5, NeoX: neox}
				do(t, d, func(s *Stream) error {
					qp, _ := upF32(s, q)
					kp, _ := upF32(s, k)
					vp, _ := upF32(s, v)
					pp, _ := upI32(s, pos)
					sp, _ := upI32(s, slots)
					kcp, _ := s.Alloc(uint64(2 * len(kc)))
					vcp, _ := s.Alloc(uint64(2 * len(vc)))
					s.Zero(kcp, uint64(2*len(kc)))
					s.Zero(vcp, uint64(2*len(vc)))
					if factors != nil {
						p.Factors, _ = upF32(s, factors)
					}
					defer func() {
						for _, x := range []DevPtr{qp, kp, vp, pp, sp, kcp, vcp, p.Factors} {
							s.Free(x)
						}
					}()
					if err := s.RopeKVWrite(qp, kp, vp, kcp, vcp, pp, sp, T, p); err != nil {
						return err
					}
					s.DownloadF32(gq, qp)
					s.DownloadF32(gk, kp)
					s.Download(bytesOf(kc), kcp)
					return s.Download(bytesOf(vc), vcp)
				})
				cs := make([]float32, nRot)
				for ti, ps := range pos {
					cpu.RopeCache(cs, ps, nRot, 10000, 0.5, factors)
					wq := append([]float32(nil), q[ti*Hq*D:(ti+1)*Hq*D]...)
					wk := append([]float32(nil), k[ti*Hk*D:(ti+1)*Hk*D]...)
					cpu.Rope(wq, Hq, D, nRot, cs, neox)
					cpu.Rope(wk, Hk, D, nRot, cs, neox)
					for i, w := range wq {
						if g := gq[ti*Hq*D+i]; g != w && math.Abs(float64(g-w)) > 2e-6*math.Max(1, math.Abs(float64(w))) {
							t.Fatalf("pos %d q[%d] = %v, want %v", ps, i, g, w)
						}
					}
					for i, w := range wk {
						if g := gk[ti*Hk*D+i]; g != w && math.Abs(float64(g-w)) > 2e-6*math.Max(1, math.Abs(float64(w))) {
							t.Fatalf("pos %d k[%d] = %v, want %v", ps, i, g, w)
						}
					}
					if slots[ti] < 0 {
						continue
					}
					row := int(slots[ti]) * Hk * D
					for i := 0; i < Hk*D; i++ {
						if gh, wh := kc[row+i], cpu.F32ToF16(gk[ti*Hk*D+i]); gh != wh {
							t.Fatalf("pos %d cache k[%d] = %#x, want %#x", ps, i, gh, wh)
						}
						if gh, wh := vc[row+i], cpu.F32ToF16(v[ti*Hk*D+i]); gh != wh {
							t.Fatalf("pos %d cache v[%d] = %#x, want %#x", ps, i, gh, wh)
						}
					}
				}
			})
		}
	}
}
