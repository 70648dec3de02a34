package gpu

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"oengine/kernels/cuda"
)

// hostBatch is a validated batch resolved to the device's int32 arrays.
type hostBatch struct {
	T, nseq, maxNPos int
	width            int     // page-table row length (stride) of this step
	slot, npos       []int32 // [T]
	tables           []int32 // [nseq][width]
	tstart, tlen     []int32
}

// tableWidth returns the page-table capacity for kv: as many pages as the
// longest context needs, independent of the pool size.
func (m *Decoder) tableWidth(kv *KV) int { return (m.cfg.Context + kv.pageSize - 1) / kv.pageSize }

// resolve validates b and builds its device arrays. The page tables are
// uploaded with a row stride of the longest table rounded up to a power of
// two (a decode step of short sequences does not copy context-wide rows),
// or the full capacity when full is set (graph replay: the stride is baked
// into the graph).
func (m *Decoder) resolve(kv *KV, b *DecoderBatch, logits []float32, full bool) (hostBatch, error) {
	T := len(b.Tokens)
	hb := hostBatch{T: T, nseq: len(b.Seqs)}
	if kv == nil || kv.m != m || len(kv.kc) != len(m.layers) {
		return hb, errors.New("gpu: the KV store is closed or belongs to another decoder")
	}
	capacity := m.tableWidth(kv)
	if T == 0 || T > m.maxT || len(b.Pos) != T || len(b.Seq) != T {
		return hb, fmt.Errorf("gpu: batch of %d tokens (%d pos, %d seq), at most %d", T, len(b.Pos), len(b.Seq), m.maxT)
	}
	if len(b.Logits) > m.maxT || (logits != nil && len(logits) < len(b.Logits)*m.cfg.Vocab) {
		return hb, fmt.Errorf("gpu: %d logits rows into %d values", len(b.Logits), len(logits))
	}
	if len(b.Seqs) > m.maxT {
		return hb, fmt.Errorf("gpu: %d sequences, at most %d", len(b.Seqs), m.maxT)
	}
	longest := 1
	for s, tb := range b.Seqs {
		if len(tb) > capacity {
			return hb, fmt.Errorf("gpu: sequence %d has %d pages, the context %d positions (%d pages)", s, len(tb), m.cfg.Context, capacity)
		}
		for i, p := range tb {
			if p < 0 || int(p) >= kv.pages {
				return hb, fmt.Errorf("gpu: sequence %d page %d is %d, outside [0, %d)", s, i, p, kv.pages)
			}
		}
		longest = max(longest, len(tb))
	}
	hb.width = capacity
	if !full {
		hb.width = min(capacity, 1<<bits.Len(uint(longest-1)))
	}
	hb.tables = make([]int32, len(b.Seqs)*hb.width)
	for s, tb := range b.Seqs {
		copy(hb.tables[s*hb.width:], tb)
	}
	ps := int32(kv.pageSize)
	hb.slot, hb.npos = make([]int32, T), make([]int32, T)
	for i := 0; i < T; i++ {
		tok, pos, sq := b.Tokens[i], b.Pos[i], b.Seq[i]
		if tok < 0 || int(tok) >= m.cfg.Vocab || sq < 0 || int(sq) >= len(b.Seqs) || pos < 0 || int(pos) >= m.cfg.Context {
			return hb, fmt.Errorf("gpu: token %d: id %d, seq %d, pos %d out of range", i, tok, sq, pos)
		}
		pi := int(pos / ps)
		if pi >= len(b.Seqs[sq]) {
			return hb, fmt.Errorf("gpu: token %d at position %d has no page in sequence %d", i, pos, sq)
		}
		hb.slot[i] = b.Seqs[sq][pi]*ps + pos%ps
		hb.npos[i] = pos + 1
		hb.maxNPos = max(hb.maxNPos, int(pos)+1)
	}
	for _, l := range b.Logits {
		if l < 0 || int(l) >= T {
			return hb, fmt.Errorf("gpu: logits index %d outside the batch", l)
		}
	}
	if ap := m.attn(kv, hb.width); m.mmaPrefill(ap) {
		hb.tstart, hb.tlen = cuda.PrefillTilesMMA(b.Seq, b.Pos, ap)
	} else {
		hb.tstart, hb.tlen = cuda.PrefillTiles(b.Seq, b.Pos, ap)
	}
	return hb, nil
}

