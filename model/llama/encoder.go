package llama

import (
	"fmt"
	"math"

	"oengine/kernels/cpu"
	"oengine/model/gguf"
)

// The encoders (Config.Encoder): BERT's block and its kin's, nomic-bert's,
// nomic-bert-moe's (its experts through moe.go) and jina-bert-v2's (ALiBi:
// cpu.AttendFullALiBi) (encoderLayer), ModernBERT's (modernLayer,
// Config.PreNorm) and EmbeddingGemma's (gemmaEncoderLayer). A
// sequence's tokens attend to all of its positions, later ones included,
// so Forward takes each sequence whole, positions 0 to n-1, and computes
// hidden states only. Their K and V go through the pages like a
// decoder's, so the engine's page budget bounds them, but a page holds one
// layer's (kvLayers): layer l+1 writes over layer l's once every token of
// the batch has attended to them. Attention reads them in tiles of tokens
// over the whole sequence (cpu.AttendFull, the prefill tiles without the
// causal mask), or, in ModernBERT's and EmbeddingGemma's local layers,
// token by token over their symmetric windows.

// readEncoder checks what an encoder's metadata may say: a causal one is
// not an encoder this package runs.
func (c *Config) readEncoder(f *gguf.File) error {
	if v, ok := f.Value(c.Arch + ".attention.causal"); ok {
		if causal, ok := v.AsBool(); !ok || causal {
			return fmt.Errorf("%w: %s.attention.causal = %v (a causal %s)", ErrUnsupported, c.Arch, v, c.Arch)
		}
	}
	if c.SWA > 0 && !c.Gemma {
		return fmt.Errorf("%w: %s with a sliding window", ErrUnsupported, c.Arch)
	}
	if c.Gemma {
		// EmbeddingGemma: Gemma 3's five local layers of six see half the
		// window either side (llama.cpp's symmetric window).
		if c.SWA == 0 {
			return fmt.Errorf("llama: missing metadata %s.attention.sliding_window", c.Arch)
		}
		return nil
	}
	if t, ok := f.Tensor("token_types.weight"); ok && len(t.Dims) == 2 && t.Dims[1] <= maxDim {
		c.TokenTypes = int(t.Dims[1])
	}
	if c.PreNorm {
		return c.readModernBERT(f)
	}
	return nil
}

// readModernBERT reads ModernBERT's window (optional: without one every
// layer is global), its pattern (default 3, dense first) and the local
// layers' rope base (default 10000, as llama.cpp), and its activation.
func (c *Config) readModernBERT(f *gguf.File) error {
	key := func(k string) string { return c.Arch + "." + k }
	if act, ok := f.String(key("hidden_activation")); ok {
		switch act {
		case "gelu", "gelu_pytorch_tanh", "geglu":
		case "silu", "swiglu":
			c.EncoderSiLU = true
		default:
			return fmt.Errorf("%w: %s %q", ErrUnsupported, key("hidden_activation"), act)
		}
	}
	w, ok := f.Uint(key("attention.sliding_window"))
	if !ok || w == 0 {
		return nil
	}
	if w > maxDim {
		return fmt.Errorf("llama: %s = %d out of range", key("attention.sliding_window"), w)
	}
	c.SWA, c.SWAPattern, c.SWADenseFirst = int(w), 3, true
	c.RopeBaseSWA, c.RopeScaleSWA = 10000, 1
	return c.readWindowKeys(f)
}

