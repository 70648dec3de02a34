package cpu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPackPanelFromQ4ZSIMD: the AVX2 unpacking of a decode-layout group
// into a 16-row panel writes exactly the bytes of packPanelFromQ4Z, for
// any bytes (NaN, Inf and subnormal scales included) and block counts,
// and nothing past the panel. It needs AVX2 only, not the VNNI kernels
// that use it.
func TestPackPanelFromQ4ZSIMD(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(81, 82))
	for _, nb := range []int{1, 2, 7, 64} {
		t.Run(fmt.Sprintf("nb%d", nb), func(t *testing.T) {
			grp := make([]byte, 2*nb*q4zBlock) // this group and the next (prefetched)
			for i := range grp {
				grp[i] = byte(rng.Uint32())
			}
			want := make([]byte, nb*panelBlockZ)
			packPanelFromQ4Z(want, grp[:nb*q4zBlock], nb)
			got := make([]byte, len(want)+64)
			if !packPanelFromQ4ZSIMD(got, grp[:nb*q4zBlock], grp[nb*q4zBlock:], nb) {
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

// bytesDiff returns the first index where a and b differ, or -1.
func bytesDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// BenchmarkPackPanelFromQ4Z: unpacking one decode-layout group of 16 rows
// × 2048 columns, Go twin against AVX2 (bytes are the group's).
func BenchmarkPackPanelFromQ4Z(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2")
	}
	const nb = 2048 / qk
	grp := make([]byte, nb*q4zBlock)
	panel := make([]byte, nb*panelBlockZ)
	b.Run("go", func(b *testing.B) {
		b.SetBytes(int64(len(grp)))
		for range b.N {
			packPanelFromQ4Z(panel, grp, nb)
		}
	})
	b.Run("avx2", func(b *testing.B) {
		b.SetBytes(int64(len(grp)))
		for range b.N {
			packPanelFromQ4ZSIMD(panel, grp, nil, nb)
		}
	})
}