// mmaPrefill reports whether prefill steps use the tensor-core attention
// kernel (attn_prefill_mma): head dims it handles, unless ScalarPrefill.
func (m *Decoder) mmaPrefill(ap cuda.AttnParams) bool {
	return !m.ScalarPrefill && cuda.MMAPrefillSupports(ap)
}

func (m *Decoder) attn(kv *KV, width int) cuda.AttnParams {
	c := m.cfg
	return cuda.AttnParams{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, PageSize: kv.pageSize,
		MaxPages: width, Scale: float32(1 / math.Sqrt(float64(c.HeadDim)))}
}

func (m *Decoder) rope() cuda.RopeParams {
	c := m.cfg
	fs := c.RopeFreqScale
	if fs == 0 {
		fs = 1
	}
	return cuda.RopeParams{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, NRot: c.RopeDims,
		Base: c.RopeBase, FreqScale: fs, Factors: m.freqs, NeoX: c.RopeNeoX}
}

// Forward runs one batch and writes logits [len(b.Logits)][Vocab]: the
// whole batch runs on the device and only the wanted logits rows come
// back. A batch of more tokens than the decoder's step size runs as
// several device steps (split).
func (m *Decoder) Forward(kv *KV, b *DecoderBatch, logits []float32) error {
	return m.ForwardHidden(kv, b, logits, nil)
}

// ForwardHidden is Forward that, when hidden is not nil, also writes each
// wanted row's final hidden state (after the output norm, the vector the
// output projection reads; what embeddings pool) to hidden [len(b.Logits)][Dim].
func (m *Decoder) ForwardHidden(kv *KV, b *DecoderBatch, logits, hidden []float32) error {
	if kv != nil {
		if err := kv.takeErr(); err != nil {
			return err
		}
	}
	D := m.cfg.Dim
	if hidden != nil && len(hidden) < len(b.Logits)*D {
		return fmt.Errorf("gpu: %d hidden rows into %d values", len(b.Logits), len(hidden))
	}
	if len(b.Tokens) <= m.maxT && len(b.Seqs) <= m.maxT {
		return m.forward(kv, b, logits, hidden)
	}
	V := m.cfg.Vocab
	if len(logits) < len(b.Logits)*V {
		return fmt.Errorf("gpu: %d logits rows into %d values", len(b.Logits), len(logits))
	}
	return m.split(b, func(sub *DecoderBatch, row, n int) error {
		var h []float32
		if hidden != nil {
			h = hidden[row*D : (row+n)*D]
		}
		return m.forward(kv, sub, logits[row*V:(row+n)*V], h)
	})
}

