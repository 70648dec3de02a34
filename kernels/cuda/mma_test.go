package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"oengine/ggml"
	"oengine/kernels/cpu"
)

// Tests of the tensor-core GEMM (kernels/quant_mma.cu, ops_mma.go) that run
// on any machine: a transliteration of gemm_mma whose MMAs run in a 32-lane
// warp simulator applying the PTX m16n8k16 fragment layouts, MatMul's
// routing, and the launches it makes.

// The tile constants of quant_mma.cu.
const (
	simBM, simBN, simBK = 128, 128, 64
	simLDS              = simBK + 8
	simThreads          = 256
)

// Every kernel of ops_mma.go is launched by the signature test.
func init() {
	for typ := range mmaKernels {
		w := Weight{Type: typ, Rows: 200, Cols: 256, Ptr: 256}
		sigOps = append(sigOps, func(s *Stream) error { return s.GemmMMA(3, w, 2, 130) })
	}
	sigOps = append(sigOps, func(s *Stream) error { return s.ToBF16(1, 2, 100) })
}

// ptxLayout holds the PTX ISA's m16n8k16 .f16/.f32 fragment formulas
// ("Matrix Fragments for mma.m16n8k16 with floating point type"): where
// element i of a lane's A, B and C/D fragment sits in the matrix. The
// simulator uses these, never the kernel's index math.
func ptxA(lane, i int) (row, col int) {
	g, q := lane>>2, lane%4
	row = g
	if !(i < 2 || (i >= 4 && i < 6)) {
		row = g + 8
	}
	col = q*2 + i&1
	if i >= 4 {
		col += 8
	}
	return row, col
}

func ptxB(lane, i int) (row, col int) {
	g, q := lane>>2, lane%4
	row = q*2 + i&1
	if i >= 2 {
		row += 8
	}
	return row, g
}

func ptxC(lane, i int) (row, col int) {
	g, q := lane>>2, lane%4
	row = g
	if i >= 2 {
		row = g + 8
	}
	return row, q*2 + i&1
}

// warpMMA applies mma.sync.m16n8k16.row.col.f32.f16.f16.f32 to the 32
// lanes' registers: a[lane] holds four .f16x2 registers (elements a0..a7,
// the lower index in the low half), b[lane] two, d[lane] four f32
// accumulators, updated in place (D = A·B + C). It fails the test if the
// lanes do not cover each matrix element exactly once.
func warpMMA(t *testing.T, d *[32][4]float32, a *[32][4]uint32, b *[32][2]uint32) {
	var A [16][16]float64
	var B [16][8]float64
	var seenA [16][16]int
	var seenB [16][8]int
	for lane := 0; lane < 32; lane++ {
		for i := 0; i < 8; i++ {
			r, c := ptxA(lane, i)
			A[r][c] = float64(cpu.F16ToF32(uint16(a[lane][i/2] >> (16 * (i & 1)))))
			seenA[r][c]++
		}
		for i := 0; i < 4; i++ {
			r, c := ptxB(lane, i)
			B[r][c] = float64(cpu.F16ToF32(uint16(b[lane][i/2] >> (16 * (i & 1)))))
			seenB[r][c]++
		}
	}
	for r := range seenA {
		for c := range seenA[r] {
			if seenA[r][c] != 1 || (c < 8 && seenB[r][c] != 1) {
				t.Fatalf("fragment layout covers A[%d][%d] %d times, B %d times", r, c, seenA[r][c], seenB[r][c])
			}
		}
	}
	var C [16][8]float64
	for lane := 0; lane < 32; lane++ {
		for i := 0; i < 4; i++ {
			r, c := ptxC(lane, i)
			C[r][c] = float64(d[lane][i])
		}
	}
	for r := 0; r < 16; r++ {
		for c := 0; c < 8; c++ {
			for k := 0; k < 16; k++ {
				C[r][c] += A[r][k] * B[k][c]
			}
		}
	}
	for lane := 0; lane < 32; lane++ {
		for i := 0; i < 4; i++ {
			r, c := ptxC(lane, i)
			d[lane][i] = float32(C[r][c])
		}
	}
}

