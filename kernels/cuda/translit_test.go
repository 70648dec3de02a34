package cuda

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"oengine/internal/refdata"
	"path/filepath"
	"testing"

	"oengine/ggml"
	"oengine/kernels/cpu"
	"oengine/model/gguf"
)

// Go transliterations of the index arithmetic in kernels/*.cu, line for
// line, checked against kernels/cpu. They cannot prove the CUDA compiles to
// the same thing (the GPU parity tests do that), but they check that the
// layouts and the algorithms the kernels encode are right, on any machine.

// sharedTestdata returns ../shared/testdata beside the repository root, or
// skips when it is absent.
func sharedTestdata(t *testing.T) string {
	t.Helper()
	return refdata.Dir(t)
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }

// emulUnit mirrors Q*::unit in quant.cu.
func emulUnit(t ggml.Type, row []byte, u int, o []float32) {
	switch t {
	case ggml.TypeF16:
		for i := 0; i < 8; i++ {
			o[i] = cpu.F16ToF32(le16(row[u*16+2*i:]))
		}
	case ggml.TypeBF16:
		for i := 0; i < 8; i++ {
			o[i] = cpu.BF16ToF32(le16(row[u*16+2*i:]))
		}
	case ggml.TypeQ8_0:
		b := row[u*34:]
		d := cpu.F16ToF32(le16(b))
		for j := 0; j < 32; j++ {
			o[j] = float32(int8(b[2+j])) * d
		}
	case ggml.TypeQ4_0:
		b := row[u*18:]
		d := cpu.F16ToF32(le16(b))
		for j := 0; j < 16; j++ {
			o[j] = float32(int(b[2+j]&15)-8) * d
			o[j+16] = float32(int(b[2+j]>>4)-8) * d
		}
	case ggml.TypeQ4_K:
		b := row[(u>>3)*144:]
		s := u & 7
		d, dmin := cpu.F16ToF32(le16(b)), cpu.F16ToF32(le16(b[2:]))
		sc, m := emulScaleMinK4(s, b[4:])
		dl, ml := d*float32(sc), dmin*float32(m)
		q := b[16+32*(s>>1):]
		shift := (s & 1) * 4
		for l := 0; l < 32; l++ {
			o[l] = dl*float32((q[l]>>shift)&15) - ml
		}
	case ggml.TypeQ6_K:
		b := row[(u>>4)*210:]
		g := u & 15
		n, k, half := g>>3, (g&7)>>1, g&1
		d := cpu.F16ToF32(le16(b[208:]))
		dl := d * float32(int8(b[192+g]))
		ql := b[64*n+32*(k&1)+16*half:]
		qh := b[128+32*n+16*half:]
		lshift, hshift := (k>>1)*4, 2*k
		for i := 0; i < 16; i++ {
			q := int((ql[i]>>lshift)&15) | int((qh[i]>>hshift)&3)<<4
			o[i] = dl * float32(q-32)
		}
	}
}

func emulScaleMinK4(j int, q []byte) (sc, m int) {
	if j < 4 {
		return int(q[j] & 63), int(q[j+4] & 63)
	}
	return int(q[j+4]&0x0f) | int(q[j-4]>>6)<<4, int(q[j+4]>>4) | int(q[j]>>6)<<4
}

func TestUnitDecodersMatchCPU(t *testing.T) {
	td := sharedTestdata(t)
	for _, name := range []string{"f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k"} {
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(filepath.Join(td, "quants", name+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ti, _ := f.Tensor("t")
			cols, rows := int(ti.Dims[0]), int(ti.Dims[1])
			tk := weightKernels[ti.Type]
			rb := cols / ti.Type.BlockElems() * ti.Type.BlockBytes()
			want := make([]float32, cols)
			got := make([]float32, cols)
			for r := 0; r < rows; r++ {
				row := ti.Data[r*rb : (r+1)*rb]
				if err := cpu.Dequantize(ti.Type, row, want); err != nil {
					t.Fatal(err)
				}
				for u := 0; u < cols/tk.unit; u++ {
					emulUnit(ti.Type, row, u, got[u*tk.unit:(u+1)*tk.unit])
				}
				for c := range want {
					if got[c] != want[c] {
						t.Fatalf("row %d col %d: unit decoder %v, cpu %v", r, c, got[c], want[c])
					}
				}
			}
		})
	}
}

