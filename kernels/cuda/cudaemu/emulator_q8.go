package cudaemu

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"oengine/ggml"
	"oengine/kernels/cpu"
	"oengine/kernels/cuda"
)

// Twins of kernels/cuda/kernels/mmvq.cu: q8_1 and q8_K activation
// quantization and the int8-activation GEMV. They compute what the kernels compute: the same
// integer values and integer block dots, the same float32 operations per
// block in the same order, the same per-lane partial sums (lane l of a warp
// takes units l, l+32, ...) and the same 32-lane xor butterfly; the GEMV
// twin also checks the launch geometry against cuda.Q8Bucket.

func init() {
	register("quantize_q8_1", (*emulator).quantizeQ8)
	register("rms_norm_q8_1", (*emulator).rmsNormQ8)
	register("quantize_q8_k", (*emulator).quantizeQ8)
	register("rms_norm_q8_k", (*emulator).rmsNormQ8)
	// One prefix per type: "gemv_q8_" alone would also catch gemv_q8_0,
	// the float32-activation GEMV of Q8_0 weights.
	for suf := range q8Suffix {
		registerPrefix("gemv_q8_"+suf+"_", (*emulator).gemvQ8)
	}
}

// Q8Row quantizes x (a multiple of 32 values) to one q8_1 row as
// quantize_q8_1 does (layout in kernels/cuda/ops_q8.go); row holds
// cuda.Q8RowBytes(len(x)) bytes (the padding is left as it is).
func Q8Row(x []float32, row []byte) {
	cols := len(x)
	for b := 0; b < cols/32; b++ {
		blk := x[32*b : 32*b+32]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		sum := 0
		for j, v := range blk {
			q := int(math.RoundToEven(float64(float32(v * id))))
			row[32*b+j] = byte(int8(q))
			sum += q
		}
		dh := cpu.F32ToF16(amax / 127)
		sh := cpu.F32ToF16(float32(cpu.F16ToF32(dh) * float32(sum)))
		binary.LittleEndian.PutUint32(row[cols+4*b:], uint32(dh)|uint32(sh)<<16)
	}
}

// Q8KRow quantizes x (a multiple of 256 values) to one q8_K row as
// quantize_q8_k does: kernels/cpu's Q8_K blocks (cpu.Quantize), qs then the
// f32 scales (layout in kernels/cuda/ops_q8.go).
func Q8KRow(x []float32, row []byte) {
	cols := len(x)
	var blk [292]byte // Q8_K: d f32 | qs[256] | bsums[16] int16
	for b := 0; b < cols/256; b++ {
		if err := cpu.Quantize(ggml.TypeQ8_K, x[256*b:256*b+256], blk[:]); err != nil {
			panic("cudaemu: " + err.Error()) // a multiple of 256 values: cannot fail
		}
		copy(row[256*b:256*b+256], blk[4:260])
		copy(row[cols+4*b:cols+4*b+4], blk[:4])
	}
}

// q8Kind returns the activation kind of a quantize/norm kernel name.
func q8Kind(k string) cuda.Q8Kind {
	if strings.HasSuffix(k, "_q8_k") {
		return cuda.Q8K
	}
	return cuda.Q8_1
}

func quantRow(kind cuda.Q8Kind, x []float32, row []byte) {
	if kind == cuda.Q8K {
		Q8KRow(x, row)
	} else {
		Q8Row(x, row)
	}
}

func (e *emulator) quantizeQ8(k string, grid, block cuda.Dim3, a []cuda.Arg) error {
	x, xq := view[float32](e, a[0].Ptr()), view[byte](e, a[1].Ptr())
	rows, cols := a[2].Int(), a[3].Int()
	kind := q8Kind(k)
	per := int(block.X) * 4 // values per block: 4 per thread, or 256 per warp
	if kind == cuda.Q8K {
		per = int(block.X) / 32 * 256
	}
	if int(grid.Y) != rows || int(grid.X)*per < cols {
		return fmt.Errorf("emulator: %s grid %v block %v for %dx%d", k, grid, block, rows, cols)
	}
	rb := cuda.Q8ActRowBytes(kind, cols)
	for r := 0; r < rows; r++ {
		quantRow(kind, x[r*cols:(r+1)*cols], xq[r*rb:(r+1)*rb])
	}
	return nil
}

func (e *emulator) rmsNormQ8(k string, grid, block cuda.Dim3, a []cuda.Arg) error {
	xq, out, x, w := view[byte](e, a[0].Ptr()), view[float32](e, a[1].Ptr()), view[float32](e, a[2].Ptr()), view[float32](e, a[3].Ptr())
	n, eps := a[4].Int(), a[5].Float()
	kind := q8Kind(k)
	rb := cuda.Q8ActRowBytes(kind, n)
	tmp := make([]float32, n)
	for r := 0; r < int(grid.X); r++ {
		var wr []float32
		if w != nil {
			wr = w[:n]
		}
		cpu.RMSNorm(tmp, x[r*n:(r+1)*n], wr, eps)
		if out != nil {
			copy(out[r*n:(r+1)*n], tmp)
		}
		quantRow(kind, tmp, xq[r*rb:(r+1)*rb])
	}
	return nil
}

