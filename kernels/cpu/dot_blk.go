package cpu

import (
	"encoding/binary"
	"math"
)

// Blocked kernels (Q4_0 and Q8_0 weights on AVX2). They share one
// canonical arithmetic per (row, token) pair, that of blkDotRef: the exact
// integer block sum I_b, then acc = fma(dw_b·dx_b, float32(I_b), acc) over
// blocks in order. Every shape performs exactly these float operations for
// each pair, so a result is bitwise the same whichever kernel computed it
// and whatever else was in the batch (batch invariance):
//
//	packed  8 rows (packed into a panel, packPanel) × 1 or 4 tokens: tiles of ≥ packMin tokens
//	gemm    1 row × a group of 8 tokens: rows of a tile of ≥ 4 tokens left over from whole panels
//	gemv8   groups of 8 rows × 1 token, one row per lane, prefetching: decode (dot_gemv*)
//	dot1    1 row × 1 token: the rows of a decode tile left over from groups of 8
//	gemv    8 rows × 1 token (tests and benchmarks; gemv8's inner step)
//
// The activation side gets extra layouts, filled by quantizeToken when
// blocked kernels are installed (blkActive):
//
//	s8  [n][nb]        8·Σq of each 32-block (Q4_0 stores w+8: Σ w·q = Σ (w+8)·q − 8·Σq)
//	dT  [groups][nb][8] scales of the tokens 8g..8g+7 (0 past n)
//	s8T [groups][nb][8] s8 likewise
//
// and qs is padded to whole groups of eight tokens (the padding is never
// used for a real token's result).

// blkKernel selects the blocked kernels of one weight type. The
// architecture file provides blkGemm, blkGemv, blkGemmPacked(4) and blkDot1.
type blkKernel struct {
	q4 bool // Q4_0 (reads s8 / s8T); else Q8_0
	// conv: rows of another type whose blocks are Q8_0 blocks stored
	// another way (IQ4_NL: levels of iq4Values as nibbles; Q5_0: values
	// -16..15 as nibbles and high bits). Their tiles convert the rows to Q8_0 with
	// conv and run the Q8_0 kernels (tileConv), so the type has Q8_0's
	// arithmetic (blkDotRef) and every one of its paths; gemv, when set,
	// computes one-token products of whole groups of rows straight from
	// the stored rows (returning how many rows it computed).
	conv func(dst, src []byte, nb int)
	gemv func(rows []byte, rb int, qs []int8, d []float32, s8 []int32, out []float32) int
	// gemvMax: products of up to gemvMax tokens run gemv token by token
	// (the second and later tokens read the tile's rows from cache) rather
	// than converting the rows, which costs about one token's product.
	// BenchmarkMatMulFewTokens, 5632 × 2048, µs for 1 / 2 / 4 / 6 tokens
	// token by token, and 7 / 8 converted: IQ4_NL with AVX-512 VNNI 188 /
	// 300 / 457 / 646, 876 / 772; Q5_0 on AVX2 353 / 630 / 1225 / 1864,
	// 1249 / 1278; IQ4_NL on AVX2 248 / 499 / 853 / 1239, 1152 / 1176.
	gemvMax int
}

// blkGroups returns the number of 8-token groups covering n tokens.
func blkGroups(n int) int { return (n + 7) / 8 }

// prepareBlk sizes the blocked layouts for n tokens (qs padded) and zeroes
// the scales of the padding tokens of the last group.
func (a *actBuf) prepareBlk(n, cols int) {
	nb, g := cols/qk, blkGroups(n)
	a.qs = growI8(a.qs, g*8*cols)[:n*cols]
	a.s8 = growI32(a.s8, n*nb)
	a.dT = growF32(a.dT, g*nb*8)
	a.s8T = growI32(a.s8T, g*nb*8)
	if n%8 != 0 {
		base := (g - 1) * nb * 8
		for b := 0; b < nb; b++ {
			for t := n % 8; t < 8; t++ {
				a.dT[base+b*8+t] = 0
				a.s8T[base+b*8+t] = 0
			}
		}
	}
}

func growI32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

// fillBlk writes token i's entries of s8, dT and s8T from its qs and d.
func (a *actBuf) fillBlk(i, cols int) {
	nb := cols / qk
	qs, d := a.qs[i*cols:(i+1)*cols], a.d[i*nb:(i+1)*nb]
	s8 := a.s8[i*nb : (i+1)*nb]
	base, t := (i/8)*nb*8, i%8
	for b := range s8 {
		var s int32
		for _, q := range qs[b*qk : (b+1)*qk] {
			s += int32(q)
		}
		s8[b] = 8 * s
		a.dT[base+b*8+t] = d[b]
		a.s8T[base+b*8+t] = 8 * s
	}
}

