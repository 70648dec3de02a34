package cuda

import (
	"fmt"
	"math"

	"oengine/kernels/cpu"
)

// A warp simulator for the PTX instructions attn_prefill_mma uses, and a
// lane-by-lane Go transliteration of kernels/fattn.cu on top of it. The
// instruction semantics below are written from the PTX ISA's own formulas
// ("Matrix Fragments for mma.m16n8k16 with floating point type": groupID =
// laneid>>2, threadID_in_group = laneid%4, element i of a fragment in
// register i/2, lower index in the low half; "ldmatrix": lanes 8i..8i+7
// address the rows of matrix i, a group of four lanes receives one row, or
// one column with .trans), independently of the kernel's index arithmetic;
// the transliteration places values the way the kernel does, so the tests
// check the kernel's layouts against the instructions' definitions.

// warpRegs4 holds four 32-bit registers per lane.
type warpRegs4 [32][4]uint32

func halfOf(r uint32, i int) uint16 { return uint16(r >> (16 * (i & 1))) }

func packHalves(lo, hi uint16) uint32 { return uint32(lo) | uint32(hi)<<16 }

// ptxLdmatrixX4 is ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16: addr
// holds each lane's row address in halves into sm (16-byte aligned).
func ptxLdmatrixX4(sm []uint16, addr [32]int, trans bool) warpRegs4 {
	var r warpRegs4
	for i := 0; i < 4; i++ {
		var M [8][8]uint16
		for row := 0; row < 8; row++ {
			a := addr[8*i+row]
			if a%8 != 0 {
				panic(fmt.Sprintf("ldmatrix row address %d (halves) is not 16-byte aligned", a))
			}
			copy(M[row][:], sm[a:a+8])
		}
		for l := 0; l < 32; l++ {
			if trans {
				r[l][i] = packHalves(M[2*(l&3)][l>>2], M[2*(l&3)+1][l>>2])
			} else {
				r[l][i] = packHalves(M[l>>2][2*(l&3)], M[l>>2][2*(l&3)+1])
			}
		}
	}
	return r
}

// ptxMMA16816 is mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 with
// d = c: c = A·B + c, the matrices assembled from the 32 lanes' fragments
// by the PTX formulas (products exact, sums in float64, rounded to f32).
func ptxMMA16816(c *[32][4]float32, a *[32][4]uint32, b *[32][2]uint32) {
	var A [16][16]float64
	var B [16][8]float64
	var C [16][8]float64
	for l := 0; l < 32; l++ {
		g, t := l>>2, l&3
		for i := 0; i < 8; i++ {
			row := g + 8
			if i < 2 || (4 <= i && i < 6) {
				row = g
			}
			col := t*2 + (i & 1)
			if i >= 4 {
				col += 8
			}
			A[row][col] = float64(cpu.F16ToF32(halfOf(a[l][i/2], i)))
		}
		for i := 0; i < 4; i++ {
			row := t*2 + (i & 1)
			if i >= 2 {
				row += 8
			}
			B[row][g] = float64(cpu.F16ToF32(halfOf(b[l][i/2], i)))
		}
		for i := 0; i < 4; i++ {
			row := g
			if i >= 2 {
				row = g + 8
			}
			C[row][t*2+(i&1)] = float64(c[l][i])
		}
	}
	for l := 0; l < 32; l++ {
		g, t := l>>2, l&3
		for i := 0; i < 4; i++ {
			row, col := g, t*2+(i&1)
			if i >= 2 {
				row = g + 8
			}
			d := C[row][col]
			for k := 0; k < 16; k++ {
				d += A[row][k] * B[k][col]
			}
			c[l][i] = float32(d)
		}
	}
}

func f2h(x float32) uint16    { return cpu.F32ToF16(x) }
func h2f(h uint16) float32    { return cpu.F16ToF32(h) }
func exp2f(x float32) float32 { return float32(math.Exp2(float64(x))) }

const (
	faRows = 64 // FA_ROWS
	faKC   = 64 // FA_KC
)

