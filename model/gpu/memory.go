package gpu

import (
	"fmt"

	"oengine/ggml"
	"oengine/kernels/cuda"
)

// KV memory sizing for --kv-memory auto on a CUDA device.

// Headroom is what KVMemoryAuto leaves free on the device: at least
// MinHeadroom bytes and HeadroomFraction of the device's memory (the CUDA
// context's own growth, cuBLAS's internal buffers, graphs, other processes'
// small allocations).
const (
	MinHeadroom      = 512 << 20
	HeadroomFraction = 0.05
)

// Workspace returns the device bytes the decoder will still allocate on
// its first steps with KV pages of pageSize positions: the packed step
// buffer (token arrays and page tables as wide as the context), the
// attention split partials, the sampling parameters and, with cuBLAS, the
// F16 copies of the activations and of the largest non-F16 matrix.
func (m *Decoder) Workspace(pageSize int, blas bool) int64 {
	c := m.cfg
	T := int64(m.maxT)
	width := int64((c.Context + pageSize - 1) / pageSize)
	ws := (intArrays*T + T*width) * 4
	nsplit := int64((c.Context + cuda.DecodeSplit - 1) / cuda.DecodeSplit)
	ws += T * int64(c.Heads) * nsplit * int64(c.HeadDim+2) * 4
	ws += 16 * T
	if blas {
		var w16, cols int64
		for _, w := range m.weights {
			cols = max(cols, int64(w.Cols))
			if w.Type != ggml.TypeF16 && w.Type != ggml.TypeBF16 && w.Type != ggml.TypeF32 { // dequantized for cuBLAS
				w16 = max(w16, int64(w.Rows)*int64(w.Cols)*2)
			}
		}
		ws += w16 + T*cols*2
	}
	return ws
}

// KVMemoryAuto returns the bytes the KV pool may take on the decoder's
// device: free device memory now (weights and activation buffers already
// allocated) less Workspace and the headroom. It fails when nothing is
// left.
func (m *Decoder) KVMemoryAuto(pageSize int) (int64, error) {
	var free, total uint64
	var blas bool
	err := m.dev.Do(func(s *cuda.Stream) error {
		var err error
		free, total, err = s.MemInfo()
		blas = s.HasBLAS()
		return err
	})
	if err != nil {
		return 0, err
	}
	headroom := max(int64(MinHeadroom), int64(HeadroomFraction*float64(total)))
	ws := m.Workspace(pageSize, blas)
	n := int64(free) - ws - headroom
	if n < m.cfg.KVBytesPerPage(pageSize) {
		return 0, fmt.Errorf("gpu: no device memory left for the KV cache: %d MiB free after the weights, %d MiB workspace, %d MiB headroom",
			free>>20, ws>>20, headroom>>20)
	}
	return n, nil
}

// CheckKVMemory fails when an explicit KV budget of bytes does not fit
// the device beside the weights, the workspace and the headroom.
func (m *Decoder) CheckKVMemory(bytes int64, pageSize int) error {
	avail, err := m.KVMemoryAuto(pageSize)
	if err != nil {
		return err
	}
	if bytes > avail {
		return fmt.Errorf("gpu: --kv-memory %d MiB does not fit: %d MiB available on the device", bytes>>20, avail>>20)
	}
	return nil
}
