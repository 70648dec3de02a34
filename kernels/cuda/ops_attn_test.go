package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"oengine/kernels/cpu"
)

func init() {
	// Head dim 96: D/8 = 12 lanes per key do not divide a warp, so the
	// one-lane-per-dim kernel runs.
	a := AttnParams{Heads: 8, KVHeads: 2, HeadDim: 96, PageSize: 16, MaxPages: 4, Scale: 0.1}
	sigOps = append(sigOps, func(s *Stream) error { return s.AttnDecode(1, 2, 3, 4, 5, 6, 7, 3, 40, a) })
}

func TestDecodeKernelChoice(t *testing.T) {
	for D, want := range map[int]kernelName{32: kAttnDecodeV16, 64: kAttnDecodeV16, 128: kAttnDecodeV16,
		256: kAttnDecodeV16, 96: kAttnDecode, 160: kAttnDecode, 192: kAttnDecode} {
		if got := decodeKernel(D); got != want {
			t.Errorf("D=%d: %s, want %s", D, got, want)
		}
	}
}

// emulAttnDecodeV16 mirrors attn_decode_v16 for one token and one KV head
// and one split, lane by lane: the key groups, the 8-dim slices and their
// shuffle reduction (a sum over the LPK lanes of a group), the per-group
// online softmax and the block merge. It returns the split's partials in
// attn_combine's layout: m, l per head and acc [G][D].
func emulAttnDecodeV16(q []float32, kc, vc []uint16, table []int32, kh, Hk, G, D, pageSize, start, end int, scale float32) (ms, ls []float32, acc []float32) {
	const warps = 4
	LPK := D >> 3
	KPW := 32 / LPK
	NG := warps * KPW
	type lane struct {
		qv, acc [8][8]float32
		m, l    [8]float32
	}
	lanes := make([]lane, warps*32)
	rowLen := Hk * D
	for w := 0; w < warps; w++ {
		for ln := 0; ln < 32; ln++ {
			L := &lanes[w*32+ln]
			part := ln % LPK
			for h := 0; h < 8; h++ {
				L.m[h] = float32(math.Inf(-1))
				for i := 0; i < 8; i++ {
					if h < G {
						L.qv[h][i] = q[(kh*G+h)*D+part*8+i]
					}
				}
			}
		}
		for base := start + w*KPW; base < end; base += NG {
			var kf, vf [32][8]float32
			for ln := 0; ln < 32; ln++ {
				sub, part := ln/LPK, ln%LPK
				if p := base + sub; p < end {
					slot := int(table[p/pageSize])*pageSize + p%pageSize
					for i := 0; i < 8; i++ {
						kf[ln][i] = cpu.F16ToF32(kc[slot*rowLen+kh*D+part*8+i])
						vf[ln][i] = cpu.F16ToF32(vc[slot*rowLen+kh*D+part*8+i])
					}
				}
			}
			for h := 0; h < G; h++ {
				var s [32]float32
				for ln := 0; ln < 32; ln++ {
					for i := 0; i < 8; i++ {
						s[ln] += lanes[w*32+ln].qv[h][i] * kf[ln][i]
					}
				}
				for o := LPK >> 1; o > 0; o >>= 1 { // __shfl_xor_sync butterfly
					var n [32]float32
					for ln := 0; ln < 32; ln++ {
						n[ln] = s[ln] + s[ln^o]
					}
					s = n
				}
				for ln := 0; ln < 32; ln++ {
					if base+ln/LPK >= end {
						continue
					}
					L := &lanes[w*32+ln]
					sc := s[ln] * scale
					mn := max(L.m[h], sc)
					alpha := float32(math.Exp(float64(L.m[h] - mn)))
					e := float32(math.Exp(float64(sc - mn)))
					L.l[h] = L.l[h]*alpha + e
					for i := 0; i < 8; i++ {
						L.acc[h][i] = L.acc[h][i]*alpha + e*vf[ln][i]
					}
					L.m[h] = mn
				}
			}
		}
	}
	gm, gl := make([][8]float32, NG), make([][8]float32, NG)
	gacc := make([]float32, NG*G*D)
	for w := 0; w < warps; w++ {
		for ln := 0; ln < 32; ln++ {
			L := &lanes[w*32+ln]
			sub, part := ln/LPK, ln%LPK
			grp := w*KPW + sub
			for h := 0; h < G; h++ {
				if part == 0 {
					gm[grp][h], gl[grp][h] = L.m[h], L.l[h]
				}
				for i := 0; i < 8; i++ {
					gacc[(grp*G+h)*D+part*8+i] = L.acc[h][i]
				}
			}
		}
	}
	ms, ls, acc = make([]float32, G), make([]float32, G), make([]float32, G*D)
	for h := 0; h < G; h++ {
		M := float32(math.Inf(-1))
		for g := 0; g < NG; g++ {
			M = max(M, gm[g][h])
		}
		ms[h] = M
		for d := 0; d < D; d++ {
			var Ls, A float32
			if !math.IsInf(float64(M), -1) {
				for g := 0; g < NG; g++ {
					f := float32(math.Exp(float64(gm[g][h] - M)))
					Ls += gl[g][h] * f
					A += gacc[(g*G+h)*D+d] * f
				}
			}
			acc[h*D+d] = A
			ls[h] = Ls
		}
	}
	return ms, ls, acc
}

