package cpu

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

func TestReadSumMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	for _, n := range []int{0, 7, 8, 127, 128, 129, 1000, 4096, 65536 + 72} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if got, want := ReadSum(b), readSumGo(b); got != want {
			t.Fatalf("n=%d: ReadSum %#x, readSumGo %#x", n, got, want)
		}
	}
}

func BenchmarkReadSum(b *testing.B) {
	for _, size := range []int{1 << 20, 256 << 20} {
		buf := make([]byte, size)
		for i := range buf {
			buf[i] = byte(i)
		}
		b.Run(sizeName(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			var s uint64
			for b.Loop() {
				s += ReadSum(buf)
			}
			sinkU64 = s
		})
	}
}

var sinkU64 uint64

func sizeName(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + "MiB"
	}
	return strconv.Itoa(n>>10) + "KiB"
}