// i2fOff mirrors i2f_off: (float)v - off through the 2^23 trick.
func i2fOff(v uint32, off float32) float32 {
	return math.Float32frombits(0x4B000000|v) - (8388608 + off)
}

// packH2 mirrors pack_h2: lo in the low half, both rounded to nearest.
func packH2(lo, hi float32) uint32 {
	return uint32(cpu.F32ToF16(lo)) | uint32(cpu.F32ToF16(hi))<<16
}

func le16u(b []byte, i int) uint32 { return uint32(b[2*i]) | uint32(b[2*i+1])<<8 }

// emulTile mirrors the T* tile decoders of quant_mma.cu: unit u of row to
// UE/2 packed F16 pairs.
func emulTile(typ ggml.Type, row []byte, u int, h []uint32) {
	switch typ {
	case ggml.TypeF16:
		for i := 0; i < 4; i++ {
			h[i] = le16u(row[u*16:], 2*i) | le16u(row[u*16:], 2*i+1)<<16
		}
	case ggml.TypeQ8_0:
		b := row[u*34:]
		d := cpu.F16ToF32(le16(b))
		for i := 0; i < 16; i++ {
			w := le16u(b[2:], i) ^ 0x8080
			h[i] = packH2(i2fOff(w&0xff, 128)*d, i2fOff(w>>8, 128)*d)
		}
	case ggml.TypeQ4_0:
		b := row[u*18:]
		d := cpu.F16ToF32(le16(b))
		for i := 0; i < 8; i++ {
			w := le16u(b[2:], i)
			h[i] = packH2(i2fOff(w&15, 8)*d, i2fOff((w>>8)&15, 8)*d)
			h[8+i] = packH2(i2fOff((w>>4)&15, 8)*d, i2fOff((w>>12)&15, 8)*d)
		}
	case ggml.TypeQ4_K:
		b := row[(u>>3)*144:]
		s := u & 7
		d, dmin := cpu.F16ToF32(le16(b)), cpu.F16ToF32(le16(b[2:]))
		sc, m := emulScaleMinK4(s, b[4:])
		dl, ml := d*float32(sc), dmin*float32(m)
		q := b[16+32*(s>>1):]
		shift := uint(s&1) * 4
		for i := 0; i < 8; i++ {
			x := (le16u(q, 2*i) | le16u(q, 2*i+1)<<16) >> shift
			h[2*i] = packH2(dl*i2fOff(x&15, 0)-ml, dl*i2fOff((x>>8)&15, 0)-ml)
			h[2*i+1] = packH2(dl*i2fOff((x>>16)&15, 0)-ml, dl*i2fOff((x>>24)&15, 0)-ml)
		}
	case ggml.TypeQ6_K:
		b := row[(u>>4)*210:]
		g := u & 15
		n, k, hf := g>>3, (g&7)>>1, g&1
		d := cpu.F16ToF32(le16(b[208:]))
		dl := d * float32(int8(b[192+g]))
		ql := b[64*n+32*(k&1)+16*hf:]
		qh := b[128+32*n+16*hf:]
		lshift, hshift := uint(k>>1)*4, uint(2*k)
		for i := 0; i < 8; i++ {
			lo, hi := le16u(ql, i)>>lshift, le16u(qh, i)>>hshift
			q0, q1 := (lo&15)|(hi&3)<<4, ((lo>>8)&15)|((hi>>8)&3)<<4
			h[i] = packH2(dl*i2fOff(q0, 32), dl*i2fOff(q1, 32))
		}
	}
}

// simLoadW mirrors mma_load_w: the block's threads decode units of the
// weight tile rows [m0, m0+BM) x cols [k0, k0+BK) into sw as F16.
func simLoadW(sw []uint16, typ ggml.Type, W []byte, rowBytes, rows, cols, m0, k0 int) {
	ue := weightKernels[typ].unit
	upr := simBK / ue
	h := make([]uint32, ue/2)
	for tid := 0; tid < simThreads; tid++ {
		for i := tid; i < simBM*upr; i += simThreads {
			r, j := i/upr, i%upr
			gr, u := m0+r, k0/ue+j
			if gr < rows && u*ue < cols {
				emulTile(typ, W[gr*rowBytes:], u, h)
			} else {
				clear(h)
			}
			for e, v := range h {
				sw[r*simLDS+j*ue+2*e], sw[r*simLDS+j*ue+2*e+1] = uint16(v), uint16(v>>16)
			}
		}
	}
}

