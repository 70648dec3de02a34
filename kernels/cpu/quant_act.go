package cpu

import "math"

// Activation quantization for MatMul, as ggml's CPU backend does it: the
// float32 activations of each token are quantized once per call to the
// weight type's "vec_dot" partner, then every row uses integer dot products.
//
//	Q4_0, Q5_0, Q8_0 weights: Q8_0 activations (per 32: F16 scale d = amax/127, int8 q = round(x·127/amax))
//	Q4_1, Q5_1 weights:       Q8_1 activations (Q8_0 plus s = F16(d*sum(q)))
//	K-quant weights:          Q8_K activations (per 256: f32 d = max/-127, int8 q, int16 sums of 16)
//
// Each token is quantized independently of the others, so results do not
// depend on the batch (batch invariance).

type actKind uint8

const (
	actF32 actKind = iota // activations used as float32
	actQ8_0
	actQ8_1
	actQ8K
)

// actBuf holds the quantized activations of n tokens of cols elements. The
// slices grow on demand and are reused between calls.
type actBuf struct {
	qs    []int8    // [n][cols]
	d     []float32 // [n][cols/32] (Q8_0/Q8_1) or [n][cols/256] (Q8_K)
	s     []float32 // [n][cols/32] Q8_1 only: F16-rounded d*sum(q)
	bsums []int16   // [n][cols/16] Q8_K only
	// Blocked-kernel layouts (Q8_0 kind, when blkActive; dot_blk.go).
	s8  []int32   // [n][cols/32] 8·Σq
	dT  []float32 // [groups of 8 tokens][cols/32][8]
	s8T []int32   // [groups of 8 tokens][cols/32][8]
}

// actView is the quantized activation of one token.
type actView struct {
	x     []float32 // [cols] (actF32)
	qs    []int8    // [cols]
	d     []float32 // [cols/32] or [cols/256]
	s     []float32 // [cols/32]
	bsums []int16   // [cols/16]
	s8    []int32   // [cols/32] (blocked kernels)
}

func growF32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// prepare sizes the buffers for n tokens of cols elements of kind k.
func (a *actBuf) prepare(k actKind, n, cols int) {
	switch k {
	case actQ8_0, actQ8_1:
		a.qs = growI8(a.qs, n*cols)
		a.d = growF32(a.d, n*cols/qk)
		if k == actQ8_1 {
			a.s = growF32(a.s, n*cols/qk)
		}
		if k == actQ8_0 && blkActive {
			a.prepareBlk(n, cols)
		}
	case actQ8K:
		// Whole groups of four tokens, the slots past n zero: the
		// four-token kernels also take the last two or three tokens of a
		// product (tile in matmul_run.go).
		n4 := (n + 3) &^ 3
		a.qs = growI8(a.qs, n4*cols)
		a.d = growF32(a.d, n4*cols/qkK)
		if cap(a.bsums) < n4*cols/16 {
			a.bsums = make([]int16, n4*cols/16)
		}
		a.bsums = a.bsums[:n4*cols/16]
		clear(a.qs[n*cols:])
		clear(a.d[n*cols/qkK:])
		clear(a.bsums[n*cols/16:])
	}
}

func growI8(s []int8, n int) []int8 {
	if cap(s) < n {
		return make([]int8, n)
	}
	return s[:n]
}

// quantizeToken quantizes token i's activations x ([cols]) into a.
func (a *actBuf) quantizeToken(k actKind, i, cols int, x []float32) {
	switch k {
	case actQ8_0, actQ8_1:
		nb := cols / qk
		qs, d := a.qs[i*cols:(i+1)*cols], a.d[i*nb:(i+1)*nb]
		var s []float32
		if k == actQ8_1 {
			s = a.s[i*nb : (i+1)*nb]
		}
		quantRowQ8(x[:cols], qs, d, s)
		if k == actQ8_0 && blkActive {
			a.fillBlkSIMD(i, cols)
		}
	case actQ8K:
		nb := cols / qkK
		quantRowQ8K(x[:cols], a.qs[i*cols:(i+1)*cols], a.d[i*nb:(i+1)*nb], a.bsums[i*cols/16:(i+1)*cols/16])
	}
}

