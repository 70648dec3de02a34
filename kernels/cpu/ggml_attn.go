package cpu

import "math"

// ggmlTileKV is GGML_FA_TILE_KV: the number of key positions per tile of
// llama.cpp's tiled CPU flash attention.
const ggmlTileKV = 64

// AttendGGMLTiled computes the same attention as Attend (same arguments)
// with the arithmetic of llama.cpp's tiled CPU flash attention
// (ggml_compute_forward_flash_attn_ext_tiled, taken for batches of at least
// 64 query rows), per query head:
//
//   - positions are visited in tiles of 64 (0..63, 64..127, ...); the
//     query stays float32; each score is a sequential fused multiply-add
//     chain over the head dimension (its simd_gemm), then times scale;
//   - per tile: M' = max(M, tile max); when it grows, acc and S are scaled
//     by expf(M−M'); the tile's weights are ggml's vector expf (expGGML) of
//     s−M', summed 8 at a time (hsum8) into a float64 that is then added to
//     the float32 S; acc[j] += w_p·v_p[j] as a fused multiply-add chain over
//     the tile's positions in order;
//   - out = acc · (1/S).
//
// Positions past n inside the last tile are masked (weight 0), as in
// llama.cpp. scratch needs len(q)/g values (AttnScratch covers it).
func AttendGGMLTiled(out, q []float32, g int, k, v KVRows, table []int32, n, off int, scale float32, scratch []float32) {
	d := len(q) / g
	var kqBuf [ggmlTileKV]float32
	kq := kqBuf[:]
	buf := scratch[:d] // F16 rows are widened here
	ninf := float32(math.Inf(-1))
	for h := 0; h < g; h++ {
		qh := q[h*d : h*d+d]
		acc := out[h*d : h*d+d]
		for j := range acc {
			acc[j] = 0
		}
		M, S := ninf, float32(0)
		for t0 := 0; t0 < n; t0 += ggmlTileKV {
			cnt := min(ggmlTileKV, n-t0)
			tileMax := ninf
			for tk := 0; tk < cnt; tk++ {
				kr := k.loadRow(buf, k.index(table, t0+tk, off), d)
				var a float32
				for j, x := range qh {
					a = fmaF32(kr[j], x, a)
				}
				s := a * scale
				kq[tk] = s
				tileMax = max(tileMax, s)
			}
			mNew := max(M, tileMax)
			if mNew > M {
				ms := float32(math.Exp(float64(M - mNew)))
				for j := range acc {
					acc[j] *= ms
				}
				S *= ms
			}
			M = mNew
			var sum float64
			for g8 := 0; g8 < ggmlTileKV; g8 += 8 {
				var e [8]float32
				for l := 0; l < 8; l++ {
					if tk := g8 + l; tk < cnt {
						e[l] = expGGML(kq[tk] - mNew)
					}
				}
				sum += float64(hsum8(&e))
				copy(kq[g8:g8+8], e[:])
			}
			S = float32(float64(S) + sum)
			for tk := 0; tk < cnt; tk++ {
				w := kq[tk]
				vr := v.loadRow(buf, v.index(table, t0+tk, off), d)
				for j, x := range vr {
					acc[j] = fmaF32(x, w, acc[j])
				}
			}
		}
		inv := float32(0)
		if S != 0 {
			inv = 1 / S
		}
		for j := range acc {
			acc[j] *= inv
		}
	}
}

// GGMLSplitKV is llama.cpp's split-KV CPU flash attention for decoding
// (ggml_compute_forward_flash_attn_ext_f16 with use_split_kv_path: one
// query row, F16 K/V, a KV view of at least 512 cells). The KV view is the
// sequence's cells padded to a multiple of 256 (llama.cpp's KV cache
// padding); each of Threads threads runs the one-row F16 arithmetic
// (AttendF16) over its chunk of ceil(view/Threads) cells, and the chunks'
// partial (max, sum, accumulator) are merged in order:
//
//	M' = max(M, Mc); a = expf(M−M'), b = expf(Mc−M')
//	acc[j] = fma(acc[j], a, accc[j]·b); S = fma(S, a, Sc·b)
//
// (ggml_flash_attn_ext_reduce_partials as GCC contracts it), then
// out = acc·(1/S). The result depends on Threads: the reference data was
// written with 2.
type GGMLSplitKV struct {
	Threads int // llama.cpp's decode thread count (<= 0: 2)
	// AVX512 sums q·k in the order of an AVX-512 build of ggml
	// (dotF16Order512) instead of AVX2's (dotF16Order).
	AVX512 bool
}