// The tile decoders, transliterated, give exactly F32ToF16 of
// cpu.Dequantize for every unit of random rows of every type (the 2^23
// integer conversion and the 16-bit loads change nothing), and are the
// unit decoders of quant.cu rounded to F16.
func TestTileDecodersMatchCPU(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	for typ := range mmaKernels {
		const rows, cols = 6, 512
		data := encode(t, typ, randF32(rng, rows*cols, 2), rows, cols)
		if typ == ggml.TypeQ4_K || typ == ggml.TypeQ6_K {
			for i := range data { // every bit pattern of scales, mins and quants
				if typ == ggml.TypeQ4_K && i%144 >= 4 || typ == ggml.TypeQ6_K && i%210 < 208 {
					data[i] = byte(rng.Uint32())
				}
			}
		}
		rb, _ := typ.RowBytes(cols)
		ue := weightKernels[typ].unit
		want, f := make([]float32, cols), make([]float32, ue)
		h := make([]uint32, ue/2)
		for r := 0; r < rows; r++ {
			row := data[r*rb : (r+1)*rb]
			if err := cpu.Dequantize(typ, row, want); err != nil {
				t.Fatal(err)
			}
			for u := 0; u < cols/ue; u++ {
				emulTile(typ, row, u, h)
				emulUnit(typ, row, u, f)
				for e := 0; e < ue; e++ {
					got := uint16(h[e/2] >> (16 * (e & 1)))
					if w := cpu.F32ToF16(want[u*ue+e]); got != w || got != cpu.F32ToF16(f[e]) {
						t.Fatalf("%s row %d unit %d elem %d: tile %#04x, F16 of cpu.Dequantize %#04x, of unit %#04x", typ, r, u, e, got, w, cpu.F32ToF16(f[e]))
					}
				}
			}
		}
	}
}

// simLoadX mirrors mma_load_x: 16-byte chunks of x16 [n][cols].
func simLoadX(sx []uint16, x16 []uint16, n, cols, n0, k0 int) {
	const cpr = simBK / 8
	for tid := 0; tid < simThreads; tid++ {
		for p := 0; p < simBN*cpr/simThreads; p++ {
			i := tid + p*simThreads
			t, c := i/cpr, i%cpr
			gt, k := n0+t, k0+8*c
			for e := 0; e < 8; e++ {
				var v uint16
				if gt < n && k < cols {
					v = x16[gt*cols+k+e]
				}
				sx[t*simLDS+8*c+e] = v
			}
		}
	}
}

func ld32(s []uint16, i int) uint32 { return uint32(s[i]) | uint32(s[i+1])<<16 }

// ldmatrixX4 applies ldmatrix.sync.aligned.m8n8.x4.shared.b16 (PTX ISA,
// "ldmatrix"): lanes 8j..8j+7 give the addresses (here offsets in halves)
// of rows 0..7 of 8x8 matrix j, 16-byte aligned; register j of lane l
// receives row l/4, columns 2(l%4) and 2(l%4)+1 of matrix j, the lower
// column in the low half.
func ldmatrixX4(t *testing.T, s []uint16, addr *[32]int) (r [32][4]uint32) {
	for lane, a := range addr {
		if a%8 != 0 || a < 0 || a+8 > len(s) {
			t.Fatalf("ldmatrix row address %d (halves) of lane %d: unaligned or outside the tile", a, lane)
		}
	}
	for l := 0; l < 32; l++ {
		for j := 0; j < 4; j++ {
			r[l][j] = ld32(s, addr[8*j+l/4]+2*(l%4))
		}
	}
	return r
}