// loadEncoder reads an encoder's embedding tensors and its layers (Load
// has read the token embedding).
func (m *Model) loadEncoder(ld *loader) {
	c := &m.cfg
	f := ld.f
	m.out = m.tokEmb // no output projection; linearMatrices lists it once
	optional := func(name string, n int) []float32 {
		if _, ok := f.Tensor(name); !ok {
			return nil
		}
		return ld.vector(name, n)
	}
	if c.PreNorm {
		m.loadModernBERT(ld)
		return
	}
	m.embNormW = ld.vector("token_embd_norm.weight", c.Dim)
	m.embNormB = ld.vector("token_embd_norm.bias", c.Dim)
	if c.TokenTypes > 0 {
		m.typeEmb = ld.table("token_types.weight", c.TokenTypes, c.Dim)
	}
	if c.AbsPos {
		m.posEmb = ld.table("position_embd.weight", c.CtxLen, c.Dim)
	}
	for i := range m.layers {
		l := &m.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		if _, fused := f.Tensor(p + "attn_qkv.weight"); fused {
			qkv := ld.rows(p+"attn_qkv.weight", c.QDim()+2*c.KVDim(), c.Dim, []int{c.QDim(), c.KVDim(), c.KVDim()})
			if qkv != nil {
				l.wq, l.wk, l.wv = qkv[0], qkv[1], qkv[2]
			}
			if b := optional(p+"attn_qkv.bias", c.QDim()+2*c.KVDim()); b != nil {
				l.bq, l.bk, l.bv = b[:c.QDim()], b[c.QDim():c.QDim()+c.KVDim()], b[c.QDim()+c.KVDim():]
			}
		} else {
			l.wq = ld.matrix(p+"attn_q.weight", c.QDim(), c.Dim)
			l.wk = ld.matrix(p+"attn_k.weight", c.KVDim(), c.Dim)
			l.wv = ld.matrix(p+"attn_v.weight", c.KVDim(), c.Dim)
			l.bq = optional(p+"attn_q.bias", c.QDim())
			l.bk = optional(p+"attn_k.bias", c.KVDim())
			l.bv = optional(p+"attn_v.bias", c.KVDim())
			if (l.bq == nil) != (l.bk == nil) || (l.bq == nil) != (l.bv == nil) {
				ld.err = fmt.Errorf("llama: %s: attn_q, attn_k and attn_v have biases only in part", p)
			}
		}
		l.wo = ld.matrix(p+"attn_output.weight", c.Dim, c.QDim())
		l.bo = optional(p+"attn_output.bias", c.Dim)
		l.attnOutNormW = ld.vector(p+"attn_output_norm.weight", c.Dim)
		l.attnOutNormB = ld.vector(p+"attn_output_norm.bias", c.Dim)
		switch {
		case c.MoELayer(i): // nomic-bert-moe: GELU experts without a gate
			l.router = ld.matrix(p+"ffn_gate_inp.weight", c.Experts, c.Dim)
			l.upExps = ld.experts(p+"ffn_up_exps.weight", c.Experts, c.ExpertFFN, c.Dim)
			l.downExps = ld.experts(p+"ffn_down_exps.weight", c.Experts, c.Dim, c.ExpertFFN)
		case c.ALiBi: // jina-bert-v2: GeGLU, the gate's rows first in ffn_up
			for _, name := range []string{"attn_q_norm.weight", "attn_k_norm.weight", "attn_norm_2.weight", "ffn_gate.weight", "ffn_up.bias"} {
				if _, ok := f.Tensor(p + name); ok && ld.err == nil {
					ld.err = fmt.Errorf("%w: %s's %s%s (the jina-bert-v2 variants with it are not supported)", ErrUnsupported, c.Arch, p, name)
				}
			}
			if gu := ld.rows(p+"ffn_up.weight", 2*c.FFN, c.Dim, []int{c.FFN, c.FFN}); gu != nil {
				l.wGate, l.wUp = gu[0], gu[1]
			}
			l.wDown = ld.matrix(p+"ffn_down.weight", c.Dim, c.FFN)
			l.bDown = optional(p+"ffn_down.bias", c.Dim)
		default:
			if c.Arch == "nomic-bert" { // SwiGLU
				l.wGate = ld.matrix(p+"ffn_gate.weight", c.FFN, c.Dim)
			}
			l.wUp = ld.matrix(p+"ffn_up.weight", c.FFN, c.Dim)
			l.bUp = optional(p+"ffn_up.bias", c.FFN)
			l.wDown = ld.matrix(p+"ffn_down.weight", c.Dim, c.FFN)
			l.bDown = optional(p+"ffn_down.bias", c.Dim)
		}
		l.outNormW = ld.vector(p+"layer_output_norm.weight", c.Dim)
		l.outNormB = ld.vector(p+"layer_output_norm.bias", c.Dim)
		if ld.err != nil {
			return
		}
	}
}

