package llama

import "oengine/kernels/cpu"

// forward is the scratch arena of Forward, reused across calls and grown
// (never shrunk) to the largest batch seen. All activations are row-major
// with one row per batch token:
//
//	x, xb   [T][Dim]            residual stream / normed input or block output
//	q, att  [T][Heads*HeadDim]  queries / attention output (head-major)
//	k, v    [T][KVHeads*HeadDim]
//	hb, hb2 [T][FFN]            gate / up projections
//	cs      [T][RopeDims]       (cos, sin) pairs of each token's position
//	csLocal [T][RopeDims]       the same for the sliding-window layers (Config.SWA; else empty)
//	xo      [nOut][Dim]         normed states of the tokens whose logits are wanted
type forward struct {
	m                   *Model
	x, xb, q, k, v, att []float32
	hb, hb2, cs, xo     []float32
	csLocal             []float32
	// the mixture of experts (moe.go): router logits [T][Experts], the
	// slots' experts and weights [T][ExpertsUsed], one expert's rows
	// (slot indices, inputs [T·ExpertsUsed][Dim], gate and up
	// [..][ExpertFFN], outputs [..][Dim]) and every slot's output
	// [T][ExpertsUsed][Dim]
	moeLogits, moeW, moeX, moeG, moeU, moeD, moeOut []float32
	moeSel, moeRows                                 []int32
	attnScratch                                     [][]float32 // [slots][max(AttnScratch, AttnHeadsScratch, and AttnChunkScratch when a call has tiles)]
	attnItems                                       []attnItem  // the attention work items of the call in progress (planAttn)
	row                                             []byte      // a token embedding row copied out of a decode layout (tied output; cpu.Matrix.RowF32)
	slots                                           int
	scale                                           float32 // Config.AttnScale
	attnFn                                          func(lo, hi int)
	qkv                                             [3]cpu.MatOp     // the fused q/k/v products of the layer in progress
	gu                                              [2]cpu.MatOp     // the fused gate/up products
	rowsFn                                          func(lo, hi int) // f.rows, bound once
	rowOp                                           rowOp            // the forRows call in progress (rows.go)
	normW                                           []float32
	lw                                              *layer
	encAttnFn                                       func(lo, hi int) // f.encAttnSlots, bound once (encoder.go)
	seqLens                                         []int32          // an encoder's batch: each sequence's length

	// the call in progress (set by Forward, read by the parallel loop bodies)
	kv    *KV
	b     *Batch
	t     int
	layer int
}

// growI32 is grow for int32s.
func growI32(s []int32, n int) []int32 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]int32, n, n+n/4)
}

// grow returns s with length n, reallocating only when its capacity is short.
func grow(s []float32, n int) []float32 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float32, n, n+n/4)
}

// ensure sizes the arena for T tokens, nOut logits rows and attention over
// up to maxN positions.
func (f *forward) ensure(m *Model, T, nOut, maxN int) {
	c := &m.cfg
	if f.m == nil {
		f.m = m
		f.attnFn = f.attnSlots
		f.encAttnFn = f.encAttnSlots
		f.rowsFn = f.rows
		f.scale = c.AttnScale
		f.slots = 4 * m.pool.Threads()
		f.attnScratch = make([][]float32, f.slots)
	}
	f.x = grow(f.x, T*c.Dim)
	f.xb = grow(f.xb, T*c.Dim)
	f.q = grow(f.q, T*c.QDim())
	f.att = grow(f.att, T*c.QDim())
	f.k = grow(f.k, T*c.KVDim())
	f.v = grow(f.v, T*c.KVDim())
	f.hb = grow(f.hb, T*c.FFN)
	f.hb2 = grow(f.hb2, T*c.FFN)
	f.cs = grow(f.cs, T*c.RopeDims)
	if c.SWA > 0 {
		f.csLocal = grow(f.csLocal, T*c.RopeDims)
	}
	if c.Experts > 0 {
		S := T * c.ExpertsUsed // slots; one expert gets at most one per token
		f.moeLogits = grow(f.moeLogits, T*c.Experts)
		f.moeW = grow(f.moeW, S)
		f.moeSel = growI32(f.moeSel, S)
		f.moeRows = growI32(f.moeRows, T)
		f.moeX = grow(f.moeX, T*c.Dim)
		f.moeG = grow(f.moeG, T*c.ExpertFFN)
		f.moeU = grow(f.moeU, T*c.ExpertFFN)
		f.moeD = grow(f.moeD, T*c.Dim)
		f.moeOut = grow(f.moeOut, S*c.Dim)
	}
	f.xo = grow(f.xo, max(nOut, 1)*c.Dim)
	if n := m.tokEmb.RowScratch(); cap(f.row) < n {
		f.row = make([]byte, n)
	} else {
		f.row = f.row[:n]
	}
	g := c.Heads / c.KVHeads
	need := max(cpu.AttnScratch(g, maxN, c.HeadDim), cpu.AttnHeadsScratch(c.KVHeads, g, maxN, c.HeadDim))
	for s := range f.attnScratch { // planAttn grows them further for chunk tiles
		f.attnScratch[s] = grow(f.attnScratch[s], need)
	}
}