// emulAttnDecode mirrors attn_decode_f16 + attn_combine for one token:
// ATT_WARPS "warps" take positions round-robin inside each split, each
// keeps an online softmax per head, the block merges the warps and
// attn_combine merges the splits.
func emulAttnDecode(q []float32, kc, vc []uint16, table []int32, n, Hq, Hk, D, pageSize, splitLen int, scale float32) []float32 {
	G := Hq / Hk
	out := make([]float32, Hq*D)
	nsplit := (n + splitLen - 1) / splitLen
	for kh := 0; kh < Hk; kh++ {
		type part struct {
			m, l float32
			acc  []float32
		}
		parts := make([][]part, G) // [h][split]
		for h := range parts {
			parts[h] = make([]part, nsplit)
		}
		for split := 0; split < nsplit; split++ {
			start, end := split*splitLen, min(n, (split+1)*splitLen)
			const warps = 4
			wm := make([][]float32, warps)
			wl := make([][]float32, warps)
			wacc := make([][][]float32, warps)
			for w := 0; w < warps; w++ {
				wm[w], wl[w], wacc[w] = make([]float32, G), make([]float32, G), make([][]float32, G)
				for h := 0; h < G; h++ {
					wm[w][h] = float32(math.Inf(-1))
					wacc[w][h] = make([]float32, D)
				}
				for p := start + w; p < end; p += warps {
					slot := int(table[p/pageSize])*pageSize + p%pageSize
					kr := kc[slot*Hk*D+kh*D:]
					vr := vc[slot*Hk*D+kh*D:]
					for h := 0; h < G; h++ {
						var s float32
						for d := 0; d < D; d++ {
							s += q[(kh*G+h)*D+d] * cpu.F16ToF32(kr[d])
						}
						s *= scale
						mn := max(wm[w][h], s)
						alpha := float32(math.Exp(float64(wm[w][h] - mn)))
						e := float32(math.Exp(float64(s - mn)))
						wl[w][h] = wl[w][h]*alpha + e
						for d := 0; d < D; d++ {
							wacc[w][h][d] = wacc[w][h][d]*alpha + e*cpu.F16ToF32(vr[d])
						}
						wm[w][h] = mn
					}
				}
			}
			for h := 0; h < G; h++ {
				M := float32(math.Inf(-1))
				for w := 0; w < warps; w++ {
					M = max(M, wm[w][h])
				}
				pt := part{m: M, acc: make([]float32, D)}
				if !math.IsInf(float64(M), -1) {
					for w := 0; w < warps; w++ {
						f := float32(math.Exp(float64(wm[w][h] - M)))
						pt.l += wl[w][h] * f
						for d := 0; d < D; d++ {
							pt.acc[d] += wacc[w][h][d] * f
						}
					}
				}
				parts[h][split] = pt
			}
		}
		for h := 0; h < G; h++ {
			M := float32(math.Inf(-1))
			for _, pt := range parts[h] {
				M = max(M, pt.m)
			}
			var L float32
			for _, pt := range parts[h] {
				L += pt.l * float32(math.Exp(float64(pt.m-M)))
			}
			for d := 0; d < D; d++ {
				var a float32
				for _, pt := range parts[h] {
					a += pt.acc[d] * float32(math.Exp(float64(pt.m-M)))
				}
				out[(kh*G+h)*D+d] = a / L
			}
		}
	}
	return out
}

func TestAttnDecodeAlgorithm(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const Hq, Hk, D, pageSize = 8, 2, 64, 16
	for _, n := range []int{1, 5, 37, 300} {
		pages := (n + pageSize - 1) / pageSize
		table := make([]int32, pages)
		for i := range table {
			table[i] = int32(pages - 1 - i) // scrambled page order
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
		scale := float32(1 / math.Sqrt(D))
		got := emulAttnDecode(q, kc, vc, table, n, Hq, Hk, D, pageSize, 128, scale)
		k := cpu.KVRows{F16: kc, PageSize: pageSize, Stride: Hk * D}
		v := cpu.KVRows{F16: vc, PageSize: pageSize, Stride: Hk * D}
		want := make([]float32, Hq*D)
		G := Hq / Hk
		for kh := 0; kh < Hk; kh++ {
			cpu.AttendRef(want[kh*G*D:(kh+1)*G*D], q[kh*G*D:(kh+1)*G*D], G, k, v, table, n, kh*D, scale)
		}
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-5 {
				t.Fatalf("n=%d: out[%d] = %v, reference %v", n, i, got[i], want[i])
			}
		}
	}
}

