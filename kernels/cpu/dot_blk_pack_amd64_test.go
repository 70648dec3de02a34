package cpu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPackPanelSIMD: the AVX2 panel packers write exactly the bytes of
// their Go twins (packQ4_0Panel, packQ8_0Panel), for any bytes (scales
// that are NaN, Inf or subnormal included), block counts and row strides
// (8 rows taken from inside a larger matrix, so the stride exceeds the
// bytes packed).
func TestPackPanelSIMD(t *testing.T) {
	if !blkActive {
		t.Skip("blocked kernels not active on this CPU")
	}
	rng := rand.New(rand.NewPCG(61, 62))
	for _, c := range []struct {
		q4            bool
		nb, rowBlocks int // blocks packed, blocks per stored row
	}{
		{true, 1, 1}, {true, 3, 3}, {true, 64, 64}, {true, 5, 9},
		{false, 1, 1}, {false, 3, 3}, {false, 64, 64}, {false, 5, 9},
	} {
		bb, name := 34, "Q8_0"
		if c.q4 {
			bb, name = 18, "Q4_0"
		}
		t.Run(fmt.Sprintf("%s/nb%d/stride%d", name, c.nb, c.rowBlocks), func(t *testing.T) {
			bk := &blkKernel{q4: c.q4}
			rb := c.rowBlocks * bb
			data := make([]byte, 11*rb)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			for _, r0 := range []int{0, 3} {
				rows := data[r0*rb : (r0+8)*rb]
				want := make([]byte, c.nb*panelBlock)
				if c.q4 {
					packQ4_0Panel(want, rows, rb, c.nb)
				} else {
					packQ8_0Panel(want, rows, rb, c.nb)
				}
				got := make([]byte, len(want)+64) // spare bytes must stay untouched
				next := data[(r0+8)*rb:]          // prefetched only: no effect on the bytes
				if !packPanelSIMD(bk, got, rows, next, rb, c.nb) {
					t.Fatal("packPanelSIMD declined with the blocked kernels active")
				}
				if !bytes.Equal(got[:len(want)], want) {
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("rows from %d: first difference at byte %d (block %d, offset %d): got %#x, want %#x",
								r0, i, i/panelBlock, i%panelBlock, got[i], want[i])
						}
					}
				}
				if !bytes.Equal(got[len(want):], make([]byte, 64)) {
					t.Fatalf("rows from %d: wrote past the panel", r0)
				}
			}
		})
	}
}
