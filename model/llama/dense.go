package llama

import (
	"fmt"

	"oengine/kernels/cpu"
)

// Dense layers after pooling: sentence-transformers' Dense modules as
// llama.cpp's converter writes them (dense_2, then dense_3, no activation
// between), EmbeddingGemma's 768 → 3072 → 768. They map a pooled
// embedding to the one the model was trained to give; the width stays Dim
// (llama.cpp requires dense_2's input and dense_3's output to be Dim).

// loadDense reads dense_2 (and its bias) and dense_3 where the file has
// them.
func (m *Model) loadDense(ld *loader) {
	c, f := &m.cfg, ld.f
	t2, ok2 := f.Tensor("dense_2.weight")
	t3, ok3 := f.Tensor("dense_3.weight")
	if !ok2 && !ok3 {
		return
	}
	if !ok2 || !ok3 || len(t2.Dims) != 2 || len(t3.Dims) != 2 || t2.Dims[1] > maxDim {
		if ld.err == nil {
			ld.err = fmt.Errorf("llama: dense_2 and dense_3 must come together as matrices")
		}
		return
	}
	inner := int(t2.Dims[1])
	m.dense2 = ld.matrix("dense_2.weight", inner, c.Dim)
	if _, ok := f.Tensor("dense_2.bias"); ok {
		m.dense2B = ld.vector("dense_2.bias", inner)
	}
	m.dense3 = ld.matrix("dense_3.weight", c.Dim, inner)
}

// ProjectPooled maps a pooled embedding v [Dim] through the dense layers,
// in place (nothing without them): v = dense3·(dense2·v + b).
func (m *Model) ProjectPooled(v []float32) error {
	c := &m.cfg
	if m.dense2.Rows == 0 {
		return nil
	}
	if len(v) != c.Dim {
		return fmt.Errorf("%w: ProjectPooled of %d values, want %d", ErrBadBatch, len(v), c.Dim)
	}
	h := make([]float32, m.dense2.Rows)
	m.pool.MatMul(h, m.dense2, v, 1)
	if m.dense2B != nil {
		cpu.Add(h, h, m.dense2B)
	}
	m.pool.MatMul(v, m.dense3, h, 1)
	return nil
}
