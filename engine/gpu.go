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
}

// FromGPU adapts a decoder loaded on a CUDA device (gpu.Load). The engine
// frees the KV store it allocates when it closes; the decoder stays the
// caller's to close.
func FromGPU(m *gpu.Decoder) Model { return &gpuModel{m: m} }

// Device names the CUDA device (Limits.Device).
func (g *gpuModel) Device() string { return g.m.Device().Info().String() }

func (g *gpuModel) Info() ModelInfo {
	c := g.m.Config()
	return ModelInfo{Vocab: c.Vocab, ContextLen: c.Context}
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