// q8Unit is one weight unit as the kernel holds it in registers: the
// integer values (offsets already subtracted) and the scales.
type q8Unit struct {
	q       [64]int8
	d, dmin float32
	sc, mn  [2]int32 // Q4_K: scale and min of the two sub-blocks; Q6_K: the two 16-group scales
}

// q8UnitElems is the unit size (elements) of each type: mmvq.cu's UE.
func q8UnitElems(t ggml.Type) int {
	if t == ggml.TypeQ4_K {
		return 64
	}
	return 32
}

// loadQ8Unit transliterates M*::load: unit u of row.
func loadQ8Unit(t ggml.Type, row []byte, u int, w *q8Unit) {
	le := binary.LittleEndian
	switch t {
	case ggml.TypeQ4_0:
		b := row[u*18:]
		w.d = cpu.F16ToF32(le.Uint16(b))
		for j := 0; j < 16; j++ {
			w.q[j] = int8(b[2+j]&15) - 8
			w.q[j+16] = int8(b[2+j]>>4) - 8
		}
	case ggml.TypeQ8_0:
		b := row[u*34:]
		w.d = cpu.F16ToF32(le.Uint16(b))
		for j := 0; j < 32; j++ {
			w.q[j] = int8(b[2+j])
		}
	case ggml.TypeQ4_K:
		b := row[(u>>2)*144:]
		c := u & 3
		w.d, w.dmin = cpu.F16ToF32(le.Uint16(b)), cpu.F16ToF32(le.Uint16(b[2:]))
		qs := b[16+32*c:]
		for l := 0; l < 32; l++ {
			w.q[l] = int8(qs[l] & 15)
			w.q[32+l] = int8(qs[l] >> 4)
		}
		for i := 0; i < 2; i++ {
			w.sc[i], w.mn[i] = scaleMinK4(2*c+i, b[4:16])
		}
	case ggml.TypeQ6_K:
		b := row[(u>>3)*210:]
		j := u & 7
		n, k := j>>2, j&3
		ql, qh := b[64*n+32*(k&1):], b[128+32*n:]
		lsh, hsh := 4*(k>>1), 2*k
		for l := 0; l < 32; l++ {
			w.q[l] = int8(int((ql[l]>>lsh)&15)|int((qh[l]>>hsh)&3)<<4) - 32
		}
		w.sc[0], w.sc[1] = int32(int8(b[192+2*j])), int32(int8(b[193+2*j]))
		w.d = cpu.F16ToF32(le.Uint16(b[208:]))
	}
}

func scaleMinK4(j int, q []byte) (sc, m int32) {
	if j < 4 {
		return int32(q[j] & 63), int32(q[j+4] & 63)
	}
	return int32(q[j+4]&0x0f) | int32(q[j-4]>>6)<<4, int32(q[j+4]>>4) | int32(q[j]>>6)<<4
}

// idot is the exact integer dot of a and b (len(b) >= len(a), a multiple
// of 16).
func idot(a []int8, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	for i := 0; i+3 < len(a); i += 4 {
		s0 += int32(a[i]) * int32(b[i])
		s1 += int32(a[i+1]) * int32(b[i+1])
		s2 += int32(a[i+2]) * int32(b[i+2])
		s3 += int32(a[i+3]) * int32(b[i+3])
	}
	return s0 + s1 + s2 + s3
}

func f32mul(a, b float32) float32 { return float32(a * b) }

// dotQ8Unit transliterates M*::dot: acc updated with unit w against a
// token's activations xq [UE] with the scale xd of each of its q8_1 blocks
// (Q4_0, Q8_0) or of its q8_K block (Q4_K, Q6_K: xd[0]).
func dotQ8Unit(t ggml.Type, w *q8Unit, xq []int8, xd []float32, acc float32) float32 {
	switch t {
	case ggml.TypeQ4_0, ggml.TypeQ8_0:
		s := idot(w.q[:32], xq[:32])
		return float32(acc + f32mul(float32(s), f32mul(w.d, xd[0])))
	case ggml.TypeQ4_K:
		var isum, summs int32
		for i := 0; i < 2; i++ {
			var xs int32
			for _, q := range xq[32*i : 32*i+32] {
				xs += int32(q)
			}
			isum += w.sc[i] * idot(w.q[32*i:32*i+32], xq[32*i:32*i+32])
			summs += w.mn[i] * xs
		}
		tv := float32(f32mul(f32mul(xd[0], w.d), float32(isum)) - f32mul(f32mul(xd[0], w.dmin), float32(summs)))
		return float32(acc + tv)
	case ggml.TypeQ6_K:
		s0, s1 := idot(w.q[:16], xq[:16]), idot(w.q[16:32], xq[16:32])
		return float32(acc + f32mul(f32mul(xd[0], w.d), float32(w.sc[0]*s0+w.sc[1]*s1)))
	}
	panic("cudaemu: no q8 unit for " + t.String())
}

