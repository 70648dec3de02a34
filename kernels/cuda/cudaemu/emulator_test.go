package cudaemu

import (
	"math"
	"testing"

	"oengine/kernels/cpu"
	"oengine/kernels/cuda"
)

// Every kernel the Go side can launch has an emulation: a kernel added to
// kernels/cuda without one would make the emulated suites fail at run time.
func TestEveryKernelEmulated(t *testing.T) {
	names := cuda.KernelNames()
	if len(names) < 20 {
		t.Fatalf("only %d kernel names", len(names))
	}
	for _, k := range names {
		if !Emulated(k) {
			t.Errorf("kernel %s has no emulation", k)
		}
	}
	if Emulated("gemv_q5_1") {
		t.Error("an unknown weight type reported as emulated")
	}
}

// An operation runs through the fake driver and the emulator and matches
// its kernels/cpu twin; closing the device frees every allocation.
func TestEmulatedRMSNorm(t *testing.T) {
	d, err := Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	const rows, n = 3, 64
	x, w := make([]float32, rows*n), make([]float32, n)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)))
	}
	for i := range w {
		w[i] = 1 + float32(i)/n
	}
	got := make([]float32, rows*n)
	err = d.Do(func(s *cuda.Stream) error {
		px, _ := s.Alloc(4 * rows * n)
		pw, _ := s.Alloc(4 * n)
		if err := s.UploadF32(px, x); err != nil {
			return err
		}
		if err := s.UploadF32(pw, w); err != nil {
			return err
		}
		if err := s.RMSNorm(px, px, pw, rows, n, 1e-5); err != nil {
			return err
		}
		return s.DownloadF32(got, px)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, n)
	for r := 0; r < rows; r++ {
		cpu.RMSNorm(want, x[r*n:(r+1)*n], w, 1e-5)
		for i := range want {
			if got[r*n+i] != want[i] {
				t.Fatalf("row %d [%d]: %v, want %v", r, i, got[r*n+i], want[i])
			}
		}
	}
	if d.Live() == 0 {
		t.Fatal("no live allocation before Close")
	}
	d.Close()
	if n := d.Live(); n != 0 {
		t.Fatalf("%d allocations left after Close", n)
	}
}
