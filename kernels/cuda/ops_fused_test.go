package cuda

import (
	"math"
	"testing"

	"oengine/kernels/cpu"
)

func init() {
	sigOps = append(sigOps, func(s *Stream) error { return s.AddRMSNorm(1, 2, 3, 4, 5, 64, 1e-5) })
}

// add_rms_norm on a GPU equals add_f32 then rms_norm (the plain pair).
func TestGPUAddRMSNorm(t *testing.T) {
	d := gpu(t)
	const rows, n = 5, 4096 + 96 // longer than ADDNORM_VPT values per thread: the re-read path too
	x, y, w := make([]float32, rows*n), make([]float32, rows*n), make([]float32, n)
	for i := range x {
		x[i] = float32(math.Sin(float64(i) * 0.37))
		y[i] = float32(math.Cos(float64(i)*0.11)) * 0.5
	}
	for i := range w {
		w[i] = 0.5 + float32(i%7)/7
	}
	gotX, gotH := make([]float32, rows*n), make([]float32, rows*n)
	err := d.Do(func(s *Stream) error {
		px, _ := s.Alloc(4 * rows * n)
		py, _ := s.Alloc(4 * rows * n)
		ph, _ := s.Alloc(4 * rows * n)
		pw, _ := s.Alloc(4 * n)
		defer func() {
			for _, p := range []DevPtr{px, py, ph, pw} {
				s.Free(p)
			}
		}()
		for _, u := range []struct {
			p DevPtr
			v []float32
		}{{px, x}, {py, y}, {pw, w}} {
			if err := s.UploadF32(u.p, u.v); err != nil {
				return err
			}
		}
		if err := s.AddRMSNorm(px, py, pw, ph, rows, n, 1e-5); err != nil {
			return err
		}
		if err := s.DownloadF32(gotX, px); err != nil {
			return err
		}
		return s.DownloadF32(gotH, ph)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, n)
	for r := 0; r < rows; r++ {
		sum := make([]float32, n)
		for i := range sum {
			sum[i] = x[r*n+i] + y[r*n+i]
			if gotX[r*n+i] != sum[i] {
				t.Fatalf("x[%d][%d] = %v, want %v", r, i, gotX[r*n+i], sum[i])
			}
		}
		cpu.RMSNormRef(want, sum, w, 1e-5)
		for i := range want {
			if math.Abs(float64(gotH[r*n+i]-want[i])) > 1e-5*math.Max(1, math.Abs(float64(want[i]))) {
				t.Fatalf("h[%d][%d] = %v, want %v", r, i, gotH[r*n+i], want[i])
			}
		}
	}
}

// translitAddRMSNorm mirrors add_rms_norm line for line for one row with
// blockDim threads (block_sum is the plain sum of the per-thread sums), so
// the register-kept and the re-read halves of the kernel are checked on any
// machine.
func translitAddRMSNorm(x, y, w, h []float32, n, blockDim int, eps float32) {
	const vpt = 16 // ADDNORM_VPT
	keep := make([][vpt]float32, blockDim)
	ss := make([]float32, blockDim)
	for tid := 0; tid < blockDim; tid++ {
		j := 0
		for i := tid; i < n; i, j = i+blockDim, j+1 {
			v := x[i] + y[i]
			x[i] = v
			ss[tid] += v * v
			if j < vpt {
				keep[tid][j] = v
			}
		}
	}
	var total float32
	for _, v := range ss {
		total += v
	}
	scale := float32(1 / math.Sqrt(float64(total/float32(n)+eps)))
	for tid := 0; tid < blockDim; tid++ {
		j := 0
		for i := tid; i < n; i, j = i+blockDim, j+1 {
			v := x[i]
			if j < vpt {
				v = keep[tid][j]
			}
			v *= scale
			if w != nil {
				v *= w[i]
			}
			h[i] = v
		}
	}
}

func TestTranslitAddRMSNorm(t *testing.T) {
	for _, n := range []int{64, 256*16 - 32, 256*16 + 288} {
		x, y, w := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], y[i], w[i] = float32(math.Sin(float64(i))), float32(i%5)-2, 1+float32(i%3)/4
		}
		sum := make([]float32, n)
		for i := range sum {
			sum[i] = x[i] + y[i]
		}
		want, got := make([]float32, n), make([]float32, n)
		cpu.RMSNormRef(want, sum, w, 1e-6)
		translitAddRMSNorm(x, y, w, got, n, 256, 1e-6)
		for i := range want {
			if x[i] != sum[i] {
				t.Fatalf("n=%d: x[%d] = %v, want %v", n, i, x[i], sum[i])
			}
			if math.Abs(float64(got[i]-want[i])) > 1e-5*math.Max(1, math.Abs(float64(want[i]))) {
				t.Fatalf("n=%d: h[%d] = %v, want %v", n, i, got[i], want[i])
			}
		}
	}
}