// simGemmMMA runs gemm_mma<typ> for every block of the grid, line for line;
// swapA exchanges A registers 1 and 2 (a wrong layout, for the test that
// shows the simulator notices one).
func simGemmMMA(t *testing.T, typ ggml.Type, W []byte, rowBytes int, x16 []uint16, y []float32, rows, cols, n int, swapA bool) {
	for bx := 0; bx < blocks(rows, simBM); bx++ {
		for by := 0; by < blocks(n, simBN); by++ {
			m0, n0 := bx*simBM, by*simBN
			var acc [8][4][4][32][4]float32 // [warp][mi][ni][lane][e]
			sw := make([]uint16, simBM*simLDS)
			sx := make([]uint16, simBN*simLDS)
			for k0 := 0; k0 < cols; k0 += simBK {
				simLoadW(sw, typ, W, rowBytes, rows, cols, m0, k0)
				simLoadX(sx, x16, n, cols, n0, k0)
				for kk := 0; kk < simBK; kk += 16 {
					for warp := 0; warp < 8; warp++ {
						wm, wn := (warp>>2)*64, (warp&3)*32
						// Each lane's ldmatrix row addresses (in halves).
						var aRow, bRow [32]int
						for lane := 0; lane < 32; lane++ {
							lr, lm := lane&7, lane>>3
							aRow[lane] = (wm+lr+8*(lm&1))*simLDS + 8*(lm>>1)
							bRow[lane] = (wn+lr+8*(lm>>1))*simLDS + 8*(lm&1)
						}
						var a [4][32][4]uint32
						var b [4][32][2]uint32
						for mi := 0; mi < 4; mi++ {
							var addr [32]int
							for lane := range addr {
								addr[lane] = aRow[lane] + 16*mi*simLDS + kk
							}
							a[mi] = ldmatrixX4(t, sw, &addr)
							if swapA {
								for lane := range a[mi] {
									a[mi][lane][1], a[mi][lane][2] = a[mi][lane][2], a[mi][lane][1]
								}
							}
						}
						for nj := 0; nj < 2; nj++ {
							var addr [32]int
							for lane := range addr {
								addr[lane] = bRow[lane] + 16*nj*simLDS + kk
							}
							r := ldmatrixX4(t, sx, &addr)
							for lane := range r {
								b[2*nj][lane] = [2]uint32{r[lane][0], r[lane][1]}
								b[2*nj+1][lane] = [2]uint32{r[lane][2], r[lane][3]}
							}
						}
						for mi := 0; mi < 4; mi++ {
							for ni := 0; ni < 4; ni++ {
								warpMMA(t, &acc[warp][mi][ni], &a[mi], &b[ni])
							}
						}
					}
				}
			}
			for warp := 0; warp < 8; warp++ {
				wm, wn := (warp>>2)*64, (warp&3)*32
				for lane := 0; lane < 32; lane++ {
					g, q := lane>>2, lane&3
					for mi := 0; mi < 4; mi++ {
						for ni := 0; ni < 4; ni++ {
							for e := 0; e < 4; e++ {
								r := m0 + wm + 16*mi + g + 8*(e>>1)
								tk := n0 + wn + 8*ni + 2*q + e&1
								if r < rows && tk < n {
									y[tk*rows+r] = acc[warp][mi][ni][lane][e]
								}
							}
						}
					}
				}
			}
		}
	}
}

// mmaCase is a random weight matrix of one type with activations.
type mmaCase struct {
	typ             ggml.Type
	rows, cols, n   int
	data            []byte
	x               []float32
	w               []float32 // exactly decoded weights (cpu.Dequantize)
	x16             []uint16  // F32ToF16(x), what ToF16 writes
	ref16, ref, mag []float64 // Σ f16(w)·f16(x), Σ w·x, Σ|w·x| in float64
}

