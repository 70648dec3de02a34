package cudaemu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"oengine/ggml"
	"oengine/internal/refdata"
	"oengine/kernels/cpu"
	"oengine/kernels/cuda"
	"oengine/model/gguf"
)

// randActs returns n rows of cols activations with magnitudes spread over
// three decades per block and a few outliers (as hidden states have), all
// blocks' amax above F16's normal range for d.
func randActs(rng *rand.Rand, n, cols int) []float32 {
	x := make([]float32, n*cols)
	for i := range x {
		scale := math.Pow(10, float64(i/32%3)-1) // 0.1, 1, 10 by block
		x[i] = float32(rng.NormFloat64() * scale)
		if rng.IntN(97) == 0 {
			x[i] *= 20
		}
	}
	return x
}

func emuOpen(t *testing.T) *Device {
	t.Helper()
	d, err := Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// gpuOpen returns the real device 0, or nil without one (a failure under
// REQUIRE_GPU=1): the q8 tests run on it too, against the same CPU
// references and bit for bit against the emulator's twins.
func gpuOpen(t *testing.T) *cuda.Device {
	t.Helper()
	d, err := cuda.Open(0, cuda.Options{})
	if err != nil {
		if os.Getenv("REQUIRE_GPU") == "1" {
			t.Fatalf("REQUIRE_GPU=1 but no usable GPU: %v", err)
		}
		return nil
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// quantizeOnDevice runs QuantizeQ8 (or RMSNormQ8 with weight w when w is
// not nil) on the emulated device and returns the q8_1 bytes and, for the
// norm, the f32 rows.
func quantizeOnDevice(t *testing.T, d *cuda.Device, kind cuda.Q8Kind, x, w []float32, n, cols int) ([]byte, []float32) {
	t.Helper()
	xq := make([]byte, n*cuda.Q8ActRowBytes(kind, cols))
	var out []float32
	err := d.Do(func(s *cuda.Stream) error {
		px, _ := s.Alloc(uint64(4 * len(x)))
		pq, _ := s.Alloc(uint64(len(xq)))
		defer s.Free(px)
		defer s.Free(pq)
		if err := s.UploadF32(px, x); err != nil {
			return err
		}
		if w == nil {
			if err := s.QuantizeAct(kind, pq, px, n, cols); err != nil {
				return err
			}
		} else {
			pw, _ := s.Alloc(uint64(4 * len(w)))
			po, _ := s.Alloc(uint64(4 * len(x)))
			defer s.Free(pw)
			defer s.Free(po)
			if err := s.UploadF32(pw, w); err != nil {
				return err
			}
			if err := s.RMSNormAct(kind, pq, po, px, pw, n, cols, 1e-5); err != nil {
				return err
			}
			out = make([]float32, len(x))
			if err := s.DownloadF32(out, po); err != nil {
				return err
			}
		}
		return s.Download(xq, pq)
	})
	if err != nil {
		t.Fatal(err)
	}
	return xq, out
}

// checkQ8Rows checks the q8_1 layout of ops_q8.go against x: for every
// block, qs is kernels/cpu's rounding of x·(127/amax), d is F16(amax/127),
// s is F16(d·Σqs), and |x - d·q| ≤ 0.57·amax/127.
func checkQ8Rows(t *testing.T, kind cuda.Q8Kind, x []float32, xq []byte, n, cols int) {
	t.Helper()
	if kind == cuda.Q8K {
		checkQ8KRows(t, x, xq, n, cols)
		return
	}
	rb := cuda.Q8RowBytes(cols)
	if rb%16 != 0 || rb < cols+cols/8 {
		t.Fatalf("row bytes %d for %d values", rb, cols)
	}
	for r := 0; r < n; r++ {
		row := xq[r*rb:]
		for b := 0; b < cols/32; b++ {
			blk := x[r*cols+32*b : r*cols+32*b+32]
			var amax float32
			for _, v := range blk {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			ds := binary.LittleEndian.Uint32(row[cols+4*b:])
			d, s := cpu.F16ToF32(uint16(ds)), cpu.F16ToF32(uint16(ds>>16))
			if want := cpu.F16ToF32(cpu.F32ToF16(amax / 127)); d != want {
				t.Fatalf("row %d block %d: d %v, want %v", r, b, d, want)
			}
			var id float32 // 127/amax, 0 for an all-zero block
			if amax != 0 {
				id = 127 / amax
			}
			sum := 0
			for j, v := range blk {
				q := int(int8(row[32*b+j]))
				sum += q
				if want := int(math.RoundToEven(float64(v * id))); q != want {
					t.Fatalf("row %d [%d]: q %d, want %d", r, 32*b+j, q, want)
				}
				if e := math.Abs(float64(v) - float64(d)*float64(q)); e > 0.57*float64(amax)/127 {
					t.Fatalf("row %d [%d]: |x - d·q| = %g > bound %g", r, 32*b+j, e, 0.57*float64(amax)/127)
				}
			}
			if want := cpu.F16ToF32(cpu.F32ToF16(d * float32(sum))); s != want {
				t.Fatalf("row %d block %d: s %v, want %v (Σq %d)", r, b, s, want, sum)
			}
		}
	}
}

// checkQ8KRows checks the q8_K layout of ops_q8.go against x: qs and d
// are the bytes of kernels/cpu's Q8_K blocks (cpu.Quantize), and |x - d·q|
// ≤ 0.5·amax/127 (plus float32 rounding).
func checkQ8KRows(t *testing.T, x []float32, xq []byte, n, cols int) {
	t.Helper()
	rb := cuda.Q8KRowBytes(cols)
	if rb%16 != 0 || rb < cols+cols/64 {
		t.Fatalf("row bytes %d for %d values", rb, cols)
	}
	var blk [292]byte
	for r := 0; r < n; r++ {
		row := xq[r*rb:]
		for b := 0; b < cols/256; b++ {
			xb := x[r*cols+256*b : r*cols+256*b+256]
			if err := cpu.Quantize(ggml.TypeQ8_K, xb, blk[:]); err != nil {
				t.Fatal(err)
			}
			if got, want := binary.LittleEndian.Uint32(row[cols+4*b:]), binary.LittleEndian.Uint32(blk[:]); got != want {
				t.Fatalf("row %d block %d: d %#x, cpu %#x", r, b, got, want)
			}
			d := math.Float32frombits(binary.LittleEndian.Uint32(row[cols+4*b:]))
			var amax float64
			for _, v := range xb {
				amax = math.Max(amax, math.Abs(float64(v)))
			}
			for j, v := range xb {
				q := int8(row[256*b+j])
				if q != int8(blk[4+j]) {
					t.Fatalf("row %d [%d]: q %d, cpu %d", r, 256*b+j, q, int8(blk[4+j]))
				}
				if e := math.Abs(float64(v) - float64(d)*float64(q)); e > 0.5000001*amax/127 {
					t.Fatalf("row %d [%d]: |x - d·q| = %g > bound %g", r, 256*b+j, e, 0.5*amax/127)
				}
			}
		}
	}
}

func TestQuantizeQ8Layout(t *testing.T) {
	emu, dev := emuOpen(t), gpuOpen(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		kind cuda.Q8Kind
		cols int
	}{{cuda.Q8_1, 32}, {cuda.Q8_1, 96}, {cuda.Q8_1, 4096}, {cuda.Q8K, 256}, {cuda.Q8K, 768}, {cuda.Q8K, 4096}} {
		const n = 3
		x := randActs(rng, n, tc.cols)
		copy(x[tc.cols:tc.cols+min(256, tc.cols)], make([]float32, 256)) // all-zero blocks: d = 0, q = 0
		x[2*tc.cols+5], x[2*tc.cols+9] = -1e4, 1e4                       // the largest |x| twice, opposite signs: the first sets the q8_K scale
		xq, _ := quantizeOnDevice(t, emu.Device, tc.kind, x, nil, n, tc.cols)
		checkQ8Rows(t, tc.kind, x, xq, n, tc.cols)
		if dev != nil {
			g, _ := quantizeOnDevice(t, dev, tc.kind, x, nil, n, tc.cols)
			checkQ8Rows(t, tc.kind, x, g, n, tc.cols)
			sameBytes(t, tc.kind, g, xq, n, tc.cols)
		}
	}
}

// sameBytes compares the device's q8_1 rows with the twin's (padding
// excluded).
func sameBytes(t *testing.T, kind cuda.Q8Kind, got, want []byte, n, cols int) {
	t.Helper()
	rb := cuda.Q8ActRowBytes(kind, cols)
	used := cols + cols/8
	if kind == cuda.Q8K {
		used = cols + cols/64
	}
	for r := 0; r < n; r++ {
		for i := 0; i < used; i++ {
			if got[r*rb+i] != want[r*rb+i] {
				t.Errorf("kind %d row %d byte %d: device %#x, twin %#x", kind, r, i, got[r*rb+i], want[r*rb+i])
				return
			}
		}
	}
}

// The fused norm writes what RMSNorm writes and the quantization of it.
func TestRMSNormQ8(t *testing.T) {
	for _, kind := range []cuda.Q8Kind{cuda.Q8_1, cuda.Q8K} {
		testRMSNormQ8(t, kind)
	}
}

func testRMSNormQ8(t *testing.T, kind cuda.Q8Kind) {
	emu, dev := emuOpen(t), gpuOpen(t)
	rng := rand.New(rand.NewPCG(3, 4))
	const n, cols = 5, 768
	x := randActs(rng, n, cols)
	w := make([]float32, cols)
	for i := range w {
		w[i] = float32(0.5 + rng.Float64())
	}
	if dev != nil {
		// The device's sum of squares is a float32 tree, not cpu.RMSNorm's
		// float64 loop: the rows agree within a few ulps, and the q8 rows
		// are the quantization of the rows it wrote.
		g, gout := quantizeOnDevice(t, dev, kind, x, w, n, cols)
		for r := 0; r < n; r++ {
			want := make([]float32, cols)
			cpu.RMSNorm(want, x[r*cols:(r+1)*cols], w, 1e-5)
			for i, v := range want {
				if math.Abs(float64(gout[r*cols+i]-v)) > 4e-6*math.Abs(float64(v))+1e-30 {
					t.Fatalf("device row %d [%d]: %v, cpu %v", r, i, gout[r*cols+i], v)
				}
			}
		}
		checkQ8Rows(t, kind, gout, g, n, cols)
	}
	xq, out := quantizeOnDevice(t, emu.Device, kind, x, w, n, cols)
	want := make([]float32, n*cols)
	for r := 0; r < n; r++ {
		cpu.RMSNorm(want[r*cols:(r+1)*cols], x[r*cols:(r+1)*cols], w, 1e-5)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("[%d]: %v, want %v", i, out[i], want[i])
		}
	}
	checkQ8Rows(t, kind, want, xq, n, cols)
}

// gemvQ8OnDevice uploads the encoded weights and the q8_1 activations of
// x and returns y [n][rows] from GemvQ8 (and the q8 bytes).
func gemvQ8OnDevice(t *testing.T, d *cuda.Device, typ ggml.Type, rows, cols int, wdata []byte, x []float32, n int) ([]float32, []byte) {
	t.Helper()
	y := make([]float32, n*rows)
	kind := cuda.Q8KindOf(typ)
	xq := make([]byte, n*cuda.Q8ActRowBytes(kind, cols))
	err := d.Do(func(s *cuda.Stream) error {
		w, err := s.UploadWeight(typ, rows, cols, wdata)
		if err != nil {
			return err
		}
		defer s.Free(w.Ptr)
		px, _ := s.Alloc(uint64(4 * len(x)))
		pq, _ := s.Alloc(uint64(len(xq)))
		py, _ := s.Alloc(uint64(4 * len(y)))
		defer s.Free(px)
		defer s.Free(pq)
		defer s.Free(py)
		if err := s.UploadF32(px, x); err != nil {
			return err
		}
		if err := s.QuantizeAct(kind, pq, px, n, cols); err != nil {
			return err
		}
		if err := s.GemvQ8(py, w, pq, n); err != nil {
			return err
		}
		if err := s.Download(xq, pq); err != nil {
			return err
		}
		return s.DownloadF32(y, py)
	})
	if err != nil {
		t.Fatal(err)
	}
	return y, xq
}

// TestGemvQ8MatchesCPU: the int8-activation GEMV against the plain CPU
// reference (cpu.Dequantize, float64 dot with the float32 activations)
// within the bound stated in ops_q8.go, and against the dot with the
// dequantized q8 activations within float32 rounding only (the integer
// block dots are exact, so a wrong byte, nibble or scale shows up there
// as an error orders of magnitude above the tolerance). Every token bucket,
// a partial last block of warps, several units per lane and more tokens
// than one launch holds.
func TestGemvQ8MatchesCPU(t *testing.T) {
	emu, dev := emuOpen(t), gpuOpen(t)
	rng := rand.New(rand.NewPCG(5, 6))
	const rows = 37
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeQ6_K} {
		for _, cols := range []int{512, 8448} {
			wf := make([]float32, rows*cols)
			for i := range wf {
				wf[i] = float32(rng.NormFloat64() * 0.05)
			}
			rb, _ := typ.RowBytes(cols)
			wdata := make([]byte, rows*rb)
			if err := cpu.Quantize(typ, wf, wdata); err != nil {
				t.Fatal(err)
			}
			wdq := make([]float32, rows*cols)
			if err := cpu.Dequantize(typ, wdata, wdq); err != nil {
				t.Fatal(err)
			}
			ns := []int{1, 2, 3, 4, 8, 13, 32, 64, 70}
			if cols > 512 {
				ns = []int{1, 5, 16, 33}
			}
			for _, n := range ns {
				t.Run(fmt.Sprintf("%s/%d/n=%d", typ, cols, n), func(t *testing.T) {
					x := randActs(rng, n, cols)
					y, xq := gemvQ8OnDevice(t, emu.Device, typ, rows, cols, wdata, x, n)
					checkGemvQ8(t, cuda.Q8KindOf(typ), y, wdq, x, xq, rows, cols, n)
					checkCPUEngine(t, typ, y, wdata, wdq, x, rows, cols, n)
					if dev != nil {
						g, gq := gemvQ8OnDevice(t, dev, typ, rows, cols, wdata, x, n)
						checkGemvQ8(t, cuda.Q8KindOf(typ), g, wdq, x, gq, rows, cols, n)
						checkCPUEngine(t, typ, g, wdata, wdq, x, rows, cols, n)
						sameBytes(t, cuda.Q8KindOf(typ), gq, xq, n, cols)
						for i := range g {
							if g[i] != y[i] {
								t.Errorf("y[%d]: device %v, twin %v (the twin must be bit-exact)", i, g[i], y[i])
								break
							}
						}
					}
				})
			}
		}
	}
}

// checkCPUEngine compares y with the CPU engine's MatMul (kernels/cpu,
// int8 activations of the same rounding, integer block dots): only the
// float32 scaling and summation order differ, so the two agree within a
// few float32 roundings of Σ|w|·|x̂| (|x̂| ≤ |x| + amax/127 of the
// element's 256 values). Different activations (another block size or
// rounding) differ by the quantization noise, orders of magnitude more.
func checkCPUEngine(t *testing.T, typ ggml.Type, y []float32, wdata []byte, wdq, x []float32, rows, cols, n int) {
	t.Helper()
	m, err := cpu.NewMatrix(typ, rows, cols, wdata)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, n*rows)
	cpu.NewPool(1).MatMul(want, m, x, n)
	for tk := 0; tk < n; tk++ {
		xt := x[tk*cols : (tk+1)*cols]
		amax := make([]float64, cols/256)
		for c, v := range xt {
			amax[c/256] = math.Max(amax[c/256], math.Abs(float64(v)))
		}
		for r := 0; r < rows; r++ {
			var mag float64
			for c, v := range wdq[r*cols : (r+1)*cols] {
				mag += math.Abs(float64(v)) * (math.Abs(float64(xt[c])) + amax[c/256]/127)
			}
			got, ref := float64(y[tk*rows+r]), float64(want[tk*rows+r])
			if e, bound := math.Abs(got-ref), math.Ldexp(float64(cols/32+40), -23)*mag+1e-30; e > bound {
				t.Fatalf("token %d row %d: %g, CPU engine %g: error %g > bound %g", tk, r, got, ref, e, bound)
			}
		}
	}
}

func checkGemvQ8(t *testing.T, kind cuda.Q8Kind, y, wdq, x []float32, xq []byte, rows, cols, n int) {
	t.Helper()
	xs := cuda.Q8ActRowBytes(kind, cols)
	bs := 32 // activation block
	if kind == cuda.Q8K {
		bs = 256
	}
	perLane := float64((cols/32+31)/32 + 8) // float32 roundings on one path
	var worst float64
	for tk := 0; tk < n; tk++ {
		xt := x[tk*cols : (tk+1)*cols]
		row := xq[tk*xs:]
		xh := make([]float64, cols) // dequantized int8 activations
		amax := make([]float64, cols/bs)
		for c := range xh {
			var d float32
			if kind == cuda.Q8K {
				d = math.Float32frombits(binary.LittleEndian.Uint32(row[cols+4*(c/256):]))
			} else {
				d = cpu.F16ToF32(binary.LittleEndian.Uint16(row[cols+4*(c/32):]))
			}
			xh[c] = float64(d) * float64(int8(row[c]))
			amax[c/bs] = math.Max(amax[c/bs], math.Abs(float64(xt[c])))
		}
		for r := 0; r < rows; r++ {
			w := wdq[r*cols : (r+1)*cols]
			var ref, refq, quantErr, mag, magq, wmax float64
			for _, v := range w {
				wmax = math.Max(wmax, math.Abs(float64(v)))
			}
			for c, v := range w {
				ref += float64(v) * float64(xt[c])
				refq += float64(v) * xh[c]
				quantErr += math.Abs(float64(v)) * 0.57 * amax[c/bs] / 127
				mag += math.Abs(float64(v) * float64(xt[c]))
				magq += (math.Abs(float64(v)) + wmax) * math.Abs(xh[c])
			}
			got := float64(y[tk*rows+r])
			if e, bound := math.Abs(got-ref), quantErr+math.Ldexp(perLane, -20)*(mag+quantErr); e > bound {
				t.Fatalf("token %d row %d: %g, CPU reference %g: error %g > bound %g", tk, r, got, ref, e, bound)
			}
			if e, bound := math.Abs(got-refq), math.Ldexp(perLane, -22)*magq; e > bound {
				t.Fatalf("token %d row %d: %g, dot with the q8 activations %g: error %g > float32 rounding bound %g", tk, r, got, refq, e, bound)
			}
			worst = math.Max(worst, math.Abs(got-ref)/quantErr)
		}
	}
	if worst == 0 {
		t.Fatal("no error at all: the activations were not quantized")
	}
}

// TestQ8UnitsMatchDequantize: the twin's weight units (the transliteration
// of mmvq.cu's M*::load: which bytes, nibbles, bit pairs and scales unit u
// reads) rebuild exactly the values kernels/cpu decodes, on blocks
// llama.cpp's llama-quantize wrote (shared testdata quants).
func TestQ8UnitsMatchDequantize(t *testing.T) {
	td := refdata.Dir(t)
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeQ6_K} {
		name := map[ggml.Type]string{ggml.TypeQ4_0: "q4_0", ggml.TypeQ8_0: "q8_0", ggml.TypeQ4_K: "q4_k", ggml.TypeQ6_K: "q6_k"}[typ]
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(filepath.Join(td, "quants", name+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ti, _ := f.Tensor("t")
			if ti.Type != typ {
				t.Fatalf("tensor type %s", ti.Type)
			}
			cols, rows := int(ti.Dims[0]), int(ti.Dims[1])
			rb, _ := typ.RowBytes(cols)
			ue := q8UnitElems(typ)
			want := make([]float32, cols)
			for r := 0; r < rows; r++ {
				row := ti.Data[r*rb : (r+1)*rb]
				if err := cpu.Dequantize(typ, row, want); err != nil {
					t.Fatal(err)
				}
				for u := 0; u < cols/ue; u++ {
					var w q8Unit
					loadQ8Unit(typ, row, u, &w)
					for i := 0; i < ue; i++ {
						var v float32
						switch typ {
						case ggml.TypeQ4_0, ggml.TypeQ8_0:
							v = float32(w.q[i]) * w.d
						case ggml.TypeQ4_K:
							v = float32(float32(w.d*float32(w.sc[i/32]))*float32(w.q[i])) - float32(w.dmin*float32(w.mn[i/32]))
						case ggml.TypeQ6_K:
							v = float32(w.d*float32(w.sc[i/16])) * float32(w.q[i])
						}
						if c := u*ue + i; v != want[c] {
							t.Fatalf("row %d col %d (unit %d): %v, cpu %v", r, c, u, v, want[c])
						}
					}
				}
			}
		})
	}
}