// split runs a batch of more tokens (or sequences) than the decoder's step
// size as device steps of at most maxT tokens in token order (each
// sequence's tokens are in position order, so every key a token attends to
// is written first), keeping in each only the sequences it uses; run gets
// each step's batch and the range [row, row+n) of b.Logits it covers.
func (m *Decoder) split(b *DecoderBatch, run func(sub *DecoderBatch, row, n int) error) error {
	for i := 1; i < len(b.Logits); i++ {
		if b.Logits[i] <= b.Logits[i-1] {
			return fmt.Errorf("gpu: logits indices must increase to split a batch of %d tokens", len(b.Tokens))
		}
	}
	if len(b.Pos) != len(b.Tokens) || len(b.Seq) != len(b.Tokens) {
		return fmt.Errorf("gpu: batch of %d tokens, %d pos, %d seq", len(b.Tokens), len(b.Pos), len(b.Seq))
	}
	var sub DecoderBatch
	remap := map[int32]int32{}
	li, row := 0, 0
	for start := 0; start < len(b.Tokens); start += m.maxT {
		end := min(start+m.maxT, len(b.Tokens))
		clear(remap)
		sub = DecoderBatch{Tokens: b.Tokens[start:end], Pos: b.Pos[start:end], Seq: make([]int32, end-start)}
		for i := start; i < end; i++ {
			sq := b.Seq[i]
			if sq < 0 || int(sq) >= len(b.Seqs) {
				return fmt.Errorf("gpu: token %d: seq %d out of range", i, sq)
			}
			r, ok := remap[sq]
			if !ok {
				r = int32(len(sub.Seqs))
				remap[sq] = r
				sub.Seqs = append(sub.Seqs, b.Seqs[sq])
			}
			sub.Seq[i-start] = r
		}
		for ; li < len(b.Logits) && int(b.Logits[li]) < end; li++ {
			sub.Logits = append(sub.Logits, b.Logits[li]-int32(start))
		}
		n := len(sub.Logits)
		if err := run(&sub, row, n); err != nil {
			return err
		}
		row += n
	}
	return nil
}

func (m *Decoder) forward(kv *KV, b *DecoderBatch, logits, hidden []float32) error {
	hb, err := m.resolve(kv, b, logits, false)
	if err != nil {
		return err
	}
	if logits == nil && len(b.Logits) > 0 {
		return fmt.Errorf("gpu: %d logits rows wanted, no buffer", len(b.Logits))
	}
	graphs := m.UseGraphs && len(hb.tstart) == hb.T && isDecode(b) && hidden == nil
	if graphs {
		// The split count is baked into the graph: round it up to a power
		// of two so that one graph serves growing sequences for a while.
		splits := (hb.maxNPos + cuda.DecodeSplit - 1) / cuda.DecodeSplit
		hb.maxNPos = min(m.cfg.Context, cuda.DecodeSplit<<bits.Len(uint(splits-1)))
	}
	return m.dev.Do(func(s *cuda.Stream) error {
		if err := m.uploadBatch(s, kv, b, hb); err != nil {
			return err
		}
		queue := func() error { return m.step(s, kv, hb, len(b.Logits), hidden != nil) }
		if graphs {
			err = m.replay(s, kv, graphKey{t: hb.T, width: hb.width, maxNPos: hb.maxNPos}, queue)
		} else {
			err = queue()
		}
		if err != nil {
			return err
		}
		if len(b.Logits) == 0 {
			return s.Sync()
		}
		if hidden != nil {
			if err := s.DownloadF32(hidden[:len(b.Logits)*m.cfg.Dim], m.tmp); err != nil {
				return err
			}
		}
		return s.DownloadF32(logits[:len(b.Logits)*m.cfg.Vocab], m.logits)
	})
}

// uploadBatch copies the step's int32 arrays to the packed device buffer
// with one copy (the used prefix: the fixed arrays, then nseq page tables).
func (m *Decoder) uploadBatch(s *cuda.Stream, kv *KV, b *DecoderBatch, hb hostBatch) error {
	if err := m.ensureInts(s, m.tableWidth(kv)); err != nil {
		return err
	}
	T := m.maxT
	n := intArrays*T + len(hb.tables)
	if cap(m.host) < n {
		m.host = make([]int32, n)
	}
	h := m.host[:n]
	for i, v := range [intArrays][]int32{b.Tokens, b.Pos, b.Seq, hb.npos, hb.slot, b.Logits, hb.tstart, hb.tlen} {
		copy(h[i*T:(i+1)*T], v)
	}
	copy(h[intArrays*T:], hb.tables)
	return s.UploadI32(m.ints, h)
}