func newMMACase(t testing.TB, rng *rand.Rand, typ ggml.Type, rows, cols, n int) *mmaCase {
	c := &mmaCase{typ: typ, rows: rows, cols: cols, n: n}
	c.data = encode(t, typ, randF32(rng, rows*cols, 1), rows, cols)
	c.w = make([]float32, rows*cols)
	if err := cpu.Dequantize(typ, c.data, c.w); err != nil {
		t.Fatal(err)
	}
	c.x = randF32(rng, n*cols, 1)
	c.x16 = make([]uint16, len(c.x))
	cpu.StoreRowF16(c.x16, c.x)
	c.ref16, c.ref, c.mag = make([]float64, n*rows), make([]float64, n*rows), make([]float64, n*rows)
	for tk := 0; tk < n; tk++ {
		for r := 0; r < rows; r++ {
			var s16, s, m float64
			for k := 0; k < cols; k++ {
				w, x := float64(c.w[r*cols+k]), float64(c.x[tk*cols+k])
				s16 += float64(cpu.F16ToF32(cpu.F32ToF16(c.w[r*cols+k]))) * float64(cpu.F16ToF32(c.x16[tk*cols+k]))
				s += w * x
				m += math.Abs(w * x)
			}
			c.ref16[tk*rows+r], c.ref[tk*rows+r], c.mag[tk*rows+r] = s16, s, m
		}
	}
	return c
}

// check compares y with the F16-operand reference within rel·Σ|w·x| + abs.
func (c *mmaCase) check(y []float32, rel, abs float64) error {
	for i, v := range y {
		if d := math.Abs(float64(v) - c.ref16[i]); !(d <= rel*c.mag[i]+abs) {
			return fmt.Errorf("y[%d][%d] = %v, F16 reference %v (Σ|wx| %g)", i/c.rows, i%c.rows, v, c.ref16[i], c.mag[i])
		}
	}
	return nil
}

// mmaShapes cover partial row and token tiles and a partial K step (cols
// not a multiple of 64) for the types that allow one.
var mmaShapes = []struct {
	typ           ggml.Type
	rows, cols, n int
}{
	{ggml.TypeF16, 200, 96, 70},
	{ggml.TypeQ8_0, 130, 160, 130},
	{ggml.TypeQ4_0, 67, 96, 64},
	{ggml.TypeQ4_K, 129, 512, 75},
	{ggml.TypeQ6_K, 70, 256, 129},
}

// The kernel's tile loads, fragment loads and stores, run through a warp
// simulator that applies the PTX fragment layouts, equal a plain matmul of
// the F16-rounded operands (within float32 accumulation); an A fragment
// with two registers swapped is caught.
func TestMMAWarpSimulator(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, sh := range mmaShapes {
		t.Run(sh.typ.String(), func(t *testing.T) {
			c := newMMACase(t, rng, sh.typ, sh.rows, sh.cols, sh.n)
			rb, _ := sh.typ.RowBytes(sh.cols)
			y := make([]float32, sh.n*sh.rows)
			for i := range y {
				y[i] = float32(math.NaN()) // every output must be written
			}
			simGemmMMA(t, sh.typ, c.data, rb, c.x16, y, sh.rows, sh.cols, sh.n, false)
			if err := c.check(y, 1e-6, 1e-6); err != nil {
				t.Fatal(err)
			}
			if sh.typ == ggml.TypeF16 {
				simGemmMMA(t, sh.typ, c.data, rb, c.x16, y, sh.rows, sh.cols, sh.n, true)
				if c.check(y, 1e-3, 1e-3) == nil {
					t.Fatal("a wrong A fragment layout went unnoticed")
				}
			}
		})
	}
}

// MatMul's path for each weight type, batch size, cuBLAS presence and
// compute capability.
func TestMatMulRoute(t *testing.T) {
	tests := []struct {
		t    ggml.Type
		n    int
		blas bool
		cc   int
		want matmulPath
	}{
		{ggml.TypeF16, 1, true, 90, pathGemv},
		{ggml.TypeF16, GemmMinTokens, true, 90, pathCublasF16},
		{ggml.TypeF16, 512, false, 90, pathMMA},
		{ggml.TypeF16, 512, false, 75, pathGemv},
		{ggml.TypeF16, MMAMinTokens - 1, false, 90, pathGemv},
		{ggml.TypeBF16, GemmMinTokens, true, 90, pathCublasBF16},
		{ggml.TypeBF16, GemmMinTokens - 1, true, 90, pathGemv},
		{ggml.TypeBF16, 4096, false, 90, pathGemv}, // never through F16
		{ggml.TypeF32, 4096, true, 90, pathGemv},
		{ggml.TypeQ4_0, MMAMinTokens - 1, true, 90, pathGemv},
		{ggml.TypeQ4_0, MMAMinTokens, true, 90, pathMMA},
		{ggml.TypeQ8_0, MMAMinTokens, false, 80, pathMMA},
		{ggml.TypeQ4_K, 2048, true, 90, pathMMA},
		{ggml.TypeQ6_K, 2048, true, 90, pathMMA},
		{ggml.TypeQ6_K, 2048, true, 75, pathGemv}, // no m16n8k16 before sm_80
	}
	for _, tc := range tests {
		if got := matmulRoute(tc.t, tc.n, tc.blas, tc.cc); got != tc.want {
			t.Errorf("matmulRoute(%s, %d, blas %v, sm_%d) = %v, want %v", tc.t, tc.n, tc.blas, tc.cc, got, tc.want)
		}
	}
}

