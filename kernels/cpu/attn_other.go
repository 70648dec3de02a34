//go:build !amd64

package cpu

const attnAVX2 = false

func attnCvt(dst []float32, src []uint16) { attnCvtGo(dst, src) }
func attnDots(out, q, k []float32, g int) { attnDotsGo(out, q, k, g) }
func attnAxpy(out, v, w []float32, g int) { attnAxpyGo(out, v, w, g) }
