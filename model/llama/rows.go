package llama

import "oengine/kernels/cpu"

// Per-token element-wise work of a layer (norms, residual adds, SwiGLU,
// bias / q-k norm / RoPE). Each token's row is computed exactly as a serial
// loop would compute it, so splitting the tokens over the pool changes no
// result; it only keeps the second core busy during prefill, where these
// loops are a few percent of the step. Decode steps (few tokens) run them
// inline: a pool hand-off would cost more than the work.

// rowOp selects what forward.rows does for each token i (rows of Dim, FFN,
// Heads*HeadDim and KVHeads*HeadDim values):
type rowOp uint8

const (
	rowNorm    rowOp = iota // xb_i = RMSNorm(x_i, normW)
	rowNorm1                // xb_i = RMSNorm(xb_i, normW) (Gemma's post-norms)
	rowAddNorm              // x_i += xb_i; xb_i = RMSNorm(x_i, normW)
	rowAdd                  // x_i += xb_i
	rowGLU                  // hb_i = silu(hb_i) * hb2_i (Gemma: gelu)
	rowQK                   // q_i, k_i, v_i += biases; per-head q/k norms; RoPE of q_i and k_i
)

// parRows is the batch size from which rows run on the pool.
const parRows = 8

// forRows runs op over the f.t tokens of the call in progress; normW is
// the norm weight (rowNorm, rowAddNorm), lw the layer (rowQK).
func (m *Model) forRows(op rowOp, normW []float32, lw *layer) {
	f := &m.fw
	f.rowOp, f.normW, f.lw = op, normW, lw
	if f.t < parRows {
		f.rows(0, f.t)
	} else {
		m.pool.For(f.t, f.rowsFn)
	}
	f.normW, f.lw = nil, nil
}

// rows runs f.rowOp for tokens [lo, hi).
func (f *forward) rows(lo, hi int) {
	c := &f.m.cfg
	D, F, QD, KD, HD, R := c.Dim, c.FFN, c.QDim(), c.KVDim(), c.HeadDim, c.RopeDims
	for i := lo; i < hi; i++ {
		x, xb := f.x[i*D:(i+1)*D], f.xb[i*D:(i+1)*D]
		switch f.rowOp {
		case rowNorm:
			cpu.RMSNorm(xb, x, f.normW, c.NormEps)
		case rowNorm1:
			cpu.RMSNorm(xb, xb, f.normW, c.NormEps)
		case rowAddNorm:
			cpu.Add(x, x, xb)
			cpu.RMSNorm(xb, x, f.normW, c.NormEps)
		case rowAdd:
			cpu.Add(x, x, xb)
		case rowGLU: // per row: the SIMD/tail split is per row, as in ggml
			hb := f.hb[i*F : (i+1)*F]
			if c.Gemma {
				cpu.GeGLU(hb, hb, f.hb2[i*F:(i+1)*F])
			} else {
				cpu.SwiGLU(hb, hb, f.hb2[i*F:(i+1)*F])
			}
		case rowQK:
			w := f.lw
			q, k := f.q[i*QD:(i+1)*QD], f.k[i*KD:(i+1)*KD]
			if w.bq != nil {
				cpu.AddBias(q, w.bq)
				cpu.AddBias(k, w.bk)
				cpu.AddBias(f.v[i*KD:(i+1)*KD], w.bv)
			}
			if w.qNorm != nil {
				for h := 0; h < c.Heads; h++ {
					cpu.RMSNorm(q[h*HD:(h+1)*HD], q[h*HD:(h+1)*HD], w.qNorm, c.NormEps)
				}
				for h := 0; h < c.KVHeads; h++ {
					cpu.RMSNorm(k[h*HD:(h+1)*HD], k[h*HD:(h+1)*HD], w.kNorm, c.NormEps)
				}
			}
			cs := f.cs[i*R : (i+1)*R]
			if c.Local(f.layer) {
				cs = f.csLocal[i*R : (i+1)*R]
			}
			cpu.Rope(q, c.Heads, HD, R, cs, c.RopeNeoX)
			cpu.Rope(k, c.KVHeads, HD, R, cs, c.RopeNeoX)
			if c.AttnTempScale != 0 {
				cpu.Scale(q, q, c.AttnTemp(f.b.Pos[i]))
			}
		}
	}
}