// emulFkey mirrors fkey in sample.cu.
func emulFkey(x float32) uint32 {
	if x != x {
		x = float32(math.Inf(-1))
	}
	b := math.Float32bits(x)
	if b&0x80000000 != 0 {
		return ^b
	}
	return b | 0x80000000
}

// emulSampleCut mirrors the bisection of sample_topk_topp and returns the
// cut key.
func emulSampleCut(x []float32, temp float32, k int, p float32) uint32 {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		if v == v {
			mx = max(mx, v)
		}
	}
	invT := 1 / temp
	countGE := func(key uint32) int {
		c := 0
		for _, v := range x {
			if emulFkey(v) >= key {
				c++
			}
		}
		return c
	}
	massGE := func(key uint32) float32 {
		var s float32
		for _, v := range x {
			if emulFkey(v) >= key {
				s += float32(math.Exp(float64((v - mx) * invT)))
			}
		}
		return s
	}
	var tk uint32
	if k > 0 && k < len(x) {
		for bit := 31; bit >= 0; bit-- {
			if c := tk | 1<<bit; countGE(c) >= k {
				tk = c
			}
		}
	}
	cut := tk
	if p < 1 {
		need := p * massGE(tk)
		var tp uint32
		for bit := 31; bit >= 0; bit-- {
			c := tp | 1<<bit
			if massGE(max(c, tk)) >= need {
				tp = c
			}
		}
		cut = max(tp, tk)
	}
	return cut
}

func TestSampleBisectionMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.IntN(300)
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 3)
			if rng.IntN(10) == 0 && i > 0 {
				x[i] = x[rng.IntN(i)] // ties
			}
		}
		k := rng.IntN(n+5) - 2
		p := []float32{1, 0.9, 0.5, 0.05, 1e-6}[rng.IntN(5)]
		temp := []float32{1, 0.7, 2}[rng.IntN(3)]
		got := emulSampleCut(x, temp, k, p)
		want := SampleCut(x, temp, k, p)
		// The kernel keeps x with key >= cut; compare the kept sets.
		for _, v := range x {
			if (emulFkey(v) >= got) != (float64(v) >= want) {
				// Float32 vs float64 mass sums may move a top-p cut by one
				// value only when the boundary mass is within rounding.
				if p < 1 && nearTopPBoundary(x, temp, k, p) {
					break
				}
				t.Fatalf("trial %d (n=%d k=%d p=%g T=%g): value %v kept=%v by kernel, %v by reference (cut %v)", trial, n, k, p, temp, v, emulFkey(v) >= got, float64(v) >= want, want)
			}
		}
	}
}

// nearTopPBoundary reports whether some cumulative top-p mass lies within
// 1e-5 (relative) of p, where float32 and float64 may disagree.
func nearTopPBoundary(x []float32, temp float32, k int, p float32) bool {
	vals := make([]float64, len(x))
	for i, v := range x {
		vals[i] = float64(v)
	}
	cutK := SampleCut(x, temp, k, 1)
	mx := math.Inf(-1)
	for _, v := range vals {
		mx = math.Max(mx, v)
	}
	var z float64
	for _, v := range vals {
		if v >= cutK {
			z += math.Exp((v - mx) / float64(temp))
		}
	}
	for _, c := range vals {
		var m float64
		for _, v := range vals {
			if v >= c && v >= cutK {
				m += math.Exp((v - mx) / float64(temp))
			}
		}
		if math.Abs(m/z-float64(p)) < 1e-5 {
			return true
		}
	}
	return false
}