// loadModernBERT reads ModernBERT's tensors (Config.PreNorm): the
// embedding norm, the final norm (outNorm) and per layer the attention
// norm (none for layer 0), the fused QKV, the output projection, the
// feed-forward norm (ffnNorm), the fused gate and up, and down. Its norms
// have no biases.
func (m *Model) loadModernBERT(ld *loader) {
	c, f := &m.cfg, ld.f
	m.embNormW = ld.vector("token_embd_norm.weight", c.Dim)
	m.outNorm = ld.vector("output_norm.weight", c.Dim)
	for i := range m.layers {
		l := &m.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		if _, ok := f.Tensor(p + "attn_norm.weight"); ok || i > 0 {
			l.attnNorm = ld.vector(p+"attn_norm.weight", c.Dim)
		}
		if qkv := ld.rows(p+"attn_qkv.weight", c.QDim()+2*c.KVDim(), c.Dim, []int{c.QDim(), c.KVDim(), c.KVDim()}); qkv != nil {
			l.wq, l.wk, l.wv = qkv[0], qkv[1], qkv[2]
		}
		l.wo = ld.matrix(p+"attn_output.weight", c.Dim, c.QDim())
		l.ffnNorm = ld.vector(p+"ffn_norm.weight", c.Dim)
		if gu := ld.rows(p+"ffn_up.weight", 2*c.FFN, c.Dim, []int{c.FFN, c.FFN}); gu != nil {
			l.wGate, l.wUp = gu[0], gu[1]
		}
		l.wDown = ld.matrix(p+"ffn_down.weight", c.Dim, c.FFN)
		if ld.err != nil {
			return
		}
	}
}

// checkWhole returns each sequence's length in b, an encoder's batch: a
// sequence's tokens must come together, at positions 0, 1, ..., n-1.
func checkWhole(b *Batch, lens []int32) ([]int32, error) {
	lens = growI32(lens, len(b.Seqs))
	clear(lens)
	for i := range b.Tokens {
		s, pos := b.Seq[i], b.Pos[i]
		if pos != lens[s] || pos > 0 && (i == 0 || b.Seq[i-1] != s) {
			return nil, fmt.Errorf("%w: an encoder computes whole sequences (positions 0 to n-1 together): sequence %d has position %d at token %d", ErrBadBatch, s, pos, i)
		}
		lens[s]++
	}
	return lens, nil
}

