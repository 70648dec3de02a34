package cuda

import (
	"testing"
)

// The copy-bandwidth benchmark's code runs on the fake driver (the figure
// means nothing there; the path is what is checked before a GPU run).
func TestCopyBandwidthOnFake(t *testing.T) {
	d, _, err := OpenFake(func(*FakeMemory, string, Dim3, Dim3, uint32, []Arg) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if gbps := copyBandwidth(t, d, 1<<20, 2); gbps <= 0 {
		t.Fatalf("bandwidth %v", gbps)
	}
}
