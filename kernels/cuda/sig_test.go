package cuda

import (
	"fmt"
	"testing"
)

// sigOps are more operations for TestLaunchArgumentsMatchSignatures: the
// test file of each ops_*.go file appends its operations from an init
// function, so a new kernel family touches no shared list.
var sigOps []func(s *Stream) error

// TestLaunchArgumentsMatchSignatures runs every device operation against
// the fake driver and checks each launch's argument count and classes
// (pointer, int, u64, float) against the kernel's C signature in the
// embedded source, so a Go call and a kernel cannot drift apart.
func TestLaunchArgumentsMatchSignatures(t *testing.T) {
	sigs := signatures(Source())
	launched := map[kernelName]bool{}
	hook := func(k kernelName, grid, block Dim3, shmem uint32, args []Arg) error {
		launched[k] = true
		want, ok := sigs[string(k)]
		if !ok {
			return fmt.Errorf("kernel %s has no parsed signature", k)
		}
		if len(want) != len(args) {
			return fmt.Errorf("kernel %s: %d arguments, signature has %d", k, len(args), len(want))
		}
		for i, a := range args {
			if a.kind != want[i] {
				return fmt.Errorf("kernel %s argument %d: class %d, signature %d", k, i, a.kind, want[i])
			}
		}
		if block.X%32 != 0 || block.X > 1024 || grid.X == 0 {
			return fmt.Errorf("kernel %s: grid %v block %v", k, grid, block)
		}
		return nil
	}
	f := newFakeDriver()
	var n int
	d, err := openWith(Info{Major: 9}, libs{drv: f.api(), compile: fakeCompile(&n), nvrtcVersion: "x", onLaunch: hook}, Options{CacheDir: "off"}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a := AttnParams{Heads: 8, KVHeads: 2, HeadDim: 64, PageSize: 16, MaxPages: 4, Scale: 0.125}
	r := RopeParams{Heads: 8, KVHeads: 2, HeadDim: 64, NRot: 64, Base: 1e4, FreqScale: 1}
	ops := []func(s *Stream) error{
		func(s *Stream) error { return s.RMSNorm(1, 2, 3, 4, 64, 1e-5) },
		func(s *Stream) error { return s.Add(1, 2, 3, 100) },
		func(s *Stream) error { return s.AddBias(1, 2, 3, 64) },
		func(s *Stream) error { return s.SiLUMul(1, 2, 3, 100) },
		func(s *Stream) error { return s.SiLUMulSplit(1, 2, 3, 64) },
		func(s *Stream) error { return s.RopeKVWrite(1, 2, 3, 4, 5, 6, 7, 3, r) },
		func(s *Stream) error { return s.Rope(1, 2, 3, r) },
		func(s *Stream) error { return s.AttnDecode(1, 2, 3, 4, 5, 6, 7, 3, 40, a) },
		func(s *Stream) error { return s.AttnPrefill(1, 2, 3, 4, 5, 6, 7, 8, 9, 2, a) },
		func(s *Stream) error { return s.ToF16(1, 2, 100) },
		func(s *Stream) error { return s.Argmax(1, 2, 3, 1000) },
		func(s *Stream) error { return s.SampleTopKTopP(1, 2, 3, 4, 5, 6, 2, 1000) },
		func(s *Stream) error { return s.GatherRows(1, 2, 3, 2, 64) },
	}
	for typ := range weightKernels {
		w := Weight{Type: typ, Rows: 8, Cols: 256, Ptr: 1}
		ops = append(ops,
			func(s *Stream) error { return s.Gemv(1, w, 2, 3) },
			func(s *Stream) error { return s.GetRows(1, w, 2, 3) },
			func(s *Stream) error { return s.DequantF16(1, w) },
		)
	}
	ops = append(ops, sigOps...)
	for i, op := range ops {
		if err := d.Do(op); err != nil {
			t.Errorf("op %d: %v", i, err)
		}
	}
	for _, k := range allKernels() {
		if !launched[k] {
			t.Errorf("no operation launches %s", k)
		}
	}
	if got := sigs["rms_norm"]; fmt.Sprint(got) != fmt.Sprint([]argKind{argPtr, argPtr, argPtr, argI32, argF32}) {
		t.Fatalf("rms_norm signature parsed as %v", got)
	}
	if got := sigs["gemv_q4_k"]; fmt.Sprint(got) != fmt.Sprint([]argKind{argPtr, argU64, argPtr, argPtr, argI32, argI32, argI32, argI32}) {
		t.Fatalf("gemv_q4_k signature parsed as %v", got)
	}
}