func TestSampleRef(t *testing.T) {
	x := []float32{1, 3, 2, 3, -1, float32(math.NaN())}
	tests := []struct {
		name string
		k    int
		p    float32
		u    float32
		want int32
	}{
		{"top1 tie keeps both, first", 1, 1, 0.1, 1},
		{"top1 tie keeps both, second", 1, 1, 0.9, 3},
		{"topk 3 low u", 3, 1, 0, 1},
		{"topk 3 high u is the 2", 3, 1, 0.999, 3},
		{"tiny top-p keeps the tied max", 0, 1e-6, 0.7, 3},
		{"all tokens, u=0 gives first", 0, 1, 0, 0},
		{"u near 1 lands on the last kept", 0, 1, 0.99999, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, lo, hi := SampleRef(x, 1, tc.k, tc.p, tc.u)
			if got != tc.want || !(float64(tc.u) >= lo && float64(tc.u) < hi) {
				t.Fatalf("got %d [%g,%g), want %d", got, lo, hi, tc.want)
			}
		})
	}
	if ArgmaxRef(x) != 1 || ArgmaxRef([]float32{float32(math.NaN()), -5}) != 1 {
		t.Fatal("ArgmaxRef")
	}
	// Frequencies over a u grid follow the top-k renormalised softmax.
	y := []float32{0, 1, 2, 3}
	counts := make([]int, 4)
	const N = 10000
	for i := 0; i < N; i++ {
		tok, _, _ := SampleRef(y, 1, 2, 1, (float32(i)+0.5)/N)
		counts[tok]++
	}
	p3 := math.Exp(3) / (math.Exp(2) + math.Exp(3))
	if counts[0]+counts[1] != 0 || math.Abs(float64(counts[3])/N-p3) > 1e-3 {
		t.Fatalf("counts %v, want p(3)=%.4f", counts, p3)
	}
}

func TestPrefillTiles(t *testing.T) {
	a := AttnParams{Heads: 8, KVHeads: 2, HeadDim: 128, PageSize: 16, MaxPages: 4}
	// 4 heads per KV head, 32 rows: tiles of 8 tokens.
	seq := []int32{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 0}
	pos := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 5, 6, 0, 20}
	start, length := PrefillTiles(seq, pos, a)
	wantS := []int32{0, 8, 10, 12, 13}
	wantL := []int32{8, 2, 2, 1, 1}
	if len(start) != len(wantS) {
		t.Fatalf("tiles %v %v", start, length)
	}
	for i := range wantS {
		if start[i] != wantS[i] || length[i] != wantL[i] {
			t.Fatalf("tiles %v %v, want %v %v", start, length, wantS, wantL)
		}
	}
	a.HeadDim = 256
	if _, l := PrefillTiles(seq[:10], pos[:10], a); l[0] != 2 {
		t.Fatalf("head dim 256 tile %v", l)
	}
	// Shared memory stays within 48 KiB for the supported shapes.
	for _, d := range []int{64, 128, 256} {
		a.HeadDim = d
		if sh := PrefillRows(a)*d*4 + 2*32*(d+2)*2; sh > 48<<10 {
			t.Fatalf("head dim %d: %d bytes of shared memory", d, sh)
		}
	}
}

