package cpu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// TestPackPanelFromBlkZSIMD: the SIMD unpacking of a decode-layout group
// into a 16-row panel writes exactly the bytes of its Go twin, for any
// bytes (NaN, Inf and subnormal scales included) and block counts, and
// nothing past the panel. Q4_0's, Q8_0's and IQ4_NL's need AVX2 only,
// not the VNNI kernels that use them; Q5_0's needs AVX-512.
func TestPackPanelFromBlkZSIMD(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(81, 82))
	for _, typ := range blkZTypes {
		pk := blkZ(typ)
		for _, nb := range []int{1, 2, 7, 64} {
			t.Run(fmt.Sprintf("%s/nb%d", typ, nb), func(t *testing.T) {
				if typ == ggml.TypeQ5_0 {
					skipNoQ4Z(t)
				}
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
	for _, typ := range blkZTypes {
		pk := blkZ(typ)
		grp := make([]byte, nb*pk.block)
		panel := make([]byte, nb*panelBlockZ)
		b.Run(typ.String()+"/go", func(b *testing.B) {
			b.SetBytes(int64(len(grp)))
			for range b.N {
				pk.twin(panel, grp, nb)
			}
		})
		b.Run(typ.String()+"/simd", func(b *testing.B) {
			if typ == ggml.TypeQ5_0 {
				skipNoQ4Z(b)
			}
			b.SetBytes(int64(len(grp)))
			for range b.N {
				pk.simd(panel, grp, nil, nb)
			}
		})
	}
}