// fillBlkSIMD is fillBlk (dot_blk.go) with the block sums in SIMD where
// present: token i's entries of s8, dT and s8T, bitwise the same.
func (a *actBuf) fillBlkSIMD(i, cols int) {
	nb := cols / qk
	s8 := a.s8[i*nb : (i+1)*nb]
	if !sumQ8SIMD(a.qs[i*cols:(i+1)*cols], s8) {
		a.fillBlk(i, cols)
		return
	}
	d := a.d[i*nb : (i+1)*nb]
	base, t := (i/8)*nb*8, i%8
	dT, s8T := a.dT[base:base+nb*8], a.s8T[base:base+nb*8]
	for b, s := range s8 {
		dT[b*8+t] = d[b]
		s8T[b*8+t] = s
	}
}

// q8Block quantizes 32 values to Q8_0 as ggml's AVX2 quantize_row_q8_0
// does on x86 (llama.cpp's CPU path): d = amax/127 stored as F16,
// q = round-half-even(x·127/amax) with the unrounded reciprocal. It writes
// the F16-rounded scale to *d and returns the sum of the quantized values.
// quantQ8AVX2 is its bit-exact SIMD twin.
func q8Block(x []float32, qs []int8, d *float32) int {
	var amax float32
	for _, v := range x[:qk] {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	var id float32
	if amax != 0 {
		id = 127 / amax
	}
	sum := 0
	for j, v := range x[:qk] {
		q := int8(math.RoundToEven(float64(v * id)))
		qs[j] = q
		sum += int(q)
	}
	*d = fp16Round(amax / 127)
	return sum
}

// quantRowQ8 quantizes whole 32-blocks of x into qs and d (with the SIMD
// kernel where present); s, if not nil, receives F16(d·Σq) per block.
func quantRowQ8(x []float32, qs []int8, d, s []float32) {
	nb := len(x) / qk
	if !quantQ8SIMD(x, qs, d) {
		for b := 0; b < nb; b++ {
			q8Block(x[b*qk:(b+1)*qk], qs[b*qk:(b+1)*qk], &d[b])
		}
	}
	if s != nil {
		for b := 0; b < nb; b++ {
			sum := 0
			for _, q := range qs[b*qk : (b+1)*qk] {
				sum += int(q)
			}
			s[b] = fp16Round(d[b] * float32(sum))
		}
	}
}

// quantRowQ8K quantizes whole 256-blocks of x to Q8_K (SIMD where present;
// q8KBlock is the twin).
func quantRowQ8K(x []float32, qs []int8, d []float32, bsums []int16) {
	if quantQ8KSIMD(x, qs, d, bsums) {
		return
	}
	for b := 0; b < len(x)/qkK; b++ {
		d[b] = q8KBlock(x[b*qkK:(b+1)*qkK], qs[b*qkK:(b+1)*qkK], bsums[b*16:b*16+16])
	}
}

// view returns token i's activations.
func (a *actBuf) view(k actKind, i, cols int, x []float32, v *actView) {
	a.viewN(k, i, 1, cols, x, v)
}

// viewN returns the activations of tokens i..i+n-1 (contiguous per field).
func (a *actBuf) viewN(k actKind, i, n, cols int, x []float32, v *actView) {
	j := i + n
	switch k {
	case actF32:
		v.x = x[i*cols : j*cols]
	case actQ8_0, actQ8_1:
		nb := cols / qk
		v.qs, v.d = a.qs[i*cols:j*cols], a.d[i*nb:j*nb]
		if k == actQ8_0 && blkActive {
			v.s8 = a.s8[i*nb : j*nb]
		}
		if k == actQ8_1 {
			v.s = a.s[i*nb : j*nb]
		}
	case actQ8K:
		nb := cols / qkK
		v.qs, v.d, v.bsums = a.qs[i*cols:j*cols], a.d[i*nb:j*nb], a.bsums[i*cols/16:j*cols/16]
	}
}