// warpSum is warp_sum: the xor butterfly over 32 lanes. Every lane ends
// with the same value (lanes l and l^o add the same two numbers), so lane
// l < o of each level is enough: v[l] + v[l+o], overwriting v.
func warpSum(v *[32]float32) float32 {
	for o := 16; o > 0; o >>= 1 {
		for l := 0; l < o; l++ {
			v[l] = float32(v[l] + v[l+o])
		}
	}
	return v[0]
}

// q8Suffix maps the gemv_q8_ kernel type names to weight types.
var q8Suffix = map[string]ggml.Type{"q4_0": ggml.TypeQ4_0, "q8_0": ggml.TypeQ8_0, "q4_k": ggml.TypeQ4_K, "q6_k": ggml.TypeQ6_K}

// parseQ8Kernel splits gemv_q8_<type>_t<NT>.
func parseQ8Kernel(k string) (ggml.Type, int, error) {
	rest := strings.TrimPrefix(k, "gemv_q8_")
	i := strings.LastIndex(rest, "_t")
	if i < 0 {
		return 0, 0, fmt.Errorf("emulator: kernel %s: no token bucket", k)
	}
	t, ok := q8Suffix[rest[:i]]
	nt, err := strconv.Atoi(rest[i+2:])
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("emulator: kernel %s not emulated", k)
	}
	return t, nt, nil
}

func (e *emulator) gemvQ8(k string, grid, block cuda.Dim3, a []cuda.Arg) error {
	typ, nt, err := parseQ8Kernel(k)
	if err != nil {
		return err
	}
	rows, cols, ntok, ldy := a[4].Int(), a[5].Int(), a[6].Int(), a[7].Int()
	bnt, rpw := cuda.Q8Bucket(nt)
	warps := int(block.X) / 32
	if bnt != nt || ntok > nt || ntok < 1 || warps != cuda.Q8Warps || int(grid.X) != (rows+warps*rpw-1)/(warps*rpw) {
		return fmt.Errorf("emulator: %s launched with grid %v block %v for %d rows, %d tokens", k, grid, block, rows, ntok)
	}
	W, rb := view[byte](e, a[0].Ptr()), a[1].Uint()
	xq, y := view[byte](e, a[2].Ptr()), view[float32](e, a[3].Ptr())
	ue := q8UnitElems(typ)
	nunits := cols / ue
	kind := cuda.Q8KindOf(typ)
	xs := cuda.Q8ActRowBytes(kind, cols)
	// The activations of each token, decoded once, and the scales each
	// unit reads (xd[u*nb:(u+1)*nb]): its q8_1 blocks' d, or its q8_K
	// block's d.
	nb := ue / 32
	xqs := make([][]int8, ntok)
	xds := make([][]float32, ntok)
	for t := 0; t < ntok; t++ {
		row := xq[t*xs : (t+1)*xs]
		xqs[t] = make([]int8, cols)
		for c := range cols {
			xqs[t][c] = int8(row[c])
		}
		xds[t] = make([]float32, cols/32)
		for b := range xds[t] {
			if kind == cuda.Q8K {
				xds[t][b] = math.Float32frombits(binary.LittleEndian.Uint32(row[cols+4*(32*b/256):]))
			} else {
				xds[t][b] = cpu.F16ToF32(binary.LittleEndian.Uint16(row[cols+4*b:]))
			}
		}
	}
	all := e.q8Units(typ, a[0].Ptr(), W, rb, rows, nunits)
	// Warp w of block b owns rows (warps*b + w)*rpw ...; every row is owned
	// once, so the twin walks the rows in order.
	for r := 0; r < rows; r++ {
		units := all[r*nunits : (r+1)*nunits]
		for t := 0; t < ntok; t++ {
			var lanes [32]float32
			for u := range units {
				lanes[u%32] = dotQ8Unit(typ, &units[u], xqs[t][u*ue:(u+1)*ue], xds[t][u*nb:(u+1)*nb], lanes[u%32])
			}
			y[t*ldy+r] = warpSum(&lanes)
		}
	}
	return nil
}

// q8Units returns the weight units of every row of the matrix at p, loaded
// once and cached (weights never change; the fake never reuses addresses).
func (e *emulator) q8Units(typ ggml.Type, p cuda.DevPtr, W []byte, rb, rows, nunits int) []q8Unit {
	e.mu.Lock()
	defer e.mu.Unlock()
	if u, ok := e.units[p]; ok && len(u) == rows*nunits {
		return u
	}
	u := make([]q8Unit, rows*nunits)
	for r := 0; r < rows; r++ {
		for i := 0; i < nunits; i++ {
			loadQ8Unit(typ, W[r*rb:(r+1)*rb], i, &u[r*nunits+i])
		}
	}
	if e.units == nil {
		e.units = map[cuda.DevPtr][]q8Unit{}
	}
	e.units[p] = u
	return u
}