// encode is ForwardHidden for an encoder: the final hidden states of b's
// tokens (checkBatch has validated b; its sequences are whole, and it
// wants no logits).
func (m *Model) encode(kv *KV, b *Batch, hidden []float32, maxN int) error {
	c, f := &m.cfg, &m.fw
	if len(b.Logits) > 0 {
		return fmt.Errorf("%w: %s is an encoder: it computes embeddings, not logits", ErrBadBatch, c.Arch)
	}
	lens, err := checkWhole(b, f.seqLens)
	if err != nil {
		return err
	}
	f.seqLens = lens
	if b.Types != nil {
		if len(b.Types) != len(b.Tokens) {
			return fmt.Errorf("%w: %d token types for %d tokens", ErrBadBatch, len(b.Types), len(b.Tokens))
		}
		for i, ty := range b.Types {
			if ty != 0 && int(ty) >= c.TokenTypes {
				return fmt.Errorf("%w: token %d has type %d, the model has %d", ErrBadBatch, i, ty, c.TokenTypes)
			}
		}
	}
	T, D, R := len(b.Tokens), c.Dim, c.RopeDims
	f.ensure(m, T, 0, maxN)
	f.kv, f.b, f.t = kv, b, T
	m.planEncoderAttn(maxN)
	for i, tok := range b.Tokens { // serial: f.row is one scratch row
		m.tokEmb.RowF32(int(tok), f.x[i*D:(i+1)*D], f.row)
	}
	m.forTokens(func(i int) {
		x := f.x[i*D : (i+1)*D]
		if m.typeEmb != nil {
			ty := 0
			if b.Types != nil {
				ty = int(b.Types[i])
			}
			cpu.Add(x, x, m.typeEmb[ty*D:(ty+1)*D])
		}
		if m.posEmb != nil {
			pos := int(b.Pos[i])
			cpu.Add(x, x, m.posEmb[pos*D:(pos+1)*D])
		}
		if c.Gemma {
			cpu.Scale(x, x, float32(math.Sqrt(float64(D))))
		} else {
			cpu.LayerNorm(x, x, m.embNormW, m.embNormB, c.NormEps)
		}
		if !c.AbsPos && !c.ALiBi {
			m.ropeCache(f.cs[i*R:(i+1)*R], b.Pos[i])
		}
		if c.SWA > 0 {
			m.ropeCacheLocal(f.csLocal[i*R:(i+1)*R], b.Pos[i])
		}
	})
	for l := range m.layers {
		switch {
		case c.Gemma:
			m.gemmaEncoderLayer(l)
		case c.PreNorm:
			m.modernLayer(l)
		default:
			m.encoderLayer(l)
		}
	}
	for j, idx := range b.Hidden {
		h, x := hidden[j*D:(j+1)*D], f.x[int(idx)*D:(int(idx)+1)*D]
		switch {
		case c.Gemma:
			cpu.RMSNorm(h, x, m.outNorm, c.NormEps)
		case m.outNorm != nil: // ModernBERT's final norm
			cpu.LayerNorm(h, x, m.outNorm, nil, c.NormEps)
		default:
			copy(h, x)
		}
	}
	f.kv, f.b = nil, nil
	return nil
}

// encoderLayer runs encoder block l on the T token states in f.x.
func (m *Model) encoderLayer(l int) {
	c, f, w := &m.cfg, &m.fw, &m.layers[l]
	T, D, QD, F := f.t, c.Dim, c.QDim(), c.FFN
	f.layer = l

	// Attention: q, k, v = x·Wᵀ + b; RoPE (nomic-bert); every token
	// attends to its whole sequence; xb = att·Woᵀ + b; x = LN(x + xb).
	m.encoderAttention(w, f.x[:T*D])
	m.matMul(f.xb[:T*D], w.wo, f.att[:T*QD], T)
	m.addNorm(w.bo, w.attnOutNormW, w.attnOutNormB)

	// Feed-forward: xb = GELU(x·Wupᵀ + b)·Wdownᵀ + b (bert) or
	// (silu(x·Wgᵀ) * x·Wuᵀ)·Wdᵀ (nomic-bert), or the mixture of GELU
	// experts (nomic-bert-moe's odd layers, moe.go); x = LN(x + xb).
	if c.MoELayer(l) {
		copy(f.xb[:T*D], f.x[:T*D])
		m.moeFFN(w)
		m.addNorm(nil, w.outNormW, w.outNormB)
		return
	}
	hb, hb2 := f.hb[:T*F], f.hb2[:T*F]
	if w.wGate.Rows > 0 {
		f.gu[0], f.gu[1] = cpu.MatOp{Dst: hb, W: w.wGate}, cpu.MatOp{Dst: hb2, W: w.wUp}
		m.matMuls(f.gu[:], f.x[:T*D], T)
	} else {
		m.matMul(hb, w.wUp, f.x[:T*D], T)
	}
	m.forTokens(func(i int) {
		h := hb[i*F : (i+1)*F]
		if w.wGate.Rows > 0 && c.ALiBi {
			cpu.GeGLU(h, h, hb2[i*F:(i+1)*F])
			return
		}
		if w.wGate.Rows > 0 {
			cpu.SwiGLU(h, h, hb2[i*F:(i+1)*F])
			return
		}
		if w.bUp != nil {
			cpu.Add(h, h, w.bUp)
		}
		cpu.GELU(h, h)
	})
	m.matMul(f.xb[:T*D], w.wDown, hb, T)
	m.addNorm(w.bDown, w.outNormW, w.outNormB)
}

