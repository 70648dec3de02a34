package cpu

import "math"

// Plain Go twins of the attention helpers (attn_amd64.s); attn_test.go
// compares the two.

// attnCvtGo widens F16 values to float32.
func attnCvtGo(dst []float32, src []uint16) {
	tab := f16Table()
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = tab[h]
	}
}

// attnAxpyGo adds w[h]*v to row h of out ([g][len(v)]).
func attnAxpyGo(out, v, w []float32, g int) {
	d := len(v)
	for h := 0; h < g; h++ {
		axpy(out[h*d:h*d+d], v, w[h])
	}
}

// attnAxpyBlockGo is nb attnAxpyGo calls: position p of vb (rows of d
// values vs apart) with weights w[p*g : p*g+g].
func attnAxpyBlockGo(out, vb, w []float32, nb, g, d, vs int) {
	for p := 0; p < nb; p++ {
		attnAxpyGo(out, vb[p*vs:p*vs+d], w[p*g:(p+1)*g], g)
	}
}

// attnScaleMaxGo multiplies the scores ([n][g]) by scale in place and sets
// m[h] to the maximum of head h's scaled scores (-Inf when n is 0).
func attnScaleMaxGo(scores []float32, g int, scale float32, m []float32) {
	for h := 0; h < g; h++ {
		mh := float32(math.Inf(-1))
		for i := h; i < len(scores); i += g {
			s := scores[i] * scale
			scores[i] = s
			mh = max(mh, s)
		}
		m[h] = mh
	}
}

// attnScoresGo sets out[p*g+h] = q[h]·k_p for the nb positions of kb
// (rows of d values ks apart), q [g][d]: one FMA chain over the head dimension in order (s
// = fma(q[h][j], k_p[j], s) from s = 0). It is the plain twin of
// attnScoresAVX2 (attn_scores_amd64.s), which computes the same chain
// per lane with the heads in the lanes.
func attnScoresGo(out, q, kb []float32, nb, g, d, ks int) {
	for p := 0; p < nb; p++ {
		k := kb[p*ks : p*ks+d]
		for h := 0; h < g; h++ {
			qh := q[h*d : (h+1)*d]
			var s float32
			for j, kj := range k {
				s = fmaF32(qh[j], kj, s)
			}
			out[p*g+h] = s
		}
	}
}

// attnTransposeQ writes q ([g][d]) into qt ([d][gp], gp = g rounded up to
// a multiple of 8) with zeros in the padding lanes: the query layout of
// attnScoresAVX2.
func attnTransposeQ(qt, q []float32, g, d int) {
	gp := (g + 7) &^ 7
	qt = qt[:d*gp]
	for h := 0; h < g; h++ {
		for j, x := range q[h*d : (h+1)*d] {
			qt[j*gp+h] = x
		}
	}
	if gp > g {
		for j := 0; j < d; j++ {
			clear(qt[j*gp+g : (j+1)*gp])
		}
	}
}
