package cpu

import (
	"fmt"
	"math"

	"oengine/ggml"
)

// Matrix is a weight matrix [Rows][Cols] stored row-major in GGML type
// Type: row r occupies Data[r*RowBytes : (r+1)*RowBytes] with RowBytes =
// Type.RowBytes(Cols). In GGUF terms Dims = [Cols, Rows]; rows are output
// features.
type Matrix struct {
	Type       ggml.Type
	Rows, Cols int
	Data       []byte
	// dl: the whole groups of 16 rows, rows [0, dlRows()), are stored
	// in the decode layout of Type (decode_layout.go) instead of
	// row-major.
	dl bool
	// bf16: a BF16 matrix stored as F16 values times 2^pow2 (PackBF16);
	// products and RowF32 scale back by 2^-pow2.
	bf16 bool
	pow2 int
}

// NewMatrix validates that data holds rows×cols elements of type t (whole
// blocks per row) and that MatMul supports t.
func NewMatrix(t ggml.Type, rows, cols int, data []byte) (Matrix, error) {
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

// Row returns the encoded bytes of row r (a copy for rows stored in a
// decode layout; for a converted BF16 matrix, its F16 values times
// 2^pow2).
func (m Matrix) Row(r int) []byte {
	rb := m.rowBytes()
	if r < m.dlRows() {
		return dlRow(m, r)
	}
	return m.Data[r*rb : (r+1)*rb]
}

// RowF32 decodes row r into dst[:Cols] (embedding lookups). A row in a
// decode layout (a tied output matrix) is first copied row-major into
// buf, which then needs RowScratch() bytes (with a shorter buf the copy
// is allocated). It panics if r is out of range, like a slice index;
// callers validate token ids first.
func (m Matrix) RowF32(r int, dst []float32, buf []byte) {
	if r < 0 || r >= m.Rows {
		panic(fmt.Sprintf("cpu: row %d of a %d-row matrix", r, m.Rows))
	}
	rb := m.rowBytes()
	row := m.Data[r*rb : (r+1)*rb]
	if r < m.dlRows() {
		if len(buf) >= rb {
			row = buf[:rb]
			dlRowInto(row, m, r)
		} else {
			row = dlRow(m, r)
		}
	}
	if err := Dequantize(m.Type, row, dst[:m.Cols]); err != nil {
		panic(err) // unreachable for a Matrix built by NewMatrix
	}
	m.unscale(dst[:m.Cols])
}

// RowScratch is the buf length RowF32 needs to decode m's rows without
// allocating: a row's bytes when m has rows in a decode layout, else 0.
func (m Matrix) RowScratch() int {
	if m.dl {
		return m.rowBytes()
	}
	return 0
}

// kernel says how MatMul computes with one weight type.
type kernel struct {
	act actKind
	dot func(row []byte, a actView) float32 // one row, one token
	// dot4 (optional) computes one row against four consecutive tokens (a
	// spans all four); per token it must equal dot bit for bit.
	dot4 func(row []byte, a actView, cols int) [4]float32
	// dot4r (optional, with dot4) computes dot4 for all the rows in rows (rb
	// bytes each): dst[t*dstride+r] for t < 4.
	dot4r func(rows []byte, rb int, a actView, cols int, dst []float32, dstride int)
	// blk (optional) replaces dot4 for n > 1 and the row loop of dot
	// (dot_blk.go); dot is then its one-pair form.
	blk *blkKernel
	// dot22 (optional) computes rows r, r+1 (rb bytes apart) against two
	// consecutive tokens (a spans both): [r·t0, r·t1, r+1·t0, r+1·t1],
	// each bitwise equal to dot.
	dot22 func(rows []byte, rb int, a actView, cols int) [4]float32
}

// rowsKernel computes out[j] = dot(row j of rows, token v) for len(out)
// rows of rb bytes, bitwise the type's one-row kernel (kernel.dot) per row.
type rowsKernel func(rows []byte, rb int, v actView, out []float32, pf int)

// portable holds the plain Go kernels (the twins of the SIMD ones).
var portable = map[ggml.Type]kernel{
	ggml.TypeF32:    {act: actF32, dot: dotF32RowGo},
	ggml.TypeF16:    {act: actF32, dot: dotF16RowGo},
	ggml.TypeBF16:   {act: actF32, dot: dotBF16RowGo},
	ggml.TypeQ4_0:   {act: actQ8_0, dot: dotQ4_0Go},
	ggml.TypeQ4_1:   {act: actQ8_1, dot: dotQ4_1Go},
	ggml.TypeQ5_0:   {act: actQ8_0, dot: dotQ5_0Go},
	ggml.TypeQ5_1:   {act: actQ8_1, dot: dotQ5_1Go},
	ggml.TypeQ8_0:   {act: actQ8_0, dot: dotQ8_0Go},
	ggml.TypeQ2_K:   {act: actQ8K, dot: dotQ2_KGo},
	ggml.TypeQ3_K:   {act: actQ8K, dot: dotQ3_KGo},
	ggml.TypeQ4_K:   {act: actQ8K, dot: dotQ4_KGo},
	ggml.TypeQ5_K:   {act: actQ8K, dot: dotQ5_KGo},
	ggml.TypeQ6_K:   {act: actQ8K, dot: dotQ6_KGo},
	ggml.TypeIQ4_NL: {act: actQ8_0, dot: dotIQ4_NLGo},
	ggml.TypeIQ4_XS: {act: actQ8K, dot: dotIQ4_XSGo},
	ggml.TypeMXFP4:  {act: actQ8_0, dot: dotMXFP4Go},
}

func clonedKernels(m map[ggml.Type]kernel) map[ggml.Type]kernel {
	c := make(map[ggml.Type]kernel, len(m))
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
			dst[i*w.Rows+r] = float32(math.Ldexp(DotRef(w.Type, w.Row(r), xi), -w.pow2))
		}
	}
}

// smallMatMul is the multiply-add count below which MatMul runs on the
// caller alone (about 10 µs of work; a worker wake-up costs several µs).
const smallMatMul = 1 << 17
