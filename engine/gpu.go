package engine

import (
	"fmt"

	"oengine/model/gpu"
)

// gpuModel adapts *gpu.Decoder (the llama family on a CUDA device) to
// Model: K/V pages live in device memory, CopyPage is a device page copy,
// and Forward runs the whole plan on the device with only the logits rows
// copied back.
type gpuModel struct {
	m     *gpu.Decoder
	batch gpu.DecoderBatch // reused: only the step loop calls Forward
	// ForwardHidden's scratch: the merged wanted rows and their results.
	want        []int32
	isHidden    []bool
	rows, hrows []float32
}

// FromGPU adapts a decoder loaded on a CUDA device (gpu.Load). The engine
// frees the KV store it allocates when it closes; the decoder stays the
// caller's to close.
func FromGPU(m *gpu.Decoder) Model { return &gpuModel{m: m} }

// Device names the CUDA device (Limits.Device).
func (g *gpuModel) Device() string { return g.m.Device().Info().String() }

func (g *gpuModel) Info() ModelInfo {
	c := g.m.Config()
	return ModelInfo{Vocab: c.Vocab, ContextLen: c.Context, Dim: c.Dim, Pooling: poolings[c.Pooling]}
}

func (g *gpuModel) KVBytesPerPage(pageSize int) int64 { return g.m.Config().KVBytesPerPage(pageSize) }

func (g *gpuModel) NewKV(pages, pageSize int) (KV, error) { return g.m.NewKV(pages, pageSize) }

func (g *gpuModel) Forward(kv KV, b *Batch, logits []float32) error {
	gkv, err := g.prepare(kv, b)
	if err != nil {
		return err
	}
	return g.m.Forward(gkv, &g.batch, logits)
}

// ForwardHidden runs the step with b.Logits and b.Hidden as one list of
// wanted rows (the decoder returns logits and hidden states for every
// wanted row; a hidden row's logits are dropped, an output projection per
// pooled row, like prompt logprobs' rows).
func (g *gpuModel) ForwardHidden(kv KV, b *Batch, logits, hidden []float32) error {
	gkv, err := g.prepare(kv, b)
	if err != nil {
		return err
	}
	n, V, D := len(b.Logits)+len(b.Hidden), g.m.Config().Vocab, g.m.Config().Dim
	want := g.want[:0]
	isHidden := g.isHidden[:0]
	for i, j := 0, 0; i < len(b.Logits) || j < len(b.Hidden); {
		if j == len(b.Hidden) || i < len(b.Logits) && b.Logits[i] < b.Hidden[j] {
			want, isHidden = append(want, b.Logits[i]), append(isHidden, false)
			i++
		} else {
			want, isHidden = append(want, b.Hidden[j]), append(isHidden, true)
			j++
		}
	}
	g.want, g.isHidden = want, isHidden
	if cap(g.rows) < n*V {
		g.rows = make([]float32, n*V)
	}
	if cap(g.hrows) < n*D {
		g.hrows = make([]float32, n*D)
	}
	g.batch.Logits = want
	if err := g.m.ForwardHidden(gkv, &g.batch, g.rows[:n*V], g.hrows[:n*D]); err != nil {
		return err
	}
	li, hi := 0, 0
	for r, h := range isHidden {
		if h {
			copy(hidden[hi*D:(hi+1)*D], g.hrows[r*D:(r+1)*D])
			hi++
		} else {
			copy(logits[li*V:(li+1)*V], g.rows[r*V:(r+1)*V])
			li++
		}
	}
	return nil
}

// ForwardGreedy runs the step and its argmax on the device (GreedyModel).
func (g *gpuModel) ForwardGreedy(kv KV, b *Batch, out []int32) error {
	gkv, err := g.prepare(kv, b)
	if err != nil {
		return err
	}
	return g.m.Greedy(gkv, &g.batch, out)
}

func (g *gpuModel) prepare(kv KV, b *Batch) (*gpu.KV, error) {
	gkv, ok := kv.(*gpu.KV)
	if !ok {
		return nil, fmt.Errorf("engine: KV of type %T is not a GPU KV", kv)
	}
	g.batch = gpu.DecoderBatch{Tokens: b.Tokens, Pos: b.Pos, Seq: b.Seq, Seqs: b.Seqs, Logits: b.Logits}
	return gkv, nil
}
