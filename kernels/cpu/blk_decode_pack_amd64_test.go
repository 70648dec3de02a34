package cpu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// blkZPackers are the Go twin and the AVX2 form of each blocked type's
// unpacking of a decode-layout group into a 16-row panel, and its block
// size.
var blkZPackers = []struct {
	typ   ggml.Type
	block int
	twin  func(panel, grp []byte, nb int)
	simd  func(panel, grp, next []byte, nb int) bool
}{
	{ggml.TypeQ4_0, q4zBlock, packPanelFromQ4Z, packPanelFromQ4ZSIMD},
	{ggml.TypeQ8_0, q8zBlock, packPanelFromQ8Z, packPanelFromQ8ZSIMD},
}

// TestPackPanelFromBlkZSIMD: the AVX2 unpacking of a Q4_0 or Q8_0
// decode-layout group into a 16-row panel writes exactly the bytes of
// its Go twin, for any bytes (NaN, Inf and subnormal scales included)
// and block counts, and nothing past the panel. It needs AVX2 only, not
// the VNNI kernels that use it.
func TestPackPanelFromBlkZSIMD(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(81, 82))
	for _, pk := range blkZPackers {
		for _, nb := range []int{1, 2, 7, 64} {
			t.Run(fmt.Sprintf("%s/nb%d", pk.typ, nb), func(t *testing.T) {
				grp := make([]byte, 2*nb*pk.block) // this group and the next (prefetched)
				for i := range grp {
					grp[i] = byte(rng.Uint32())
				}
				want := make([]byte, nb*panelBlockZ)
				pk.twin(want, grp[:nb*pk.block], nb)
				got := make([]byte, len(want)+64)
				if !pk.simd(got, grp[:nb*pk.block], grp[nb*pk.block:], nb) {
					t.Fatal("declined with AVX2")
				}
				if i := bytesDiff(got[:len(want)], want); i >= 0 {
					t.Fatalf("byte %d (block %d, offset %d): got %#x, want %#x", i, i/panelBlockZ, i%panelBlockZ, got[i], want[i])
				}
				if !bytes.Equal(got[len(want):], make([]byte, 64)) {
					t.Fatal("wrote past the panel")
				}
			})
		}
	}
}

// bytesDiff returns the first index where a and b differ, or -1.
func bytesDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// BenchmarkPackPanelFromBlkZ: unpacking one decode-layout group of 16
// rows × 2048 columns, Go twin against AVX2 (bytes are the group's).
func BenchmarkPackPanelFromBlkZ(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2")
	}
	const nb = 2048 / qk
	for _, pk := range blkZPackers {
		grp := make([]byte, nb*pk.block)
		panel := make([]byte, nb*panelBlockZ)
		b.Run(pk.typ.String()+"/go", func(b *testing.B) {
			b.SetBytes(int64(len(grp)))
			for range b.N {
				pk.twin(panel, grp, nb)
			}
		})
		b.Run(pk.typ.String()+"/avx2", func(b *testing.B) {
			b.SetBytes(int64(len(grp)))
			for range b.N {
				pk.simd(panel, grp, nil, nb)
			}
		})
	}
}