// encoderAttention computes the attention of encoder layer f.layer into
// f.att from its input in ([T][Dim]): q, k, v = in·Wᵀ (+ biases), RoPE
// where the model has no learned positions (the local layers' rotation in
// a windowed layer), K/V into the pages (one layer's, kvLayers), then
// every token's attention over its sequence (encAttnSlots).
func (m *Model) encoderAttention(w *layer, in []float32) {
	c, f := &m.cfg, &m.fw
	T, QD, KD, HD, R := f.t, c.QDim(), c.KVDim(), c.HeadDim, c.RopeDims
	b, kv := f.b, f.kv
	q, k, v := f.q[:T*QD], f.k[:T*KD], f.v[:T*KD]
	f.qkv[0], f.qkv[1], f.qkv[2] = cpu.MatOp{Dst: q, W: w.wq}, cpu.MatOp{Dst: k, W: w.wk}, cpu.MatOp{Dst: v, W: w.wv}
	m.matMuls(f.qkv[:], in, T)
	local := c.Local(f.layer)
	m.forTokens(func(i int) {
		qi, ki, vi := q[i*QD:(i+1)*QD], k[i*KD:(i+1)*KD], v[i*KD:(i+1)*KD]
		if w.bq != nil {
			cpu.AddBias(qi, w.bq)
			cpu.AddBias(ki, w.bk)
			cpu.AddBias(vi, w.bv)
		}
		if w.qNorm != nil { // EmbeddingGemma's per-head norms
			for h := 0; h < c.Heads; h++ {
				cpu.RMSNorm(qi[h*HD:(h+1)*HD], qi[h*HD:(h+1)*HD], w.qNorm, c.NormEps)
			}
			for h := 0; h < c.KVHeads; h++ {
				cpu.RMSNorm(ki[h*HD:(h+1)*HD], ki[h*HD:(h+1)*HD], w.kNorm, c.NormEps)
			}
		}
		if !c.AbsPos && !c.ALiBi {
			cs := f.cs[i*R : (i+1)*R]
			if local {
				cs = f.csLocal[i*R : (i+1)*R]
			}
			cpu.Rope(qi, c.Heads, HD, R, cs, c.RopeNeoX)
			cpu.Rope(ki, c.KVHeads, HD, R, cs, c.RopeNeoX)
		}
		pos := int(b.Pos[i])
		kv.store(0, b.Seqs[b.Seq[i]][pos/kv.pageSize], pos%kv.pageSize, ki, vi)
	})
	m.pool.For(f.slots, f.encAttnFn)
}