// step queues the whole forward pass (no host synchronisation). The kernels
// of one step, in order: get_rows (embedding), rms_norm; per layer 3 GEMVs
// (or GEMMs) for q, k, v, [add_bias ×3 (qwen2)], [rms_norm ×2 (qwen3
// q/k-norm)], rope_kv_write, attention (attn_decode_f16 + attn_combine, or
// when a tile holds several tokens attn_prefill_mma for head dims 64 and
// 128, attn_prefill_f16 for others), GEMV o, add_rms_norm (residual + FFN
// norm), GEMV gate, GEMV up, silu_mul, GEMV down, add_rms_norm (residual +
// the next layer's attention norm; add_f32 after the last layer); then
// gather_rows_f32, rms_norm and the output GEMV for the wanted rows (with
// hidden, their normalized rows also into m.tmp for the host). For
// quantized weights and steps of at most cuda.GemvQ8MaxTokens tokens each
// GEMV is gemv_q8_* on int8 activations quantized once per use site and
// activation kind (quantize_q8_1/_k after add_rms_norm; the first layer's
// and the output norm fused: rms_norm_q8_1/_k): see matMuls.
func (m *Decoder) step(s *cuda.Stream, kv *KV, hb hostBatch, nlog int, hidden bool) error {
	c, T := m.cfg, hb.T
	qd, kvd := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	ap, rp := m.attn(kv, hb.width), m.rope()
	run := func(errs ...error) error { return errors.Join(errs...) }
	mm := s.MatMul
	if m.ExactMatMul {
		mm = s.Gemv
	}
	// The int8-activation path (decode and short chunks of quantized
	// weights): one buffer per activation kind, sized once for the largest
	// step so that it never moves under a captured graph.
	var xq q8Bufs
	if !m.ExactMatMul && T <= cuda.GemvQ8MaxTokens {
		for _, k := range []cuda.Q8Kind{cuda.Q8_1, cuda.Q8K} {
			var err error
			if xq[k], err = s.Q8Scratch(k, min(m.maxT, cuda.GemvQ8MaxTokens), max(c.Dim, c.FFN, qd)); err != nil {
				return err
			}
		}
	}
	if err := s.GetRows(m.x, m.embed, m.tokens, T); err != nil {
		return err
	}
	prefill := len(hb.tstart) < T // some tiles hold several tokens
	mma := m.mmaPrefill(ap)       // the tiles are PrefillTilesMMA's (resolve)
	for li, l := range m.layers {
		kc, vc := kv.kc[li], kv.vc[li]
		// Later layers' attention norm is fused into the previous residual
		// add (m.h holds the normalized rows).
		x, norm := m.h, cuda.DevPtr(0)
		if li == 0 {
			x, norm = m.x, l.attnNorm
		}
		if err := m.matMuls(s, mm, xq, x, norm, T, []cuda.DevPtr{m.q, m.k, m.v}, []cuda.Weight{l.q, l.k, l.v}); err != nil {
			return err
		}
		if l.qBias != 0 {
			if err := run(s.AddBias(m.q, l.qBias, T, qd), s.AddBias(m.k, l.kBias, T, kvd), s.AddBias(m.v, l.vBias, T, kvd)); err != nil {
				return err
			}
		}
		if l.qNorm != 0 {
			if err := run(s.RMSNorm(m.q, m.q, l.qNorm, T*c.Heads, c.HeadDim, c.NormEps),
				s.RMSNorm(m.k, m.k, l.kNorm, T*c.KVHeads, c.HeadDim, c.NormEps)); err != nil {
				return err
			}
		}
		if err := s.RopeKVWrite(m.q, m.k, m.v, kc, vc, m.pos, m.slot, T, rp); err != nil {
			return err
		}
		var err error
		switch {
		case prefill && mma:
			err = s.AttnPrefillMMA(m.a, m.q, kc, vc, m.tables, m.seq, m.npos, m.tstart, m.tlen, len(hb.tstart), ap, !m.F16Prefill)
		case prefill:
			err = s.AttnPrefill(m.a, m.q, kc, vc, m.tables, m.seq, m.npos, m.tstart, m.tlen, len(hb.tstart), ap)
		default:
			err = s.AttnDecode(m.a, m.q, kc, vc, m.tables, m.seq, m.npos, T, hb.maxNPos, ap)
		}
		if err != nil {
			return err
		}
		if err := run(
			mm(m.tmp, l.o, m.a, T),
			s.AddRMSNorm(m.x, m.tmp, l.ffnNorm, m.h, T, c.Dim, c.NormEps),
			m.matMuls(s, mm, xq, m.h, 0, T, []cuda.DevPtr{m.gate, m.up}, []cuda.Weight{l.gate, l.up}),
			s.SiLUMul(m.gate, m.gate, m.up, T*c.FFN),
			mm(m.tmp, l.down, m.gate, T),
		); err != nil {
			return err
		}
		// The FFN's residual add is fused with the next layer's attention
		// norm; the last layer's add stands alone (the output norm runs on
		// the gathered rows only).
		if li+1 < len(m.layers) {
			err = s.AddRMSNorm(m.x, m.tmp, m.layers[li+1].attnNorm, m.h, T, c.Dim, c.NormEps)
		} else {
			err = s.Add(m.x, m.x, m.tmp, T*c.Dim)
		}
		if err != nil {
			return err
		}
	}
	if nlog == 0 {
		return nil
	}
	if err := s.GatherRows(m.h, m.x, m.lidx, nlog, c.Dim); err != nil {
		return err
	}
	if hidden {
		if err := s.RMSNorm(m.tmp, m.h, m.outNorm, nlog, c.Dim, c.NormEps); err != nil {
			return err
		}
	}
	return run(
		m.matMuls(s, mm, xq, m.h, m.outNorm, nlog, []cuda.DevPtr{m.logits}, []cuda.Weight{m.out}),
	)
}

