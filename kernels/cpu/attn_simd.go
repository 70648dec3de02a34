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

// attnDotsGo sets out[h] = q[h]·k for h < g (q is [g][len(k)]).
func attnDotsGo(out, q, k []float32, g int) {
	d := len(k)
	for h := 0; h < g; h++ {
		out[h] = dotF32(q[h*d:h*d+d], k)
	}
}

// attnAxpyGo adds w[h]*v to row h of out ([g][len(v)]).
func attnAxpyGo(out, v, w []float32, g int) {
	d := len(v)
	for h := 0; h < g; h++ {
		axpy(out[h*d:h*d+d], v, w[h])
	}
}

// attnAxpyBlockGo is nb attnAxpyGo calls: position p of vb ([nb][d]) with
// weights w[p*g : p*g+g].
func attnAxpyBlockGo(out, vb, w []float32, nb, g, d int) {
	for p := 0; p < nb; p++ {
		attnAxpyGo(out, vb[p*d:(p+1)*d], w[p*g:(p+1)*g], g)
	}
}

// attnDotsBlockGo is nb attnDotsGo calls: position p of kb ([nb][d])
// into out[p*g : p*g+g].
func attnDotsBlockGo(out, q, kb []float32, nb, g, d int) {
	for p := 0; p < nb; p++ {
		attnDotsGo(out[p*g:(p+1)*g], q, kb[p*d:(p+1)*d], g)
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