// faBlock is the shared state of one simulated attn_prefill_mma block.
type faBlock struct {
	D, KS            int
	sm               []uint16 // ks [FA_KC][KS] then vs [FA_KC][KS]
	ksb, vsb         int      // buffer offsets in halves
	kc, vc           []uint16
	table            []int32
	pageSize, kh     int
	rowLen           int
	last             int
	blockDim         int
	loadCount, zeros int // 16-byte copies issued / zero-filled (for the tests)
}

// load transliterates fa_load: positions >= last are zero-filled.
func (b *faBlock) load(buf int, cache []uint16, c0 int) {
	seg := b.D / 8
	for tid := 0; tid < b.blockDim; tid++ {
		for i := tid; i < faKC*seg; i += b.blockDim {
			j, s, p := i/seg, i%seg, c0+i/seg
			dst := b.sm[buf+j*(b.D+8)+s*8 : buf+j*(b.D+8)+s*8+8]
			b.loadCount++
			if p < b.last {
				slot := int(b.table[p/b.pageSize])*b.pageSize + p%b.pageSize
				copy(dst, cache[slot*b.rowLen+b.kh*b.D+s*8:])
			} else {
				clear(dst)
				b.zeros++
			}
		}
	}
}

// faSplit transliterates fa_split: hi = f16(x), lo = f16(x - hi) or 0.
func faSplit(x float32, split bool) (hi, lo uint16) {
	hi = f2h(x)
	if split {
		lo = f2h(x - h2f(hi))
	}
	return hi, lo
}

// faQFrags transliterates the Q fragment loads of one warp: A fragments
// [KT] of rows r0 = 16w+g (regs 0, 2) and r1 = r0+8 (regs 1, 3), of Q
// (hi) and of its remainder (lo, zero without split); qrow(r) returns a
// query row or nil for padding.
func faQFrags(D, warp int, split bool, qrow func(r int) []float32) (qa, ql [][32][4]uint32) {
	qa, ql = make([][32][4]uint32, D/16), make([][32][4]uint32, D/16)
	pair := func(row []float32, c int) (uint32, uint32) {
		if row == nil {
			return 0, 0
		}
		h0, l0 := faSplit(row[c], split)
		h1, l1 := faSplit(row[c+1], split)
		return packHalves(h0, h1), packHalves(l0, l1)
	}
	for lane := 0; lane < 32; lane++ {
		g, c := lane>>2, lane&3
		r0 := warp*16 + g
		q0, q1 := qrow(r0), qrow(r0+8)
		for k := 0; k < D/16; k++ {
			col := k*16 + 2*c
			for i, src := range [4]struct {
				row []float32
				col int
			}{{q0, col}, {q1, col}, {q0, col + 8}, {q1, col + 8}} {
				qa[k][lane][i], ql[k][lane][i] = pair(src.row, src.col)
			}
		}
	}
	return qa, ql
}

// faKAddr and faVAddr transliterate kaddr and vaddr (in halves, relative
// to the buffer), before the per-step offsets.
func faKAddr(lane, KS int) int {
	mi, mr := lane>>3, lane&7
	return ((mi>>1)*8+mr)*KS + (mi&1)*8
}

func faVAddr(lane, KS int) int {
	mi, mr := lane>>3, lane&7
	return ((mi&1)*8+mr)*KS + (mi>>1)*8
}

// faScores transliterates S = Q·Kᵀ of one warp over the K buffer: s [ST]
// accumulator tiles (keys 8j..8j+7 of the chunk); ql, when not nil, is
// the remainder of Q (split).
func faScores(b *faBlock, qa, ql [][32][4]uint32) [][32][4]float32 {
	s := make([][32][4]float32, faKC/8)
	for k := 0; k < b.D/16; k++ {
		for j := 0; j < faKC/16; j++ {
			var addr [32]int
			for lane := range addr {
				addr[lane] = b.ksb + faKAddr(lane, b.KS) + j*16*b.KS + k*16
			}
			r := ptxLdmatrixX4(b.sm, addr, false)
			var b0, b1 [32][2]uint32
			for lane := range r {
				b0[lane] = [2]uint32{r[lane][0], r[lane][1]}
				b1[lane] = [2]uint32{r[lane][2], r[lane][3]}
			}
			qk := qa[k]
			ptxMMA16816(&s[2*j], &qk, &b0)
			ptxMMA16816(&s[2*j+1], &qk, &b1)
			if ql != nil {
				lk := ql[k]
				ptxMMA16816(&s[2*j], &lk, &b0)
				ptxMMA16816(&s[2*j+1], &lk, &b1)
			}
		}
	}
	return s
}

