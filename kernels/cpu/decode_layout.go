package cpu

import "oengine/ggml"

// Decode layouts. Decode reads every weight once per token, and the
// widest kernels compute 16 rows at once, lane r of a vector = row r. A
// decode layout stores each whole group of 16 rows so that such a kernel
// reads its operands as consecutive vectors of one stream: Q4_0
// (q4_0_decode.go), Q4_K (q4_k_decode.go), Q5_K (q5_k_decode.go) and Q6_K
// (q6_k_decode.go) have one, on CPUs with the AVX-512 VNNI kernels. A group keeps the byte range of its 16 rows (the
// same bytes, rearranged), so a matrix is packed in place, once, at load
// (PackDecodeLayout); rows after the last whole group stay row-major.
// Every kernel gives the bits it gives on the row-major rows.

// PackDecodeLayout writes m in its type's decode layout into dst
// (len(dst) == len(m.Data); dst may be m.Data itself) and returns the
// matrix over dst. It returns m and false, writing nothing, when no
// layout applies (another type, fewer than 16 rows, already packed, or
// this CPU lacks the layout's kernels).
func PackDecodeLayout(m Matrix, dst []byte) (Matrix, bool) {
	switch m.Type {
	case ggml.TypeQ4_0:
		return PackQ4_0Decode(m, dst)
	case ggml.TypeQ4_K:
		return PackQ4_KDecode(m, dst)
	case ggml.TypeQ5_K:
		return PackQ5_KDecode(m, dst)
	case ggml.TypeQ6_K:
		return PackQ6_KDecode(m, dst)
	}
	return m, false
}

// DecodeLayout reports whether m has rows in a decode layout.
func (m Matrix) DecodeLayout() bool { return m.dl }

// dlRows is the number of rows in the decode layout: the whole groups of
// 16 rows of a packed matrix, else 0.
func (m Matrix) dlRows() int {
	if !m.dl {
		return 0
	}
	return m.Rows &^ 15
}

// dlRow returns a row-major copy of row r (< m.dlRows()) of m.
func dlRow(m Matrix, r int) []byte {
	rb := m.rowBytes()
	g := r / 16
	out := make([]byte, rb)
	grp := m.Data[g*16*rb : (g+1)*16*rb]
	switch m.Type {
	case ggml.TypeQ4_K:
		q4kzUnpackRow(out, grp, r%16, m.Cols/qkK)
	case ggml.TypeQ5_K:
		q5kzUnpackRow(out, grp, r%16, m.Cols/qkK)
	case ggml.TypeQ6_K:
		q6kzUnpackRow(out, grp, r%16, m.Cols/qkK)
	default:
		q4zUnpackRow(out, grp, r%16, m.Cols/qk)
	}
	return out
}

// packKZ packs the whole groups of 16 rows of the K-quant matrix m into
// dst with pack (the type's group rewrite, rb bytes a row, nb
// super-blocks) and copies the rows after them; m and false when the
// layout does not apply (fewer than 16 rows, already packed, or no
// AVX-512 VNNI kernels).
func packKZ(m Matrix, dst []byte, pack func(dst, rows []byte, rb, nb int)) (Matrix, bool) {
	if !kzActive() || m.Rows < 16 || m.dl || len(dst) != len(m.Data) {
		return m, false
	}
	rb, nb := m.rowBytes(), m.Cols/qkK
	groups := m.Rows / 16
	tmp := make([]byte, 16*rb)
	for g := 0; g < groups; g++ {
		o := g * 16 * rb
		copy(tmp, m.Data[o:o+16*rb])
		pack(dst[o:o+16*rb], tmp, rb, nb)
	}
	if o := groups * 16 * rb; &dst[0] != &m.Data[0] {
		copy(dst[o:], m.Data[o:])
	}
	out := m
	out.Data, out.dl = dst, true
	return out, true
}
