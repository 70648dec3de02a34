package verify

import (
	"fmt"

	"oengine/model/gpu"
	"oengine/model/llama"
)

// model is what the checks run: the CPU forward pass (*llama.Model) or the
// CUDA one (*gpu.Decoder), through one small interface.
type model interface {
	config() llama.Config
	// newStore allocates a K/V store of pages pages.
	newStore(pages, pageSize int) (store, error)
	forward(s store, b *llama.Batch, logits []float32) error
	// cpu returns the CPU model for the GGML arithmetic modes (nil on CUDA).
	cpu() *llama.Model
	close()
}

type store interface{ Pages() int }

// cpuModel runs the checks on the CPU forward pass.
type cpuModel struct {
	m  *llama.Model
	kv llama.KVType
}

func (c cpuModel) config() llama.Config { return c.m.Config() }
func (c cpuModel) cpu() *llama.Model    { return c.m }
func (c cpuModel) close()               { c.m.Close() }

func (c cpuModel) newStore(pages, pageSize int) (store, error) {
	return c.m.NewKV(pages, pageSize, c.kv)
}

func (c cpuModel) forward(s store, b *llama.Batch, logits []float32) error {
	return c.m.Forward(s.(*llama.KV), b, logits)
}

// gpuModel runs the checks on the CUDA forward pass (K/V in F16 on the
// device, as the reference's cache).
type gpuModel struct {
	m     *gpu.Decoder
	cfg   llama.Config
	kvs   []*gpu.KV
	batch gpu.DecoderBatch
}

func (g *gpuModel) config() llama.Config { return g.cfg }
func (g *gpuModel) cpu() *llama.Model    { return nil }

func (g *gpuModel) newStore(pages, pageSize int) (store, error) {
	kv, err := g.m.NewKV(pages, pageSize)
	if err != nil {
		return nil, err
	}
	for _, old := range g.kvs { // the runner replaces a store it outgrew
		old.Close()
	}
	g.kvs = []*gpu.KV{kv}
	return kv, nil
}

func (g *gpuModel) forward(s store, b *llama.Batch, logits []float32) error {
	kv, ok := s.(*gpu.KV)
	if !ok {
		return fmt.Errorf("verify: store %T on the CUDA model", s)
	}
	g.batch = gpu.DecoderBatch{Tokens: b.Tokens, Pos: b.Pos, Seq: b.Seq, Seqs: b.Seqs, Logits: b.Logits}
	return g.m.Forward(kv, &g.batch, logits)
}

func (g *gpuModel) close() {
	for _, kv := range g.kvs {
		kv.Close()
	}
	g.m.Close()
}