// emulAttnPrefill mirrors attn_prefill_f16 for one tile and KV head: the
// 32-key chunks, the per-row online softmax with masked lanes, and the
// lane-owned output columns. q, out: [T][Hq][D].
func emulAttnPrefill(q, out []float32, kc, vc []uint16, table []int32, npos []int32, t0, nt, kh, Hq, Hk, D, pageSize int, scale float32) {
	G := Hq / Hk
	R := nt * G
	last := int(npos[t0+nt-1])
	m := make([]float32, R)
	l := make([]float32, R)
	acc := make([][]float32, R)
	for r := range m {
		m[r] = float32(math.Inf(-1))
		acc[r] = make([]float32, D)
	}
	ks := make([][]float32, 32)
	vs := make([][]float32, 32)
	for c0 := 0; c0 < last; c0 += 32 {
		for j := 0; j < 32; j++ {
			ks[j], vs[j] = make([]float32, D), make([]float32, D)
			if p := c0 + j; p < last {
				slot := int(table[p/pageSize])*pageSize + p%pageSize
				for d := 0; d < D; d++ {
					ks[j][d] = cpu.F16ToF32(kc[slot*Hk*D+kh*D+d])
					vs[j][d] = cpu.F16ToF32(vc[slot*Hk*D+kh*D+d])
				}
			}
		}
		for r := 0; r < R; r++ {
			tt, h := t0+r/G, kh*G+r%G
			rn := int(npos[t0+r/G])
			var s, e [32]float32
			cm := float32(math.Inf(-1))
			for lane := 0; lane < 32; lane++ {
				s[lane] = float32(math.Inf(-1))
				if key := c0 + lane; key < rn {
					var a float32
					for d := 0; d < D; d++ {
						a += q[(tt*Hq+h)*D+d] * ks[lane][d]
					}
					s[lane] = a * scale
				}
				cm = max(cm, s[lane])
			}
			mn := max(m[r], cm)
			if math.IsInf(float64(mn), -1) {
				continue
			}
			var sum float32
			for lane := 0; lane < 32; lane++ {
				if c0+lane < rn {
					e[lane] = float32(math.Exp(float64(s[lane] - mn)))
				}
				sum += e[lane]
			}
			alpha := float32(math.Exp(float64(m[r] - mn)))
			l[r] = l[r]*alpha + sum
			for d := 0; d < D; d++ {
				acc[r][d] *= alpha
				for j := 0; j < 32; j++ {
					acc[r][d] += e[j] * vs[j][d]
				}
			}
			m[r] = mn
		}
	}
	for r := 0; r < R; r++ {
		tt, h := t0+r/G, kh*G+r%G
		for d := 0; d < D; d++ {
			out[(tt*Hq+h)*D+d] = acc[r][d] / l[r]
		}
	}
}

func TestAttnPrefillAlgorithm(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const Hq, Hk, D, pageSize = 8, 2, 64, 16
	n := 100 // sequence length after this chunk
	pages := (n + pageSize - 1) / pageSize
	table := make([]int32, pages)
	for i := range table {
		table[i] = int32((i * 5) % pages) // scrambled, still a permutation (5 and 7 coprime)
	}
	kc := make([]uint16, pages*pageSize*Hk*D)
	vc := make([]uint16, len(kc))
	for i := range kc {
		kc[i] = cpu.F32ToF16(float32(rng.NormFloat64()))
		vc[i] = cpu.F32ToF16(float32(rng.NormFloat64()))
	}
	// A chunk of 37 tokens at positions 63..99, tiled as the host does.
	const T, first = 37, 63
	seq := make([]int32, T)
	pos := make([]int32, T)
	npos := make([]int32, T)
	for i := range pos {
		pos[i], npos[i] = int32(first+i), int32(first+i+1)
	}
	a := AttnParams{Heads: Hq, KVHeads: Hk, HeadDim: D, PageSize: pageSize, MaxPages: pages, Scale: float32(1 / math.Sqrt(D))}
	starts, lens := PrefillTiles(seq, pos, a)
	q := make([]float32, T*Hq*D)
	for i := range q {
		q[i] = float32(rng.NormFloat64())
	}
	got := make([]float32, len(q))
	for i := range starts {
		for kh := 0; kh < Hk; kh++ {
			emulAttnPrefill(q, got, kc, vc, table, npos, int(starts[i]), int(lens[i]), kh, Hq, Hk, D, pageSize, a.Scale)
		}
	}
	k := cpu.KVRows{F16: kc, PageSize: pageSize, Stride: Hk * D}
	v := cpu.KVRows{F16: vc, PageSize: pageSize, Stride: Hk * D}
	G := Hq / Hk
	want := make([]float32, G*D)
	for tt := 0; tt < T; tt++ {
		for kh := 0; kh < Hk; kh++ {
			cpu.AttendRef(want, q[(tt*Hq+kh*G)*D:(tt*Hq+(kh+1)*G)*D], G, k, v, table, int(npos[tt]), kh*D, a.Scale)
			for i, w := range want {
				if g := got[(tt*Hq+kh*G)*D+i]; math.Abs(float64(g-w)) > 1e-5 {
					t.Fatalf("token %d kv head %d: out[%d] = %v, reference %v", tt, kh, i, g, w)
				}
			}
		}
	}
}