// The 16-byte-load decode kernel's lane layout, merged over splits as
// attn_combine does, equals the plain attention (cpu.AttendRef) for every
// head dim it takes, GQA ratios 1..8 and contexts shorter than, equal to
// and longer than a warp's keys per iteration.
func TestAttnDecodeV16Algorithm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const pageSize, splitLen = 16, 64
	for _, D := range []int{32, 64, 128, 256} {
		for _, hh := range [][2]int{{8, 1}, {8, 2}, {4, 4}} {
			Hq, Hk := hh[0], hh[1]
			G := Hq / Hk
			for _, n := range []int{1, 3, 17, 130} {
				pages := (n + pageSize - 1) / pageSize
				table := make([]int32, pages)
				for i := range table {
					table[i] = int32(pages - 1 - i)
				}
				kc := make([]uint16, pages*pageSize*Hk*D)
				vc := make([]uint16, len(kc))
				for i := range kc {
					kc[i] = cpu.F32ToF16(float32(rng.NormFloat64()))
					vc[i] = cpu.F32ToF16(float32(rng.NormFloat64()))
				}
				q := make([]float32, Hq*D)
				for i := range q {
					q[i] = float32(rng.NormFloat64())
				}
				scale := float32(1 / math.Sqrt(float64(D)))
				k := cpu.KVRows{F16: kc, PageSize: pageSize, Stride: Hk * D}
				v := cpu.KVRows{F16: vc, PageSize: pageSize, Stride: Hk * D}
				for kh := 0; kh < Hk; kh++ {
					want := make([]float32, G*D)
					cpu.AttendRef(want, q[kh*G*D:(kh+1)*G*D], G, k, v, table, n, kh*D, scale)
					// attn_combine over the splits
					nsplit := (n + splitLen - 1) / splitLen
					var pm, pl [][]float32
					var pa [][]float32
					for sp := 0; sp < nsplit; sp++ {
						m, l, a := emulAttnDecodeV16(q, kc, vc, table, kh, Hk, G, D, pageSize, sp*splitLen, min(n, (sp+1)*splitLen), scale)
						pm, pl, pa = append(pm, m), append(pl, l), append(pa, a)
					}
					for h := 0; h < G; h++ {
						M := float32(math.Inf(-1))
						for sp := range pm {
							M = max(M, pm[sp][h])
						}
						var L float32
						for sp := range pm {
							L += pl[sp][h] * float32(math.Exp(float64(pm[sp][h]-M)))
						}
						for d := 0; d < D; d++ {
							var a float32
							for sp := range pm {
								a += pa[sp][h*D+d] * float32(math.Exp(float64(pm[sp][h]-M)))
							}
							if got := a / L; math.Abs(float64(got-want[h*D+d])) > 1e-5 {
								t.Fatalf("D=%d Hq/Hk=%d/%d n=%d kh=%d: out[%d][%d] = %v, reference %v", D, Hq, Hk, n, kh, h, d, got, want[h*D+d])
							}
						}
					}
				}
			}
		}
	}
}
