package llama

import (
	"oengine/kernels/cpu"
)

// The mixture-of-experts feed-forward (Config.Experts: qwen3moe, Mixtral), as
// llama.cpp's build_moe_ffn computes it with softmax gating and
// renormalized weights: per token, probabilities p = softmax(router·xb);
// the ExpertsUsed most probable experts, in order of probability, are its
// slots k; each slot's expert computes down(silu(gate·xb) * up·xb); the
// output is Σ_k w_k·out_k in slot order with w_k = p_k / Σ p (the sum
// clamped to at least 2^-14).
//
// gpt-oss's mixture (Config.TopKSoftmax, ExpertBias, SwiGLUOAI) adds the
// router's bias to its logits, takes the ExpertsUsed largest logits and
// weighs them by their softmax (routeTopK), adds each expert projection's
// bias and uses the clamped SwiGLU (cpu.SwiGLUOAI). nomic-bert-moe's
// (Config.ExpertGELU, MoEKeepProbs) runs down(GELU(up·x)), no gate, and
// weighs the slots by their probabilities without renormalizing them.
//
// Each expert runs once per call on the tokens that chose it, gathered
// into rows (a token's row gives the same bits in any batch: the matrix
// products are batch-invariant), and the weighted sum runs per token in
// slot order, so a token's result does not depend on the batch either.

// moeFFN replaces f.xb ([T][Dim], the normed input) by the mixture's
// output for layer w.
func (m *Model) moeFFN(w *layer) {
	c, f := &m.cfg, &m.fw
	T, D, E, K, F := f.t, c.Dim, c.Experts, c.ExpertsUsed, c.ExpertFFN
	xb := f.xb[:T*D]
	logits := f.moeLogits[:T*E]
	m.matMul(logits, w.router, xb, T)
	sel, wts := f.moeSel[:T*K], f.moeW[:T*K]
	for i := 0; i < T; i++ {
		li := logits[i*E : (i+1)*E]
		if w.routerB != nil {
			cpu.Add(li, li, w.routerB)
		}
		if c.TopKSoftmax {
			routeTopK(li, sel[i*K:(i+1)*K], wts[i*K:(i+1)*K])
		} else {
			route(li, sel[i*K:(i+1)*K], wts[i*K:(i+1)*K], !c.MoEKeepProbs)
		}
	}
	outs := f.moeOut[:T*K*D] // [T][K][Dim]: each slot's expert output
	for e := 0; e < E; e++ {
		n := 0 // rows of this expert: slots in token order
		for s, x := range sel {
			if int(x) == e {
				f.moeRows[n] = int32(s)
				copy(f.moeX[n*D:(n+1)*D], xb[s/K*D:(s/K+1)*D])
				n++
			}
		}
		if n == 0 {
			continue
		}
		g, u := f.moeG[:n*F], f.moeU[:n*F]
		if c.ExpertGELU { // no gate: g = GELU(x·upᵀ)
			m.matMul(g, w.upExps[e], f.moeX[:n*D], n)
			for r := 0; r < n; r++ {
				cpu.GELU(g[r*F:(r+1)*F], g[r*F:(r+1)*F])
			}
		} else {
			f.gu[0], f.gu[1] = cpu.MatOp{Dst: g, W: w.gateExps[e]}, cpu.MatOp{Dst: u, W: w.upExps[e]}
			m.matMuls(f.gu[:], f.moeX[:n*D], n)
			for r := 0; r < n; r++ {
				gr, ur := g[r*F:(r+1)*F], u[r*F:(r+1)*F]
				if w.gateExpsB != nil {
					cpu.Add(gr, gr, w.gateExpsB[e*F:(e+1)*F])
					cpu.Add(ur, ur, w.upExpsB[e*F:(e+1)*F])
				}
				if c.SwiGLUOAI {
					cpu.SwiGLUOAI(gr, gr, ur, swigluOAIAlpha, swigluOAILimit)
				} else {
					cpu.SwiGLU(gr, gr, ur)
				}
			}
		}
		d := f.moeD[:n*D]
		m.matMul(d, w.downExps[e], g, n)
		if w.downExpsB != nil {
			for r := 0; r < n; r++ {
				cpu.Add(d[r*D:(r+1)*D], d[r*D:(r+1)*D], w.downExpsB[e*D:(e+1)*D])
			}
		}
		for r, s := range f.moeRows[:n] {
			copy(outs[int(s)*D:(int(s)+1)*D], d[r*D:(r+1)*D])
		}
	}
	for i := 0; i < T; i++ {
		dst := xb[i*D : (i+1)*D]
		for k := 0; k < K; k++ {
			wk, o := wts[i*K+k], outs[(i*K+k)*D:(i*K+k+1)*D]
			if k == 0 {
				for j, v := range o {
					dst[j] = v * wk
				}
				continue
			}
			for j, v := range o {
				dst[j] += v * wk
			}
		}
	}
}

// route writes a token's slots: the len(sel) most probable experts of
// softmax(logits) in order of probability (the lower index first among
// equal ones) and their probabilities, renormalized to sum 1 when renorm.
// logits is replaced by the probabilities.
func route(logits []float32, sel []int32, wts []float32, renorm bool) {
	cpu.Softmax(logits)
	for k := range sel {
		best := -1
		for e, p := range logits {
			if best >= 0 && p <= logits[best] || taken(sel[:k], e) {
				continue
			}
			best = e
		}
		sel[k], wts[k] = int32(best), logits[best]
	}
	if !renorm { // nomic-bert-moe: the probabilities as they are
		return
	}
	var sum float32
	for _, p := range wts {
		sum += p
	}
	sum = max(sum, 6.103515625e-5) // llama.cpp's clamp: F16's smallest normal
	for k := range wts {
		wts[k] /= sum
	}
}

// gpt-oss's activation constants (llama.cpp's, from the model's code).
const swigluOAIAlpha, swigluOAILimit = 1.702, 7

// routeTopK writes a token's slots under top-k softmax gating: the
// len(sel) largest logits in order (the lower index first among equal
// ones) and the softmax over those alone. logits is left as it was.
func routeTopK(logits []float32, sel []int32, wts []float32) {
	for k := range sel {
		best := -1
		for e, l := range logits {
			if best >= 0 && l <= logits[best] || taken(sel[:k], e) {
				continue
			}
			best = e
		}
		sel[k], wts[k] = int32(best), logits[best]
	}
	cpu.Softmax(wts)
}

func taken(sel []int32, e int) bool {
	for _, s := range sel {
		if int(s) == e {
			return true
		}
	}
	return false
}
