package cuda

import (
	"fmt"
	"math"

	"oengine/kernels/cpu"
)

// AttnPrefillMMARef computes on the host what attn_prefill_mma computes:
// per tile and KV head, each query row (token tileStart + r/G, head kh*G +
// r%G) rounded to F16 (with split: hi + lo, hi = f16(x), lo = f16(x-hi)),
// scores s = (q·k)·scale·log2(e) in float32 over the F16 keys, then for
// every chunk of MMAKeys positions the online softmax of the kernel:
// m' = max(m, max s), l = l·2^(m-m') + Σ p, o = o·2^(m-m') + Σ p·v with
// p = 2^(s-m') rounded the same way; out = o / l. Positions at or beyond a
// row's npos are masked.
//
// It differs from the kernel only in summation order (the tensor cores'
// f32 accumulation order is not specified; here dot products are summed in
// float64 and rounded once): differences stay within float32 rounding of
// the scores, which can move a rounded p by one F16 step. Shapes are those
// of AttnPrefillMMA: q, out [T][Heads][HeadDim]; kc, vc [slots][KVHeads*
// HeadDim] F16; tables [nseq][MaxPages]; seq, npos [T]; tileStart,
// tileLen [ntiles].
func AttnPrefillMMARef(out, q []float32, kc, vc []uint16, tables, seq, npos, tileStart, tileLen []int32, a AttnParams, split bool) error {
	if err := a.check(); err != nil {
		return err
	}
	G, D, Hq, Hk := a.Heads/a.KVHeads, a.HeadDim, a.Heads, a.KVHeads
	sl := a.Scale * float32(math.Log2E)
	var kf, vf []float32
	qh := make([]float64, D)
	o := make([]float32, D)
	s := make([]float32, MMAKeys)
	for tile := range tileStart {
		t0, nt := int(tileStart[tile]), int(tileLen[tile])
		if nt < 1 || nt*G > MMARows {
			return fmt.Errorf("cuda: prefill tile %d has %d tokens, at most %d", tile, nt, MMARows/G)
		}
		sq := int(seq[t0])
		table := tables[sq*a.MaxPages : (sq+1)*a.MaxPages]
		last := int(npos[t0+nt-1])
		for t := t0; t < t0+nt; t++ {
			if int(seq[t]) != sq || npos[t] > npos[t0+nt-1] {
				return fmt.Errorf("cuda: prefill tile %d mixes sequences or is out of order", tile)
			}
		}
		for kh := 0; kh < Hk; kh++ {
			// The keys and values of the tile's sequence for this KV head.
			if cap(kf) < last*D {
				kf, vf = make([]float32, last*D), make([]float32, last*D)
			}
			kf, vf = kf[:last*D], vf[:last*D]
			for p := 0; p < last; p++ {
				slot := int(table[p/a.PageSize])*a.PageSize + p%a.PageSize
				off := slot*Hk*D + kh*D
				for d := 0; d < D; d++ {
					kf[p*D+d] = cpu.F16ToF32(kc[off+d])
					vf[p*D+d] = cpu.F16ToF32(vc[off+d])
				}
			}
			for r := 0; r < nt*G; r++ {
				t, h := t0+r/G, kh*G+r%G
				rn := int(npos[t])
				qrow := q[(t*Hq+h)*D : (t*Hq+h+1)*D]
				for d := range qh {
					qh[d] = splitF16(qrow[d], split)
				}
				clear(o)
				m, l := float32(math.Inf(-1)), float32(0)
				for c0 := 0; c0 < rn; c0 += MMAKeys {
					n := min(MMAKeys, rn-c0)
					mx := m
					for j := 0; j < n; j++ {
						kr := kf[(c0+j)*D : (c0+j+1)*D]
						var dot float64
						for d, x := range qh {
							dot += x * float64(kr[d])
						}
						s[j] = float32(dot) * sl
						mx = max(mx, s[j])
					}
					alpha := float32(math.Exp2(float64(m - mx)))
					l *= alpha
					for d := range o {
						o[d] *= alpha
					}
					for j := 0; j < n; j++ {
						p := float32(splitF16(float32(math.Exp2(float64(s[j]-mx))), split))
						l += p
						vr := vf[(c0+j)*D : (c0+j+1)*D]
						for d := range o {
							o[d] += p * vr[d]
						}
					}
					m = mx
				}
				dst := out[(t*Hq+h)*D : (t*Hq+h+1)*D]
				inv := float32(0)
				if l > 0 {
					inv = 1 / l
				}
				for d := range dst {
					dst[d] = o[d] * inv
				}
			}
		}
	}
	return nil
}

// splitF16 is x rounded as attn_prefill_mma carries it: f16(x), plus
// f16(x - f16(x)) with split (exact in float64).
func splitF16(x float32, split bool) float64 {
	hi := cpu.F16ToF32(cpu.F32ToF16(x))
	if !split {
		return float64(hi)
	}
	return float64(hi) + float64(cpu.F16ToF32(cpu.F32ToF16(x-hi)))
}