// warpSum is the butterfly of warp_sum: 32 lanes simulated in full
// (lane l adds lane l^o at each level) give every lane warpSum's value.
func TestWarpSumIsTheButterfly(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 100 {
		var v, b [32]float32
		for i := range v {
			v[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(6))))
		}
		b = v
		for o := 16; o > 0; o >>= 1 {
			var nb [32]float32
			for l := range nb {
				nb[l] = b[l] + b[l^o]
			}
			b = nb
		}
		got := warpSum(&v)
		for l := range b {
			if b[l] != got {
				t.Fatalf("lane %d: butterfly %v, warpSum %v", l, b[l], got)
			}
		}
	}
}

// The GEMV twin refuses a launch whose geometry is not the kernel's
// (cuda.Q8Bucket): rows would go unwritten on the device.
func TestGemvQ8TwinChecksGeometry(t *testing.T) {
	e := &emulator{}
	args := make([]cuda.Arg, 8)
	if err := e.gemvQ8("gemv_q8_q4_0_t3", cuda.Dim3{X: 1, Y: 1, Z: 1}, cuda.Dim3{X: 128, Y: 1, Z: 1}, args); err == nil {
		t.Fatal("a bucket that does not exist was emulated")
	}
	if _, _, err := parseQ8Kernel("gemv_q8_q5_1_t8"); err == nil {
		t.Fatal("an unknown type was parsed")
	}
	// gemv_q8_0 is the float32-activation GEMV of Q8_0 weights, not a twin here.
	if f, ok := lookupTwin("gemv_q8_0"); ok && f != nil {
		t.Fatal("gemv_q8_0 is routed to the int8-activation twin")
	}
	if _, ok := lookupTwin("gemv_q8_q8_0_t64"); !ok {
		t.Fatal("gemv_q8_q8_0_t64 has no twin")
	}
}