// MatMul's launches on the fake driver (no cuBLAS): the quantized GEMM
// converts x to F16 once and covers every row and token with its grid;
// nothing else runs (no pass over the whole weight matrix).
func TestMatMulMMALaunches(t *testing.T) {
	type launch struct {
		k           kernelName
		grid, block Dim3
	}
	var got []launch
	hook := func(k kernelName, grid, block Dim3, shmem uint32, args []Arg) error {
		got = append(got, launch{k, grid, block})
		return nil
	}
	f := newFakeDriver()
	var nc int
	d, err := openWith(Info{Major: 9}, libs{drv: f.api(), compile: fakeCompile(&nc), nvrtcVersion: "x", onLaunch: hook}, Options{CacheDir: "off"}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tests := []struct {
		typ     ggml.Type
		rows, n int
		want    []launch
	}{
		{ggml.TypeQ4_K, 300, 130, []launch{{kF32ToF16, D1(blocks(130*256, 256)), D1(256)}, {"gemm_mma_q4_k", Dim3{3, 2, 1}, D1(256)}}},
		{ggml.TypeF16, 128, 64, []launch{{kF32ToF16, D1(64), D1(256)}, {"gemm_mma_f16", Dim3{1, 1, 1}, D1(256)}}},
		// 63 tokens: below MMAMinTokens, the int8 GEMV (ops_q8.go): x quantized once, one launch for all tokens.
		{ggml.TypeQ8_0, 64, 63, []launch{{kQuantizeQ8, Dim3{1, 63, 1}, D1(128)}, {"gemv_q8_q8_0_t64", D1(8), D1(128)}}},
	}
	for _, tc := range tests {
		got = nil
		w := Weight{Type: tc.typ, Rows: tc.rows, Cols: 256, Ptr: 256}
		if err := d.Do(func(s *Stream) error { return s.MatMul(2, w, 3, tc.n) }); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s n=%d: launches %v, want %v", tc.typ, tc.n, got, tc.want)
		}
	}
	// The tile decoders' 16-byte loads need an aligned weight.
	w := Weight{Type: ggml.TypeQ4_K, Rows: 128, Cols: 256, Ptr: 256 + 2}
	if err := d.Do(func(s *Stream) error { return s.GemmMMA(2, w, 3, 128) }); err == nil || !strings.Contains(err.Error(), "aligned") {
		t.Errorf("misaligned weight: %v", err)
	}
}

// The entry-point parser sees through __launch_bounds__.
func TestEntryPointParserLaunchBounds(t *testing.T) {
	src := "#define E(SUF, Q) \\\n    extern \"C\" __global__ void __launch_bounds__(MMA_THREADS, 2) \\\n        gemm_##SUF(const u8* W, u64 rb, int n) { g<Q>(W, rb, n); }\nE(q8_0, QQ8_0)\nextern \"C\" __global__ void __launch_bounds__(256) plain(float* x, int n) {}\n"
	if got := strings.Join(entryPoints(src), ","); got != "gemm_q8_0,plain" {
		t.Fatalf("entry points %s", got)
	}
	sigs := signatures(src)
	if fmt.Sprint(sigs["gemm_q8_0"]) != fmt.Sprint([]argKind{argPtr, argU64, argI32}) || fmt.Sprint(sigs["plain"]) != fmt.Sprint([]argKind{argPtr, argI32}) {
		t.Fatalf("signatures %v", sigs)
	}
}