// blkDotRef is the canonical arithmetic of the blocked kernels for one
// (row, token) pair of a Q4_0 or Q8_0 row (bb = 18 or 34 bytes per block):
// acc = fma(dw_b·dx_b, float32(I_b), acc) over blocks in order, with I_b
// the exact integer block sum. Plain Go twin of the assembly; math.FMA in
// float64 then rounded can differ from a float32 FMA in the last bit, so
// tests compare within a tolerance.
func blkDotRef(q4 bool, row []byte, qs []int8, d []float32) float32 {
	tab := f16Table()
	bb := 34
	if q4 {
		bb = 18
	}
	var acc float32
	for b, dx := range d {
		blk := row[b*bb : (b+1)*bb]
		var si int32
		if q4 {
			si = dot32Nib(blk[2:], qs[32*b:], 8)
		} else {
			for j, q := range qs[32*b : 32*b+32] {
				si += int32(int8(blk[2+j])) * int32(q)
			}
		}
		acc = fma32(tab[le16(blk)]*dx, float32(si), acc)
	}
	return acc
}

// packMin is the token count from which a tile packs its weights into
// panels. With the AVX2 packers (dot_blk_pack_amd64.s) packing 8 rows
// costs less than computing them against one token, and the packed
// four-token kernel beats both the one-row × 8-token kernel and the
// per-token decode kernel from 4 tokens on (BenchmarkMatMulBatch, 2
// threads, Q4_0 and Q8_0 5632×2048: at n = 4 about half the CPU time per
// token of the 8-token kernel); below 4 the decode kernels win. Every
// path gives the same bits (TestMatMulBatchInvariance).
const packMin = 4

// tileBlk computes rows [r0, r1) of op for tokens [t0, t1) with the
// blocked kernels; worker indexes the per-worker panel scratch. t0 is a
// multiple of 8 (token tiles are multiples of 8, or all n tokens).
func (p *Pool) tileBlk(worker int, op *opPlan, r0, r1, t0, t1 int) {
	if r0 < op.w.dlRows() { // Q4_0 and Q8_0 decode layouts (q4_0_decode.go, q8_0_decode.go); tiles are whole groups
		p.tileBlkLayout(worker, op, r0, r1, t0, t1)
		return
	}
	s := &p.scratch
	w, bk := op.w, op.k.blk
	rb := op.rb
	a := &s.act[op.k.act]
	var out [8]float32
	var out4 [32]float32
	if blkPacked && t1-t0 >= packMin {
		// 8-row panels against every token of the tile; rows left over
		// (fewer than 8) take the gemm path below.
		if blkZTile != nil { // 16-row AVX-512 panels first (dot_blk16.go)
			r0 = blkZTile(p, worker, op, r0, r1, t0, t1)
		}
		nb := w.Cols / qk
		panel := growBytes(&s.panels[worker], nb*panelBlock)
		for ; r0+8 <= r1; r0 += 8 {
			// The next 8 rows (this tile's or, usually, this worker's next
			// tile's) stream in while these compute.
			next := w.Data[min((r0+8)*rb, len(w.Data)):min((r0+16)*rb, len(w.Data))]
			packPanel(bk, panel, w.Data[r0*rb:(r0+8)*rb], next, rb, nb)
			t := t0
			for ; t+4 <= t1; t += 4 {
				if !blkGemmPacked4(bk, panel, a, t, w.Cols, &out4) {
					break
				}
				for j := 0; j < 4; j++ {
					copy(op.dst[(t+j)*w.Rows+r0:(t+j)*w.Rows+r0+8], out4[8*j:8*j+8])
				}
			}
			for ; t < t1; t++ {
				blkGemmPacked(bk, panel, a, t, w.Cols, &out)
				copy(op.dst[t*w.Rows+r0:t*w.Rows+r0+8], out[:])
			}
		}
	}
	if t1-t0 >= 4 { // one row against groups of 8 tokens
		for r := r0; r < r1; r++ {
			for g := t0 / 8; g*8 < t1; g++ {
				blkGemm(bk, w.Data[r*rb:(r+1)*rb], a, g, w.Cols, &out)
				for t := g * 8; t < min(g*8+8, t1); t++ {
					op.dst[t*w.Rows+r] = out[t-g*8]
				}
			}
		}
		return
	}
	// Few tokens (decode): groups of 8 rows with one chain per lane and
	// software prefetch (blkDotRows), the tile's rows read as one region;
	// Q8_0 reads them once for two or three tokens (blkDotRowsFew).
	nb := w.Cols / qk
	if blkDotRowsFew(bk, w.Data[r0*rb:r1*rb], rb, a.qs[t0*w.Cols:t1*w.Cols], a.d[t0*nb:t1*nb], t1-t0, op.dst[t0*w.Rows+r0:], w.Rows) {
		return
	}
	for i := t0; i < t1; i++ {
		qs, d := a.qs[i*w.Cols:(i+1)*w.Cols], a.d[i*nb:(i+1)*nb]
		s8 := a.s8[i*nb : (i+1)*nb]
		blkDotRows(bk, w.Data[r0*rb:r1*rb], rb, qs, d, s8, op.dst[i*w.Rows+r0:i*w.Rows+r1])
	}
}

