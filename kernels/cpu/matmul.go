package cpu

import (
	"fmt"

	"oengine/model/gguf"
)

// Matrix is a weight matrix [Rows][Cols] stored row-major in GGML type
// Type: row r occupies Data[r*RowBytes : (r+1)*RowBytes] with RowBytes =
// Type.RowBytes(Cols). In GGUF terms Dims = [Cols, Rows]; rows are output
// features.
type Matrix struct {
	Type       gguf.Type
	Rows, Cols int
	Data       []byte
}

// NewMatrix validates that data holds rows×cols elements of type t (whole
// blocks per row) and that MatMul supports t.
func NewMatrix(t gguf.Type, rows, cols int, data []byte) (Matrix, error) {
	if rows <= 0 || cols <= 0 {
		return Matrix{}, fmt.Errorf("cpu: bad matrix shape %dx%d", rows, cols)
	}
	if _, ok := kernels[t]; !ok {
		return Matrix{}, fmt.Errorf("%w %s for a matrix", ErrType, t)
	}
	rb, err := t.RowBytes(cols)
	if err != nil {
		return Matrix{}, fmt.Errorf("cpu: matrix %dx%d: %w", rows, cols, err)
	}
	if rb > 0 && rows > len(data)/rb || rows*rb != len(data) {
		return Matrix{}, fmt.Errorf("cpu: %s matrix %dx%d needs %d bytes per row, data has %d bytes", t, rows, cols, rb, len(data))
	}
	return Matrix{Type: t, Rows: rows, Cols: cols, Data: data}, nil
}

// rowBytes returns the encoded size of one row (the matrix is assumed valid).
func (m Matrix) rowBytes() int {
	return m.Cols / m.Type.BlockElems() * m.Type.BlockBytes()
}

// Row returns the encoded bytes of row r.
func (m Matrix) Row(r int) []byte {
	rb := m.rowBytes()
	return m.Data[r*rb : (r+1)*rb]
}

// RowF32 decodes row r into dst[:Cols] (embedding lookups). It panics if r
// is out of range, like a slice index; callers validate token ids first.
func (m Matrix) RowF32(r int, dst []float32) {
	if r < 0 || r >= m.Rows {
		panic(fmt.Sprintf("cpu: row %d of a %d-row matrix", r, m.Rows))
	}
	if err := Dequantize(m.Type, m.Row(r), dst[:m.Cols]); err != nil {
		panic(err) // unreachable for a Matrix built by NewMatrix
	}
}

// kernel says how MatMul computes with one weight type.
type kernel struct {
	act actKind
	dot func(row []byte, a actView) float32 // one row, one token
	// dot4 (optional) computes one row against four consecutive tokens (a
	// spans all four); per token it must equal dot bit for bit.
	dot4 func(row []byte, a actView, cols int) [4]float32
}

// portable holds the plain Go kernels (the twins of the SIMD ones).
var portable = map[gguf.Type]kernel{
	gguf.TypeF32:  {act: actF32, dot: dotF32RowGo},
	gguf.TypeF16:  {act: actF32, dot: dotF16RowGo},
	gguf.TypeBF16: {act: actF32, dot: dotBF16RowGo},
	gguf.TypeQ4_0: {act: actQ8_0, dot: dotQ4_0Go},
	gguf.TypeQ4_1: {act: actQ8_1, dot: dotQ4_1Go},
	gguf.TypeQ5_0: {act: actQ8_0, dot: dotQ5_0Go},
	gguf.TypeQ5_1: {act: actQ8_1, dot: dotQ5_1Go},
	gguf.TypeQ8_0: {act: actQ8_0, dot: dotQ8_0Go},
	gguf.TypeQ2_K: {act: actQ8K, dot: dotQ2_KGo},
	gguf.TypeQ3_K: {act: actQ8K, dot: dotQ3_KGo},
	gguf.TypeQ4_K: {act: actQ8K, dot: dotQ4_KGo},
	gguf.TypeQ5_K: {act: actQ8K, dot: dotQ5_KGo},
	gguf.TypeQ6_K: {act: actQ8K, dot: dotQ6_KGo},
}

// kernels is what MatMul uses: portable, with SIMD kernels substituted by
// an architecture file's init when the CPU has the features.
var kernels = clonedKernels(portable)

func clonedKernels(m map[gguf.Type]kernel) map[gguf.Type]kernel {
	c := make(map[gguf.Type]kernel, len(m))
	for t, k := range m {
		c[t] = k
	}
	return c
}

// MatMulRef is MatMul's plain reference twin: each row is dequantized and
// dotted with the unquantized activations in float64.
// dst[i*w.Rows+r] = Σ_c W[r][c]·x[i*w.Cols+c] for i in [0, n).
func MatMulRef(dst []float32, w Matrix, x []float32, n int) {
	for i := 0; i < n; i++ {
		xi := x[i*w.Cols : (i+1)*w.Cols]
		for r := 0; r < w.Rows; r++ {
			dst[i*w.Rows+r] = float32(DotRef(w.Type, w.Row(r), xi))
		}
	}
}

// smallMatMul is the multiply-add count below which MatMul runs on the
// caller alone (about 10 µs of work; a worker wake-up costs several µs).
const smallMatMul = 1 << 17