// faPV transliterates O += P·V of one warp over the V buffer; pl, when not
// nil, is the remainder of P (split).
func faPV(b *faBlock, pa, pl [][32][4]uint32, o [][32][4]float32) {
	for k := 0; k < faKC/16; k++ {
		for j := 0; j < b.D/16; j++ {
			var addr [32]int
			for lane := range addr {
				addr[lane] = b.vsb + faVAddr(lane, b.KS) + k*16*b.KS + j*16
			}
			r := ptxLdmatrixX4(b.sm, addr, true)
			var b0, b1 [32][2]uint32
			for lane := range r {
				b0[lane] = [2]uint32{r[lane][0], r[lane][1]}
				b1[lane] = [2]uint32{r[lane][2], r[lane][3]}
			}
			pk := pa[k]
			ptxMMA16816(&o[2*j], &pk, &b0)
			ptxMMA16816(&o[2*j+1], &pk, &b1)
			if pl != nil {
				lk := pl[k]
				ptxMMA16816(&o[2*j], &lk, &b0)
				ptxMMA16816(&o[2*j+1], &lk, &b1)
			}
		}
	}
}

// faPFrags transliterates the packing of P (F16 values p[j][lane][e] laid
// out as S's accumulator tiles) into A fragments for P·V.
func faPFrags(p [][32][4]uint16) [][32][4]uint32 {
	pa := make([][32][4]uint32, faKC/16)
	for j := range p {
		for lane := 0; lane < 32; lane++ {
			pa[j>>1][lane][(j&1)*2] = packHalves(p[j][lane][0], p[j][lane][1])
			pa[j>>1][lane][(j&1)*2+1] = packHalves(p[j][lane][2], p[j][lane][3])
		}
	}
	return pa
}

