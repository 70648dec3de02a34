package cpu

import "oengine/ggml"

// Decode layouts. Decode reads every weight once per token, and the
// widest kernels compute 16 rows at once, lane r of a vector = row r. A
// decode layout stores each whole group of 16 rows so that such a kernel
// reads its operands as consecutive vectors of one stream: Q4_0
// (q4_0_decode.go; IQ4_NL takes it too, iq4_nl.go), Q5_0 and Q5_1
// (q5_0_decode.go), Q8_0 (q8_0_decode.go) and Q2_K to Q6_K (k_decode.go)
// have one, on CPUs
// with the AVX-512 VNNI kernels. A group keeps the byte range of its 16
// rows (the same bytes, rearranged), so a matrix is packed in place, once,
// at load (PackDecodeLayout); rows after the last whole group stay
// row-major. Every kernel gives the bits it gives on the row-major rows.

// PackDecodeLayout writes m in its type's decode layout into dst
// (len(dst) == len(m.Data); dst may be m.Data itself) and returns the
// matrix over dst. It returns m and false, writing nothing, when no
// layout applies (another type, fewer than 16 rows, already packed, or
// this CPU lacks the layout's kernels).
func PackDecodeLayout(m Matrix, dst []byte) (Matrix, bool) {
	switch m.Type {
	case ggml.TypeQ4_0:
		return PackQ4_0Decode(m, dst)
	case ggml.TypeQ8_0:
		return PackQ8_0Decode(m, dst)
	case ggml.TypeIQ4_NL:
		return PackIQ4_NLDecode(m, dst)
	case ggml.TypeQ5_0:
		return PackQ5_0Decode(m, dst)
	case ggml.TypeQ5_1:
		return PackQ5_1Decode(m, dst)
	case ggml.TypeQ2_K, ggml.TypeQ3_K, ggml.TypeQ4_K, ggml.TypeQ5_K, ggml.TypeQ6_K:
		return PackKDecode(m, dst)
	case ggml.TypeBF16:
		return PackBF16(m, dst) // not a layout: F16 values (bf16_f16.go)
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
	out := make([]byte, m.rowBytes())
	dlRowInto(out, m, r)
	return out
}

// dlRowInto writes row r (< m.dlRows()) of m row-major into out
// (m.rowBytes() bytes).
func dlRowInto(out []byte, m Matrix, r int) {
	rb := m.rowBytes()
	g := r / 16
	grp := m.Data[g*16*rb : (g+1)*16*rb]
	switch l, ok := kzLayouts[m.Type]; {
	case ok:
		l.unpackRow(out, grp, r%16, m.Cols/qkK)
	case m.Type == ggml.TypeQ8_0:
		q8zUnpackRow(out, grp, r%16, m.Cols/qk)
	case m.Type == ggml.TypeQ5_0 || m.Type == ggml.TypeQ5_1:
		q5zUnpackRow(out, grp, r%16, m.Cols/qk, m.Type == ggml.TypeQ5_1)
	default:
		q4zUnpackRow(out, grp, r%16, m.Cols/qk)
	}
}

// packGroups packs the whole groups of 16 rows of m into dst with pack
// (the type's group rewrite, rows rb bytes apart) and copies the rows
// after them; m and false, writing nothing, for fewer than 16 rows, an
// already packed matrix or a dst of another size.
func packGroups(m Matrix, dst []byte, pack func(dst, rows []byte, rb int)) (Matrix, bool) {
	if m.Rows < 16 || m.dl || len(dst) != len(m.Data) {
		return m, false
	}
	rb := m.rowBytes()
	groups := m.Rows / 16
	tmp := make([]byte, 16*rb)
	for g := 0; g < groups; g++ {
		o := g * 16 * rb
		copy(tmp, m.Data[o:o+16*rb])
		pack(dst[o:o+16*rb], tmp, rb)
	}
	if o := groups * 16 * rb; &dst[0] != &m.Data[0] {
		copy(dst[o:], m.Data[o:])
	}
	out := m
	out.Data, out.dl = dst, true
	return out, true
}