// q8Bufs holds a step's int8 activation buffer per cuda.Q8Kind (zero: no
// int8 path).
type q8Bufs [3]cuda.DevPtr

// matMuls computes outs[j] = h·ws[j]ᵀ for the weights of one use site (q,
// k, v; gate, up; output), h = m.h [n][Dim] = RMSNorm(x)·norm, or h = x =
// m.h already normalized when norm is 0. With int8 buffers the rows are
// quantized once per activation kind the site's weights need (the first
// fused with the norm when there is one: rms_norm_q8_1 or rms_norm_q8_k;
// else quantize_q8_1/_k from m.h), and those weights run gemv_q8_*; m.h
// receives the float32 rows only when something reads them. Without: the
// norm into m.h, then mm.
func (m *Decoder) matMuls(s *cuda.Stream, mm func(y cuda.DevPtr, w cuda.Weight, x cuda.DevPtr, n int) error,
	xq q8Bufs, x, norm cuda.DevPtr, n int, outs []cuda.DevPtr, ws []cuda.Weight) error {
	c := m.cfg
	var kinds []cuda.Q8Kind // in first-use order
	f32 := false
	for _, w := range ws {
		k := cuda.Q8KindOf(w.Type)
		switch {
		case xq[k] == 0 || !s.UsesQ8(w.Type, n):
			f32 = true
		case !slices.Contains(kinds, k):
			kinds = append(kinds, k)
		}
	}
	rest := kinds
	switch {
	case norm == 0:
	case len(kinds) == 0:
		if err := s.RMSNorm(m.h, x, norm, n, c.Dim, c.NormEps); err != nil {
			return err
		}
	default:
		var h cuda.DevPtr
		if f32 || len(kinds) > 1 {
			h = m.h
		}
		if err := s.RMSNormAct(kinds[0], xq[kinds[0]], h, x, norm, n, c.Dim, c.NormEps); err != nil {
			return err
		}
		rest = kinds[1:]
	}
	for _, k := range rest {
		if err := s.QuantizeAct(k, xq[k], m.h, n, c.Dim); err != nil {
			return err
		}
	}
	for j, w := range ws {
		var err error
		if k := cuda.Q8KindOf(w.Type); xq[k] != 0 && s.UsesQ8(w.Type, n) {
			err = s.GemvQ8(outs[j], w, xq[k], n)
		} else {
			err = mm(outs[j], w, m.h, n)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
