package gpu

import (
	"fmt"

	"oengine/kernels/cuda"
)

// Greedy decoding on the device: logits never leave the GPU; only the
// chosen token ids come back. Decode batches (one token per sequence) are
// captured as CUDA graphs, one per batch size, and replayed with the
// per-step values (token ids, positions, slots, page tables) uploaded into
// the same device buffers before each replay.

// Greedy runs b and writes the argmax token of each row of b.Logits into
// out. UseGraphs enables graph replay for decode batches. A batch of more
// tokens than the decoder's step size runs as several device steps
// (split).
func (m *Decoder) Greedy(kv *KV, b *DecoderBatch, out []int32) error {
	if len(out) < len(b.Logits) {
		return fmt.Errorf("gpu: %d logits rows into %d ids", len(b.Logits), len(out))
	}
	if kv != nil {
		if err := kv.takeErr(); err != nil {
			return err
		}
	}
	if len(b.Tokens) > m.maxT || len(b.Seqs) > m.maxT {
		return m.split(b, func(sub *DecoderBatch, row, n int) error { return m.greedy(kv, sub, out[row:row+n]) })
	}
	return m.greedy(kv, b, out)
}

// greedy is Greedy for a batch of at most maxT tokens.
func (m *Decoder) greedy(kv *KV, b *DecoderBatch, out []int32) error {
	graphs := m.UseGraphs && isDecode(b)
	hb, err := m.resolve(kv, b, nil, graphs)
	if err != nil {
		return err
	}
	graphs = graphs && len(hb.tstart) == hb.T
	if graphs {
		hb.maxNPos = m.cfg.Context // fixed split count: the graph's grid must not change
	}
	return m.dev.Do(func(s *cuda.Stream) error {
		if err := m.uploadBatch(s, kv, b, hb); err != nil {
			return err
		}
		nlog := len(b.Logits)
		queue := func() error {
			if err := m.step(s, kv, hb, nlog, false); err != nil {
				return err
			}
			return s.Argmax(m.lidx, m.logits, nlog, m.cfg.Vocab) // token ids overwrite lidx (read before)
		}
		if graphs {
			if err := m.replay(s, kv, graphKey{greedy: true, t: hb.T, width: hb.width, maxNPos: hb.maxNPos}, queue); err != nil {
				return err
			}
		} else if err := queue(); err != nil {
			return err
		}
		return s.DownloadI32(out[:nlog], m.lidx)
	})
}

// isDecode reports whether b is a decode step: one token per sequence,
// every token's logits wanted in order.
func isDecode(b *DecoderBatch) bool {
	if len(b.Logits) != len(b.Tokens) {
		return false
	}
	for i, l := range b.Logits {
		if int(l) != i {
			return false
		}
	}
	seen := make(map[int32]bool, len(b.Seq))
	for _, sq := range b.Seq {
		if seen[sq] {
			return false
		}
		seen[sq] = true
	}
	return true
}

// graphKey identifies a captured decode step: what it computes (greedy
// ids or logits), the batch size, the page-table stride and the attention
// split count, which the graph bakes in with the buffer and KV addresses.
type graphKey struct {
	greedy            bool
	t, width, maxNPos int
}

// maxGraphs bounds the captured graphs of a decoder (each holds a few
// hundred kernel nodes).
const maxGraphs = 256

// replay queues the graph of key, capturing it first: the first step of a
// key runs directly (which also sizes the scratch buffers) and is then
// captured for the next ones. Graphs of another KV or stale ones (scratch
// moved) are dropped.
func (m *Decoder) replay(s *cuda.Stream, kv *KV, key graphKey, queue func() error) error {
	if m.graphKV != kv {
		m.dropGraphs()
		m.graphKV = kv
	}
	if g, ok := m.graphs[key]; ok && g.Stale() {
		g.Destroy()
		delete(m.graphs, key)
	}
	if g, ok := m.graphs[key]; ok {
		return g.Launch()
	}
	if len(m.graphs) >= maxGraphs {
		m.dropGraphs() // bounded: the working set is recaptured as it comes
	}
	if err := queue(); err != nil {
		return err
	}
	g, err := s.Capture(queue)
	if err != nil {
		return err
	}
	if m.graphs == nil {
		m.graphs = map[graphKey]*cuda.Graph{}
	}
	m.graphs[key] = g
	return nil
}

// SampleParams selects how one row's token is drawn (see SampleRef).
// Temperature <= 0 means greedy (argmax). U is the uniform draw in [0, 1)
// supplied by the caller (its seeded generator).
type SampleParams struct {
	Temperature float32
	TopK        int
	TopP        float32
	U           float32
}

// Sample runs b and draws one token per row of b.Logits on the device with
// sample_topk_topp (greedy rows use argmax); only the ids come back.
func (m *Decoder) Sample(kv *KV, b *DecoderBatch, p []SampleParams, out []int32) error {
	n := len(b.Logits)
	if len(p) != n || len(out) < n {
		return fmt.Errorf("gpu: %d logits rows, %d sampling params, %d outputs", n, len(p), len(out))
	}
	if kv != nil {
		if err := kv.takeErr(); err != nil {
			return err
		}
	}
	hb, err := m.resolve(kv, b, nil, false)
	if err != nil {
		return err
	}
	temp, topP, u := make([]float32, n), make([]float32, n), make([]float32, n)
	topK := make([]int32, n)
	anySample := false
	for i, sp := range p {
		temp[i], topK[i], topP[i], u[i] = sp.Temperature, int32(sp.TopK), sp.TopP, sp.U
		if sp.Temperature > 0 {
			anySample = true
		} else {
			temp[i] = 1 // unused: the argmax result is taken for this row
		}
		if !(sp.TopP > 0) {
			topP[i] = 1
		}
		if !(u[i] >= 0 && u[i] < 1) {
			return fmt.Errorf("gpu: sampling draw %v outside [0, 1)", sp.U)
		}
	}
	greedy := make([]int32, n)
	return m.dev.Do(func(s *cuda.Stream) error {
		if err := m.uploadBatch(s, kv, b, hb); err != nil {
			return err
		}
		sp, err := s.Scratch("sample_params", uint64(16*m.maxT))
		if err != nil {
			return err
		}
		T := cuda.DevPtr(4 * m.maxT)
		if err := s.UploadF32(sp, temp); err != nil {
			return err
		}
		if err := s.UploadI32(sp+T, topK); err != nil {
			return err
		}
		if err := s.UploadF32(sp+2*T, topP); err != nil {
			return err
		}
		if err := s.UploadF32(sp+3*T, u); err != nil {
			return err
		}
		if err := m.step(s, kv, hb, n, false); err != nil {
			return err
		}
		if anySample {
			if err := s.SampleTopKTopP(m.tstart, m.logits, sp, sp+T, sp+2*T, sp+3*T, n, m.cfg.Vocab); err != nil {
				return err
			}
		}
		if err := s.Argmax(m.lidx, m.logits, n, m.cfg.Vocab); err != nil {
			return err
		}
		if err := s.DownloadI32(greedy, m.lidx); err != nil {
			return err
		}
		if anySample {
			if err := s.DownloadI32(out[:n], m.tstart); err != nil {
				return err
			}
		}
		for i := range greedy {
			if p[i].Temperature <= 0 {
				out[i] = greedy[i]
			}
		}
		return nil
	})
}