// TestGPUGemmMMA: gemm_mma on the device against the F16-operand reference
// (tensor-core f32 accumulation: 1e-4 of Σ|w·x|; the decoders may contract
// a K-quant's scale step into an FMA, moving a weight by one F16 step:
// 1e-3 for those) and MatMul routing through it.
func TestGPUGemmMMA(t *testing.T) {
	d := gpu(t)
	if d.Info().CC() < mmaMinCC {
		t.Skipf("sm_%d has no m16n8k16 MMA", d.Info().CC())
	}
	rng := rand.New(rand.NewPCG(23, 24))
	for _, sh := range append(mmaShapes, struct {
		typ           ggml.Type
		rows, cols, n int
	}{ggml.TypeQ4_K, 300, 1024, 300}) {
		t.Run(fmt.Sprintf("%s/%dx%d/n=%d", sh.typ, sh.rows, sh.cols, sh.n), func(t *testing.T) {
			c := newMMACase(t, rng, sh.typ, sh.rows, sh.cols, sh.n)
			got := make([]float32, sh.n*sh.rows)
			do(t, d, func(s *Stream) error {
				w, err := s.UploadWeight(sh.typ, sh.rows, sh.cols, c.data)
				if err != nil {
					return err
				}
				defer s.Free(w.Ptr)
				xp, err := upF32(s, c.x)
				if err != nil {
					return err
				}
				defer s.Free(xp)
				yp, err := s.Alloc(uint64(4 * len(got)))
				if err != nil {
					return err
				}
				defer s.Free(yp)
				if err := s.GemmMMA(yp, w, xp, sh.n); err != nil {
					return err
				}
				return s.DownloadF32(got, yp)
			})
			rel := 1e-4
			if sh.typ == ggml.TypeQ4_K || sh.typ == ggml.TypeQ6_K {
				rel = 1e-3
			}
			if err := c.check(got, rel, 1e-5); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// f32_to_bf16's rounding, transliterated from quant_mma.cu, is the nearest
// BF16 value with ties to even (checked against a float64 search of the
// two neighbours), keeps infinities and keeps NaN a NaN.
func TestBF16KernelRounding(t *testing.T) {
	kernel := func(f float32) uint16 {
		b := math.Float32bits(f)
		if b&0x7fffffff > 0x7f800000 {
			return uint16(b>>16) | 0x40
		}
		b += 0x7fff + (b>>16)&1
		return uint16(b >> 16)
	}
	nearest := func(f float32) uint16 {
		lo := uint16(math.Float32bits(f) >> 16) // toward zero
		hi := lo + 1
		dl := math.Abs(float64(f) - float64(cpu.BF16ToF32(lo)))
		dh := math.Abs(float64(f) - float64(cpu.BF16ToF32(hi)))
		if dl < dh || (dl == dh && lo&1 == 0) {
			return lo
		}
		return hi
	}
	rng := rand.New(rand.NewPCG(41, 42))
	vals := []float32{0, 1, -1, 1 + 1.0/256, 1 + 3.0/256, 65504, 3.3895314e38, float32(math.Inf(1)), float32(math.Inf(-1)), 1e-40}
	for i := 0; i < 100000; i++ {
		vals = append(vals, math.Float32frombits(rng.Uint32()))
	}
	for _, f := range vals {
		got := kernel(f)
		switch {
		case f != f:
			if g := cpu.BF16ToF32(got); g == g {
				t.Fatalf("NaN %#x became %v", math.Float32bits(f), g)
			}
		case math.IsInf(float64(f), 0):
			if cpu.BF16ToF32(got) != f {
				t.Fatalf("%v became %v", f, cpu.BF16ToF32(got))
			}
		default:
			if want := nearest(f); got != want && math.Float32bits(f)&0x7fffffff < 0x7f7f8000 {
				t.Fatalf("bf16(%v) = %#04x, nearest %#04x", f, got, want)
			}
		}
		if got != cpu.F32ToBF16(f) {
			t.Fatalf("bf16(%v): kernel %#04x, cpu.F32ToBF16 %#04x", f, got, cpu.F32ToBF16(f))
		}
	}
}