// simAttnPrefillMMA runs attn_prefill_mma's grid (ntiles, Hk) block by
// block (blocks share nothing, so their order, which the kernel reverses,
// does not matter), warp by warp and lane by lane, as kernels/fattn.cu
// does. A sequential simulation cannot check the placement of
// __syncthreads and cp.async waits; it follows the kernel's order of
// loads and reads.
func simAttnPrefillMMA(out, q []float32, kc, vc []uint16, tables []int32, maxPages int, seq, npos, tileStart, tileLen []int32,
	Hq, Hk, D, pageSize int, scale float32, split bool) (loads, zeros int) {
	KS, NT := D+8, D/8
	for tile := range tileStart {
		for kh := 0; kh < Hk; kh++ {
			t0, nt := int(tileStart[tile]), int(tileLen[tile])
			G := Hq / Hk
			R := nt * G
			b := &faBlock{D: D, KS: KS, sm: make([]uint16, 2*faKC*KS), ksb: 0, vsb: faKC * KS, kc: kc, vc: vc,
				table: tables[int(seq[t0])*maxPages:], pageSize: pageSize, kh: kh, rowLen: Hk * D,
				last: int(npos[t0+nt-1]), blockDim: 128}
			// Poison shared memory: every value read must have been written.
			for i := range b.sm {
				b.sm[i] = 0x7e00 // NaN
			}
			qrow := func(r int) []float32 {
				if r >= R {
					return nil
				}
				off := ((t0+r/G)*Hq + kh*G + r%G) * D
				return q[off : off+D]
			}
			type warpState struct {
				active bool
				wlast  int
				n      [32][2]int
				qa, ql [][32][4]uint32
				m, l   [32][2]float32
				o      [][32][4]float32
				pa, pl [][32][4]uint32
			}
			ws := make([]warpState, 4)
			sl := scale * float32(math.Log2E)
			for w := range ws {
				rb := w * 16
				st := &ws[w]
				st.active = rb < R
				st.wlast = int(npos[t0+min((rb+15)/G, nt-1)])
				for lane := 0; lane < 32; lane++ {
					r0 := rb + lane>>2
					st.n[lane] = [2]int{int(npos[t0+min(r0/G, nt-1)]), int(npos[t0+min((r0+8)/G, nt-1)])}
					st.m[lane] = [2]float32{float32(math.Inf(-1)), float32(math.Inf(-1))}
				}
				st.qa, st.ql = faQFrags(D, w, split, qrow)
				if !split {
					st.ql = nil
				}
				st.o = make([][32][4]float32, NT)
			}
			b.load(b.ksb, kc, 0)
			for c0 := 0; c0 < b.last; c0 += faKC {
				b.load(b.vsb, vc, c0)
				for w := range ws {
					st := &ws[w]
					if !(st.active && c0 < st.wlast) {
						continue
					}
					s := faScores(b, st.qa, st.ql)
					var mx [32][2]float32
					for lane := 0; lane < 32; lane++ {
						c := lane & 3
						mx[lane] = st.m[lane]
						for j := range s {
							for e := 0; e < 4; e++ {
								key := c0 + j*8 + 2*c + (e & 1)
								v := float32(math.Inf(-1))
								if key < st.n[lane][e>>1] {
									v = s[j][lane][e] * sl
								}
								s[j][lane][e] = v
								mx[lane][e>>1] = max(mx[lane][e>>1], v)
							}
						}
					}
					for _, x := range []int{1, 2} { // __shfl_xor_sync
						prev := mx
						for lane := 0; lane < 32; lane++ {
							for h := 0; h < 2; h++ {
								mx[lane][h] = max(prev[lane][h], prev[lane^x][h])
							}
						}
					}
					p, lo := make([][32][4]uint16, len(s)), make([][32][4]uint16, len(s))
					for lane := 0; lane < 32; lane++ {
						var base, alpha [2]float32
						for h := 0; h < 2; h++ {
							base[h] = mx[lane][h]
							if math.IsInf(float64(base[h]), -1) {
								base[h] = 0
							}
							alpha[h] = exp2f(st.m[lane][h] - base[h])
							st.l[lane][h] *= alpha[h]
							st.m[lane][h] = mx[lane][h]
						}
						for j := range st.o {
							st.o[j][lane][0] *= alpha[0]
							st.o[j][lane][1] *= alpha[0]
							st.o[j][lane][2] *= alpha[1]
							st.o[j][lane][3] *= alpha[1]
						}
						for j := range s {
							for e := 0; e < 4; e++ {
								p[j][lane][e], lo[j][lane][e] = faSplit(exp2f(s[j][lane][e]-base[e>>1]), split)
								st.l[lane][e>>1] += h2f(p[j][lane][e]) + h2f(lo[j][lane][e])
							}
						}
					}
					st.pa, st.pl = faPFrags(p), nil
					if split {
						st.pl = faPFrags(lo)
					}
				}
				if c0+faKC < b.last {
					b.load(b.ksb, kc, c0+faKC)
				}
				for w := range ws {
					st := &ws[w]
					if st.active && c0 < st.wlast {
						faPV(b, st.pa, st.pl, st.o)
					}
				}
			}
			for w := range ws {
				st := &ws[w]
				var l [32][2]float32
				l = st.l
				for _, x := range []int{1, 2} {
					prev := l
					for lane := 0; lane < 32; lane++ {
						l[lane][0] = prev[lane][0] + prev[lane^x][0]
						l[lane][1] = prev[lane][1] + prev[lane^x][1]
					}
				}
				for lane := 0; lane < 32; lane++ {
					g, c := lane>>2, lane&3
					for h := 0; h < 2; h++ {
						r := w*16 + g + 8*h
						if r >= R {
							continue
						}
						inv := float32(0)
						if l[lane][h] > 0 {
							inv = 1 / l[lane][h]
						}
						orow := out[((t0+r/G)*Hq+kh*G+r%G)*D:]
						for j := 0; j < NT; j++ {
							orow[j*8+2*c] = st.o[j][lane][2*h] * inv
							orow[j*8+2*c+1] = st.o[j][lane][2*h+1] * inv
						}
					}
				}
			}
			loads += b.loadCount
			zeros += b.zeros
		}
	}
	return loads, zeros
}
