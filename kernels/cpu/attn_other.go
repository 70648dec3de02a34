//go:build !amd64

package cpu

import "unsafe"

func attnPrefetchRows(src unsafe.Pointer, f16 bool, sstride, nrows, d int) {}

func attnCvt(dst []float32, src []uint16) { attnCvtGo(dst, src) }
func attnAxpy(out, v, w []float32, g int) { attnAxpyGo(out, v, w, g) }
func attnExp(scores []float32, g int, m []float32, sums []float64) {
	attnExpGo(scores, g, m, sums)
}
func attnAxpyBlock(out, vb, w []float32, nb, g, d, vs int) {
	attnAxpyBlockGo(out, vb, w, nb, g, d, vs)
}
func attnCvtRows(dst []float32, src []uint16, sstride, nrows, d int) {
	for r := 0; r < nrows; r++ {
		attnCvtGo(dst[r*d:(r+1)*d], src[r*sstride:r*sstride+d])
	}
}
func attnScaleMax(scores []float32, g int, scale float32, m []float32) {
	attnScaleMaxGo(scores, g, scale, m)
}
func attnScores(out, q, qt, kb []float32, nb, g, d, ks int) {
	attnScoresGo(out, q, kb, nb, g, d, ks)
}

func attnZOk(g, d int, k, v KVRows) bool { return false }
func attnZScratch(kvh, g, n, d int) int  { return 0 }
func attendGroupsZ(out, q []float32, kvh, g int, k, v KVRows, table []int32, n int, o AttnOpts, off int, scale float32, scratch []float32) {
	panic("cpu: attendGroupsZ without amd64")
}