// modernLayer runs ModernBERT block l (Config.PreNorm) on the T token
// states in f.x: x += attn(LN(x)) (layer 0: attn(x)), x += ffn(LN(x)).
func (m *Model) modernLayer(l int) {
	c, f, w := &m.cfg, &m.fw, &m.layers[l]
	T, D, QD, F := f.t, c.Dim, c.QDim(), c.FFN
	f.layer = l
	in := f.x[:T*D]
	if w.attnNorm != nil {
		m.forTokens(func(i int) { cpu.LayerNorm(f.xb[i*D:(i+1)*D], f.x[i*D:(i+1)*D], w.attnNorm, nil, c.NormEps) })
		in = f.xb[:T*D]
	}
	m.encoderAttention(w, in)
	m.matMul(f.xb[:T*D], w.wo, f.att[:T*QD], T)
	m.forTokens(func(i int) {
		x, xb := f.x[i*D:(i+1)*D], f.xb[i*D:(i+1)*D]
		cpu.Add(x, xb, x)
		cpu.LayerNorm(xb, x, w.ffnNorm, nil, c.NormEps)
	})
	hb, hb2 := f.hb[:T*F], f.hb2[:T*F]
	f.gu[0], f.gu[1] = cpu.MatOp{Dst: hb, W: w.wGate}, cpu.MatOp{Dst: hb2, W: w.wUp}
	m.matMuls(f.gu[:], f.xb[:T*D], T)
	m.forTokens(func(i int) {
		h := hb[i*F : (i+1)*F]
		if c.EncoderSiLU {
			cpu.SwiGLU(h, h, hb2[i*F:(i+1)*F])
		} else {
			cpu.GeGLU(h, h, hb2[i*F:(i+1)*F])
		}
	})
	m.matMul(f.xb[:T*D], w.wDown, hb, T)
	m.forTokens(func(i int) { cpu.Add(f.x[i*D:(i+1)*D], f.xb[i*D:(i+1)*D], f.x[i*D:(i+1)*D]) })
}

// gemmaEncoderLayer runs EmbeddingGemma's block l (Gemma 3's, every token
// attending both ways) on the T token states in f.x: x += norm(attn(
// norm(x))), x += norm(ffn(norm(x))) with RMSNorms, per-head q/k norms and
// a GeGLU feed-forward; the local layers see half the window either side.
func (m *Model) gemmaEncoderLayer(l int) {
	c, f, w := &m.cfg, &m.fw, &m.layers[l]
	T, D, QD, F := f.t, c.Dim, c.QDim(), c.FFN
	f.layer = l
	m.forRows(rowNorm, w.attnNorm, nil) // xb = norm(x)
	m.encoderAttention(w, f.xb[:T*D])
	m.matMul(f.xb[:T*D], w.wo, f.att[:T*QD], T)
	m.forRows(rowNorm1, w.postAttnNorm, nil)
	m.forRows(rowAddNorm, w.ffnNorm, nil) // x += xb; xb = norm(x)
	f.gu[0], f.gu[1] = cpu.MatOp{Dst: f.hb[:T*F], W: w.wGate}, cpu.MatOp{Dst: f.hb2[:T*F], W: w.wUp}
	m.matMuls(f.gu[:], f.xb[:T*D], T)
	m.forRows(rowGLU, nil, nil)
	m.matMul(f.xb[:T*D], w.wDown, f.hb[:T*F], T)
	m.forRows(rowNorm1, w.postFFNNorm, nil)
	m.forRows(rowAdd, nil, nil)
}

// addNorm ends an encoder sub-block: x = LN(x + xb + bias) per token
// (bias nil: none), with the norm's weight and bias.
func (m *Model) addNorm(bias, normW, normB []float32) {
	f, c := &m.fw, &m.cfg
	D := c.Dim
	m.forTokens(func(i int) {
		x, xb := f.x[i*D:(i+1)*D], f.xb[i*D:(i+1)*D]
		if bias != nil {
			cpu.Add(xb, xb, bias)
		}
		cpu.Add(x, xb, x)
		cpu.LayerNorm(x, x, normW, normB, c.NormEps)
	})
}

// planEncoderAttn cuts each sequence of the batch in progress into tiles
// of cpu.AttnChunkTokens tokens (f.attnItems), the work items of
// encAttnSlots, and grows the slots' scratch for tiles over maxN
// positions.
func (m *Model) planEncoderAttn(maxN int) {
	f, c := &m.fw, &m.cfg
	g := c.Heads / c.KVHeads
	tile := cpu.AttnChunkTokens(g)
	f.attnItems = f.attnItems[:0]
	for i := 0; i < f.t; {
		n := int(f.seqLens[f.b.Seq[i]]) // the sequence's tokens start at i
		for k := i; k < i+n; k += tile {
			f.attnItems = append(f.attnItems, attnItem{int32(k), int32(min(tile, i+n-k))})
		}
		i += n
	}
	need := cpu.AttnChunkScratch(g, maxN, c.HeadDim)
	for s, sc := range f.attnScratch {
		if len(sc) < need {
			f.attnScratch[s] = grow(sc, need)
		}
	}
}

