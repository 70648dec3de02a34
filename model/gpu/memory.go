package gpu

import (
	"fmt"

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
// attention split partials, the sampling parameters and the 16-bit copy of
// the activations that MatMul's GEMM paths (cuBLAS, tensor cores) take.
// No weight matrix is ever copied: the tensor-core GEMM decodes weight
// tiles in shared memory.
func (m *Decoder) Workspace(pageSize int) int64 {
	c := m.cfg
	T := int64(m.maxT)
	width := int64((c.Context + pageSize - 1) / pageSize)
	ws := (intArrays*T + T*width) * 4
	nsplit := int64((c.Context + cuda.DecodeSplit - 1) / cuda.DecodeSplit)
	ws += T * int64(c.Heads) * nsplit * int64(c.HeadDim+2) * 4
	ws += 16 * T
	var cols int64
	for _, w := range m.weights {
		cols = max(cols, int64(w.Cols))
	}
	return ws + T*cols*2
}

// KVMemoryAuto returns the bytes the KV pool may take on the decoder's
// device: free device memory now (weights and activation buffers already
// allocated) less Workspace and the headroom. It fails when nothing is
// left.
func (m *Decoder) KVMemoryAuto(pageSize int) (int64, error) {
	var free, total uint64
	err := m.dev.Do(func(s *cuda.Stream) error {
		var err error
		free, total, err = s.MemInfo()
		return err
	})
	if err != nil {
		return 0, err
	}
	headroom := max(int64(MinHeadroom), int64(HeadroomFraction*float64(total)))
	ws := m.Workspace(pageSize)
	n := int64(free) - ws - headroom
	if n < m.cfg.KVBytesPerPage(pageSize) {
		return 0, fmt.Errorf("gpu: no device memory left for the KV cache: %d MiB free after the weights, %d MiB workspace, %d MiB headroom",
			free>>20, ws>>20, headroom>>20)
	}
	return n, nil
}