// Features names the instruction set the MatMul kernels use on this CPU
// ("avx2+fma+f16c" or "generic"), for logs and benchmark reports.
func Features() string { return simdName() }

// matmulScratch is the Pool's reusable MatMul state.
type matmulScratch struct {
	act  actBuf
	fn   func(lo, hi int) // p.matmulChunk, bound once
	qfn  func(lo, hi int) // p.quantChunk, bound once
	w    Matrix
	k    kernel
	x    []float32
	dst  []float32
	n    int
	rowC int // rows per work item
	tokC int // tokens per work item
	nrc  int // number of row chunks
}

// MatMul computes dst[i*w.Rows+r] = dot(row r of w, x[i*w.Cols:(i+1)*w.Cols])
// for i in [0, n). x is [n][Cols] float32 row-major, dst is [n][Rows].
//
// Quantized weights use quantized activations, as ggml's CPU backend does
// (see quant_act.go), then exact integer block sums and float32
// accumulation; F32, F16 and BF16 weights use float32 activations and FMA.
// Accuracy against the exact dot Σ w·x (DotRef): for Q8_0/Q8_1 activations
// |err| ≤ Σ|w_i|·0.57·amax_b/127 (+ |m_b|·32·amax_b·2^-11 per Q4_1/Q5_1
// block), for Q8_K ≤ Σ|w_i|·0.5·amax_b/127, where amax_b is the largest |x|
// of the element's activation block, plus 2e-5·Σ|w·x| of float32 rounding
// (the float types have only the latter). Tests: TestDotGolden, TestMatMulVsRef.
//
// Work is split over rows (and over tokens when n is large). The result for
// one (row, token) is bitwise independent of n, of the other tokens and of
// the thread count (batch invariance). MatMul panics if the slices are too
// short (a programming error, like an index out of range).
func (p *Pool) MatMul(dst []float32, w Matrix, x []float32, n int) {
	if n <= 0 {
		return
	}
	k, ok := kernels[w.Type]
	if !ok {
		panic(fmt.Sprintf("cpu: MatMul on unsupported type %s", w.Type))
	}
	if w.Rows <= 0 || w.Cols <= 0 || w.Cols%w.Type.BlockElems() != 0 ||
		len(x) < n*w.Cols || len(dst) < n*w.Rows || len(w.Data) < w.Rows*w.rowBytes() {
		panic(fmt.Sprintf("cpu: MatMul shapes: dst %d, x %d, n %d, w %dx%d (%d bytes)", len(dst), len(x), n, w.Rows, w.Cols, len(w.Data)))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &p.scratch
	if s.fn == nil {
		s.fn = p.matmulChunk
		s.qfn = p.quantChunk
	}
	s.w, s.k, s.x, s.dst, s.n = w, k, x, dst, n
	if k.act != actF32 {
		s.act.prepare(k.act, n, w.Cols)
		if n >= 4 && n*w.Cols >= 1<<14 && p.threads > 1 {
			p.forLocked(n, 1, s.qfn)
		} else {
			p.quantChunk(0, n)
		}
	}
	// Work items: row chunks of about 16 rows, token tiles when n is large.
	s.rowC = max(1, min(16, (w.Rows+p.threads-1)/p.threads))
	s.tokC = n
	if n > 8 {
		s.tokC = 8
		s.rowC = 16
	}
	s.nrc = (w.Rows + s.rowC - 1) / s.rowC
	items := s.nrc * ((n + s.tokC - 1) / s.tokC)
	if w.Rows*w.Cols*n < smallMatMul {
		p.matmulChunk(0, items) // waking workers would cost more than the work
	} else {
		p.forLocked(items, 1, s.fn)
	}
	s.x, s.dst, s.w.Data = nil, nil, nil
}

func (p *Pool) quantChunk(lo, hi int) {
	s := &p.scratch
	for i := lo; i < hi; i++ {
		s.act.quantizeToken(s.k.act, i, s.w.Cols, s.x[i*s.w.Cols:(i+1)*s.w.Cols])
	}
}

// matmulChunk computes work items [lo, hi): item it covers row chunk
// it%nrc and token tile it/nrc.
func (p *Pool) matmulChunk(lo, hi int) {
	s := &p.scratch
	w, rb := s.w, s.w.rowBytes()
	var v actView
	for it := lo; it < hi; it++ {
		r0 := (it % s.nrc) * s.rowC
		r1 := min(r0+s.rowC, w.Rows)
		t0 := (it / s.nrc) * s.tokC
		t1 := min(t0+s.tokC, s.n)
		i := t0
		if s.k.dot4 != nil {
			for ; i+4 <= t1; i += 4 {
				s.act.viewN(s.k.act, i, 4, w.Cols, s.x, &v)
				for r := r0; r < r1; r++ {
					o := s.k.dot4(w.Data[r*rb:(r+1)*rb], v, w.Cols)
					for j, val := range o {
						s.dst[(i+j)*w.Rows+r] = val
					}
				}
			}
		}
		for ; i < t1; i++ {
			s.act.view(s.k.act, i, w.Cols, s.x, &v)
			out := s.dst[i*w.Rows : (i+1)*w.Rows]
			for r := r0; r < r1; r++ {
				out[r] = s.k.dot(w.Data[r*rb:(r+1)*rb], v)
			}
		}
	}
}