// encAttnSlots is attnSlots for an encoder: slot s takes the tiles s,
// s+slots, ... of f.attnItems, each token attending to every position of
// its sequence (cpu.AttendFull: the K/V rows are read once per tile).
func (f *forward) encAttnSlots(lo, hi int) {
	c, b, kv := &f.m.cfg, f.b, f.kv
	QD, g := c.QDim(), c.Heads/c.KVHeads
	local, half, ps := c.Local(f.layer), c.SWA/2, kv.pageSize
	for s := lo; s < hi; s++ {
		for it := s; it < len(f.attnItems); it += f.slots {
			a := f.attnItems[it]
			i, n, seq := int(a.i), int(a.n), b.Seq[a.i]
			table, seqLen := b.Seqs[seq], int(f.seqLens[seq])
			switch {
			case c.ALiBi:
				cpu.AttendFullALiBi(f.att[i*QD:(i+n)*QD], f.q[i*QD:(i+n)*QD], n, c.KVHeads, g,
					kv.k[0], kv.v[0], table, seqLen, int(b.Pos[i]), f.scale, f.m.alibi, f.attnScratch[s])
				continue
			case !local:
				cpu.AttendFull(f.att[i*QD:(i+n)*QD], f.q[i*QD:(i+n)*QD], n, c.KVHeads, g,
					kv.k[0], kv.v[0], table, seqLen, f.scale, f.attnScratch[s])
				continue
			}
			// ModernBERT's local layers: positions within half the window
			// either side, token by token.
			for t := i; t < i+n; t++ {
				pos := int(b.Pos[t])
				lo, hi := max(0, pos-half), min(seqLen, pos+half+1)
				first := lo / ps
				cpu.AttendHeadsWindow(f.att[t*QD:(t+1)*QD], f.q[t*QD:(t+1)*QD], c.KVHeads, g, kv.k[0], kv.v[0],
					table[first:], hi-first*ps, f.scale, cpu.AttnOpts{Skip: lo - first*ps}, f.attnScratch[s])
			}
		}
	}
}

// alibiMaxBias is jina-bert-v2's ALiBi maximum bias (llama.cpp's).
const alibiMaxBias = 8

// alibiSlopes are ALiBi's slopes of n heads with maximum bias maxBias,
// as ggml computes them in float32: with n2 the largest power of two up
// to n, m0 = 2^(−maxBias/n2) and m1 = 2^(−maxBias/2/n2), head h < n2 has
// m0^(h+1), the others m1^(2(h−n2)+1).
func alibiSlopes(n int, maxBias float32) []float32 {
	n2 := 1
	for n2*2 <= n {
		n2 *= 2
	}
	m0 := float32(math.Pow(2, float64(-maxBias/float32(n2))))
	m1 := float32(math.Pow(2, float64(-maxBias/2/float32(n2))))
	s := make([]float32, n)
	for h := range s {
		if h < n2 {
			s[h] = float32(math.Pow(float64(m0), float64(h+1)))
		} else {
			s[h] = float32(math.Pow(float64(m1), float64(2*(h-n2)+1)))
		}
	}
	return s
}

// forTokens runs fn for each of the f.t tokens of the call in progress, on
// the pool for larger batches (each token's arithmetic is the same either
// way).
func (m *Model) forTokens(fn func(i int)) {
	f := &m.fw
	if f.t < parRows {
		for i := 0; i < f.t; i++ {
			fn(i)
		}
		return
	}
	m.pool.For(f.t, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			fn(i)
		}
	})
}
