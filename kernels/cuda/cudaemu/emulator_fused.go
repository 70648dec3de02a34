package cudaemu

import (
	"oengine/kernels/cpu"
	"oengine/kernels/cuda"
)

// Twins of kernels/cuda/kernels/fused.cu.

func init() { register("add_rms_norm", addRMSNorm) }

// addRMSNorm: x += y per row, then h = RMSNorm(x) * w (the same float32
// sums as the unfused add_f32 then rms_norm twins).
func addRMSNorm(e *emulator, _ string, grid, _ cuda.Dim3, a []cuda.Arg) error {
	x, y, h := view[float32](e, a[0].Ptr()), view[float32](e, a[1].Ptr()), view[float32](e, a[3].Ptr())
	n := a[4].Int()
	var w []float32
	if p := a[2].Ptr(); p != 0 {
		w = view[float32](e, p)[:n]
	}
	for r := 0; r < int(grid.X); r++ {
		xr := x[r*n : (r+1)*n]
		for i, v := range y[r*n : (r+1)*n] {
			xr[i] += v
		}
		cpu.RMSNorm(h[r*n:(r+1)*n], xr, w, a[5].Float())
	}
	return nil
}