// GGMLSplitKVMin is the smallest padded KV view for which llama.cpp decodes
// with the split-KV path.
const GGMLSplitKVMin = 512

// GGMLKVView returns llama.cpp's KV view length for a sequence of n cells:
// n padded to a multiple of 256 (at least 256).
func GGMLKVView(n int) int { return max(256, (n+255)/256*256) }

// Attend has Attend's arguments and semantics (n positions, F16 store).
func (sp GGMLSplitKV) Attend(out, q []float32, g int, k, v KVRows, table []int32, n, off int, scale float32, scratch []float32) {
	if k.F16 == nil || v.F16 == nil {
		Attend(out, q, g, k, v, table, n, off, scale, scratch)
		return
	}
	nth := sp.Threads
	if nth <= 0 {
		nth = 2
	}
	d := len(q) / g
	chunk := (GGMLKVView(n) + nth - 1) / nth
	var stack [4 * 256]float32
	buf := stack[:]
	if 4*d > len(buf) {
		buf = make([]float32, 4*d)
	}
	q16, acc, fin, row := buf[:d], buf[d:2*d], buf[2*d:3*d], buf[3*d:4*d]
	tab := f16Table()
	ninf := float32(math.Inf(-1))
	for h := 0; h < g; h++ {
		for j, x := range q[h*d : h*d+d] {
			q16[j] = roundF16(x)
		}
		for j := range fin {
			fin[j] = 0
		}
		Mf, Sf := ninf, float32(0)
		for lo := 0; lo < n; lo += chunk {
			hi := min(lo+chunk, n)
			// One chunk of the one-row F16 path: acc holds F16 values.
			for j := range acc {
				acc[j] = 0
			}
			M, S := ninf, float32(0)
			for p := lo; p < hi; p++ {
				ki := k.index(table, p, off)
				for j, b := range k.F16[ki : ki+d] {
					row[j] = tab[b]
				}
				var s float32
				if sp.AVX512 {
					s = dotF16Order512(q16, row) * scale
				} else {
					s = dotF16Order(q16, row) * scale
				}
				ms, vs := float32(1), float32(1)
				if s > M {
					ms = float32(math.Exp(float64(M - s)))
					M = s
					for j := range acc {
						acc[j] = roundF16(acc[j] * ms)
					}
				} else {
					vs = float32(math.Exp(float64(s - M)))
				}
				vi := v.index(table, p, off)
				for j, b := range v.F16[vi : vi+d] {
					acc[j] = roundF16(fmaF32(tab[b], vs, acc[j]))
				}
				S = fmaF32(S, ms, vs)
			}
			if S == 0 {
				continue
			}
			mNew := max(Mf, M)
			so := float32(math.Exp(float64(Mf - mNew)))
			sn := float32(math.Exp(float64(M - mNew)))
			for j := range fin {
				fin[j] = fmaF32(fin[j], so, acc[j]*sn)
			}
			Sf = fmaF32(Sf, so, S*sn)
			Mf = mNew
		}
		o := out[h*d : h*d+d]
		inv := float32(0)
		if Sf != 0 {
			inv = 1 / Sf
		}
		for j := range o {
			o[j] = fin[j] * inv
		}
	}
}

// dotF16Order512 sums a[i]*b[i] (F16 values: exact products) in the order
// of ggml_vec_dot_f16 in an AVX-512 build: four 16-lane accumulators over
// steps of 64 (accumulator j, lane l holds the elements 64t+16j+l), reduced
// as (0+2)+(1+3) and then _mm512_reduce_add_ps (halves 8+8, 4+4, then
// (0+2)+(1+3)); values past the last whole 64-step are added in float64.
func dotF16Order512(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var acc [64]float32
	np := n &^ 63
	for i := 0; i < np; i += 64 {
		x, y := a[i:i+64], b[i:i+64]
		for l := range acc {
			acc[l] += x[l] * y[l]
		}
	}
	var v [16]float32
	for l := range v {
		v[l] = (acc[l] + acc[32+l]) + (acc[16+l] + acc[48+l])
	}
	sum := float64(reduceAdd512(&v))
	for i := np; i < n; i++ {
		sum += float64(a[i] * b[i])
	}
	return float32(sum)
}

// reduceAdd512 is GCC's _mm512_reduce_add_ps: halves 8+8, then 4+4, then
// (0+2)+(1+3).
func reduceAdd512(v *[16]float32) float32 {
	var t3 [8]float32
	for i := range t3 {
		t3[i] = v[8+i] + v[i]
	}
	var t6 [4]float32
	for i := range t6 {
		t6[i] = t3[4+i] + t3[i]
	}
	return (t6[0] + t6[2]) + (t6[1] + t6[3])
}