// panelBlock is the size of one block of a packed panel: 8 steps of 32
// bytes (step s: elements 4s..4s+3 of rows 0..7, one byte each: Q4_0
// unsigned 0..15, Q8_0 signed) then the 8 rows' scales as float32.
const panelBlock = 8*32 + 8*4

// packPanel packs 8 rows of bk's type into panel ([nb][panelBlock]): in
// assembly where it exists (packPanelSIMD, which also prefetches next, the
// rows to be packed after these), else with the Go twins below.
func packPanel(bk *blkKernel, panel, rows, next []byte, rb, nb int) {
	if packPanelSIMD(bk, panel, rows, next, rb, nb) {
		return
	}
	if bk.q4 {
		packQ4_0Panel(panel, rows, rb, nb)
	} else {
		packQ8_0Panel(panel, rows, rb, nb)
	}
}

// packQ8_0Panel packs 8 Q8_0 rows (rows[r*rb:], nb blocks each) into
// panel ([nb][panelBlock]) for gemmQ8_0p.
func packQ8_0Panel(panel, rows []byte, rb, nb int) {
	tab := f16Table()
	_ = rows[7*rb+nb*34-1]
	_ = panel[nb*panelBlock-1]
	le := binary.LittleEndian
	for b := 0; b < nb; b++ {
		dst := (*[panelBlock]byte)(panel[b*panelBlock:])
		for r := 0; r < 8; r++ {
			blk := (*[34]byte)(rows[r*rb+b*34:])
			o := 4 * r
			for s := 0; s < 8; s++ {
				le.PutUint32(dst[o+32*s:], le.Uint32(blk[2+4*s:]))
			}
			le.PutUint32(dst[256+o:], math.Float32bits(tab[uint16(blk[0])|uint16(blk[1])<<8]))
		}
	}
}

// packQ4_0Panel packs 8 Q4_0 rows (rows[r*rb:], nb blocks each) into
// panel ([nb][panelBlock]) for gemmQ4_0p.
func packQ4_0Panel(panel, rows []byte, rb, nb int) {
	tab := f16Table()
	_ = rows[7*rb+nb*18-1]
	_ = panel[nb*panelBlock-1]
	le := binary.LittleEndian
	for b := 0; b < nb; b++ {
		dst := (*[panelBlock]byte)(panel[b*panelBlock:])
		for r := 0; r < 8; r++ {
			blk := (*[18]byte)(rows[r*rb+b*18:])
			o := 4 * r
			v0, v1 := le.Uint32(blk[2:]), le.Uint32(blk[6:])
			v2, v3 := le.Uint32(blk[10:]), le.Uint32(blk[14:])
			le.PutUint32(dst[o:], v0&0x0f0f0f0f)
			le.PutUint32(dst[o+32:], v1&0x0f0f0f0f)
			le.PutUint32(dst[o+64:], v2&0x0f0f0f0f)
			le.PutUint32(dst[o+96:], v3&0x0f0f0f0f)
			le.PutUint32(dst[o+128:], (v0>>4)&0x0f0f0f0f)
			le.PutUint32(dst[o+160:], (v1>>4)&0x0f0f0f0f)
			le.PutUint32(dst[o+192:], (v2>>4)&0x0f0f0f0f)
			le.PutUint32(dst[o+224:], (v3>>4)&0x0f0f0f0f)
			le.PutUint32(dst[256+o:], math.Float32bits(tab[uint16(blk[0])|uint16(blk[1])<<8]))
		}
	}
}

func growBytes(s *[]byte, n int) []byte {
	if cap(*s) < n {
		*s = make([]byte, n)
	}
	return (*s)[:n]
}
