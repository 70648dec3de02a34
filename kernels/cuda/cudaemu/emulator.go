// Package cudaemu emulates oengine's CUDA kernels on the CPU: the fake
// driver of kernels/cuda (cuda.OpenFake) plus an executor that computes
// what each kernel of kernels/cuda/kernels/*.cu computes, from its
// arguments in signature order, with kernels/cpu. With it the Go side of
// the GPU backend (the model room's decoder, the engine's CUDA model,
// argument marshalling, buffer sizes, page tables, device page copies,
// graph replay) runs end to end on any machine, in CI and in the engine's
// tests. It is test infrastructure: nothing in a production path opens it.
package cudaemu

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"unsafe"

	"oengine/ggml"
	"oengine/kernels/cpu"
	"oengine/kernels/cuda"
)

// Device is an emulated CUDA device.
type Device struct {
	*cuda.Device
	mem *cuda.FakeMemory
}

// Live returns the number of device allocations not yet freed (a leak
// check for tests).
func (d *Device) Live() int { return d.mem.Live() }

// Open returns an emulated device; Close it when done. lg may be nil.
func Open(lg *slog.Logger) (*Device, error) {
	e := &emulator{dense: map[cuda.DevPtr][]float32{}, mats: map[cuda.DevPtr]cpu.Matrix{}, pool: cpu.NewPool(1)}
	d, mem, err := cuda.OpenFake(e.exec, lg)
	if err != nil {
		return nil, err
	}
	return &Device{Device: d, mem: mem}, nil
}

// twin computes what one kernel family computes, from the launch's grid,
// block and arguments in signature order.
type twin func(e *emulator, k string, grid, block cuda.Dim3, a []cuda.Arg) error

// twins holds the kernels emulated outside this file, by exact name or by
// name prefix (a family such as "gemv_q8_"); each file of twins registers
// them from an init function with register, so adding a family touches no
// shared switch.
var twins = map[string]twin{}
var twinPrefixes = map[string]twin{}

func register(name string, f twin)         { twins[name] = f }
func registerPrefix(prefix string, f twin) { twinPrefixes[prefix] = f }

// lookupTwin returns the registered twin for kernel k, if any; prefixes
// are tried longest first so that "gemv_q8_" wins over "gemv_".
func lookupTwin(k string) (twin, bool) {
	if f, ok := twins[k]; ok {
		return f, true
	}
	best := ""
	for p := range twinPrefixes {
		if strings.HasPrefix(k, p) && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return nil, false
	}
	return twinPrefixes[best], true
}

// Emulated reports whether the emulator implements kernel.
func Emulated(kernel string) bool {
	if emulated[kernel] {
		return true
	}
	if _, ok := lookupTwin(kernel); ok {
		return true
	}
	for _, p := range []string{"gemv_", "get_rows_"} {
		if strings.HasPrefix(kernel, p) {
			_, ok := suffixTypes[strings.TrimPrefix(kernel, p)]
			return ok
		}
	}
	return false
}

var emulated = map[string]bool{kRMSNorm: true, kAdd: true, kAddBias: true, kSiLUMul: true, kSiLUMulSplit: true,
	kRopeKVWrite: true, kRopeInplace: true, kAttnDecode: true, kAttnCombine: true, kAttnPrefill: true,
	kGatherRows: true, kF32ToF16: true, kArgmax: true, kSampleTopKTopP: true}

// Kernel names (extern "C" in kernels/cuda/kernels/*.cu).
const (
	kRMSNorm        = "rms_norm"
	kAdd            = "add_f32"
	kAddBias        = "add_bias"
	kSiLUMul        = "silu_mul"
	kSiLUMulSplit   = "silu_mul_split"
	kRopeKVWrite    = "rope_kv_write"
	kRopeInplace    = "rope_inplace"
	kAttnDecode     = "attn_decode_f16"
	kAttnCombine    = "attn_combine"
	kAttnPrefill    = "attn_prefill_f16"
	kArgmax         = "argmax_f32"
	kSampleTopKTopP = "sample_topk_topp"
	kF32ToF16       = "f32_to_f16"
	kGatherRows     = "gather_rows_f32"
)

type emulator struct {
	mem   *cuda.FakeMemory           // set at the first launch
	mu    sync.Mutex                 // protects dense, mats, mma and units (launches come from one goroutine; graphs replay on it too)
	dense map[cuda.DevPtr][]float32  // dequantized weights by address (weights never change; the fake never reuses addresses)
	mats  map[cuda.DevPtr]cpu.Matrix // the same as F32 matrices
	mma   map[cuda.DevPtr]cpu.Matrix // the same rounded to F16 (gemm_mma twin, emulator_mma.go)
	units map[cuda.DevPtr][]q8Unit   // the int8 GEMV's weight units (emulator_q8.go)
	pool  *cpu.Pool                  // one thread: runs on the device goroutine
	// scratch for cpu.Attend (the prefill kernel's twin: float32 dots, a
	// two-pass softmax, float32 accumulation).
	scratch []float32
}

// matrix returns the weights at p decoded to an F32 cpu.Matrix (cached):
// the GEMV kernels' result within float32 rounding, at SIMD speed.
func (e *emulator) matrix(typ ggml.Type, p cuda.DevPtr, rb, rows, cols int) (cpu.Matrix, error) {
	w := e.weights(typ, p, rb, rows, cols)
	e.mu.Lock()
	defer e.mu.Unlock()
	if m, ok := e.mats[p]; ok && m.Rows == rows && m.Cols == cols {
		return m, nil
	}
	m, err := cpu.NewMatrix(ggml.TypeF32, rows, cols, unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w)))
	if err != nil {
		return m, err
	}
	e.mats[p] = m
	return m, nil
}

// weights returns the rows×cols matrix at p decoded to float32, cached.
func (e *emulator) weights(typ ggml.Type, p cuda.DevPtr, rb, rows, cols int) []float32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if w, ok := e.dense[p]; ok && len(w) == rows*cols {
		return w
	}
	W := view[byte](e, p)
	w := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		cpu.Dequantize(typ, W[r*rb:(r+1)*rb], w[r*cols:(r+1)*cols])
	}
	e.dense[p] = w
	return w
}

func view[T any](e *emulator, p cuda.DevPtr) []T {
	b := e.mem.Bytes(p)
	if len(b) == 0 {
		return nil
	}
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

var suffixTypes = map[string]ggml.Type{"f32": ggml.TypeF32, "f16": ggml.TypeF16, "bf16": ggml.TypeBF16,
	"q8_0": ggml.TypeQ8_0, "q4_0": ggml.TypeQ4_0, "q4_k": ggml.TypeQ4_K, "q6_k": ggml.TypeQ6_K}

func typeOf(k, prefix string) ggml.Type {
	return suffixTypes[strings.TrimPrefix(k, prefix)]
}

func ropeCS(pos int32, nRot int, thetaScale, freqScale float32, factors []float32) []float32 {
	cs := make([]float32, nRot)
	for j := 0; j < nRot/2; j++ {
		theta := float32(pos)
		for i := 0; i < j; i++ {
			theta = float32(theta * thetaScale)
		}
		if factors != nil {
			theta = float32(theta / factors[j])
		}
		theta = float32(freqScale * theta)
		cs[2*j], cs[2*j+1] = float32(math.Cos(float64(theta))), float32(math.Sin(float64(theta)))
	}
	return cs
}

func (e *emulator) exec(mem *cuda.FakeMemory, k string, grid, block cuda.Dim3, shmem uint32, a []cuda.Arg) error {
	e.mem = mem
	if f, ok := lookupTwin(k); ok {
		return f(e, k, grid, block, a)
	}
	switch {
	case k == kRMSNorm:
		n := a[3].Int()
		out, x, w := view[float32](e, a[0].Ptr()), view[float32](e, a[1].Ptr()), view[float32](e, a[2].Ptr())
		for r := 0; r < int(grid.X); r++ {
			var wr []float32
			if w != nil {
				wr = w[:n]
			}
			cpu.RMSNorm(out[r*n:(r+1)*n], x[r*n:(r+1)*n], wr, a[4].Float())
		}
	case k == kAdd:
		out, x, y := view[float32](e, a[0].Ptr()), view[float32](e, a[1].Ptr()), view[float32](e, a[2].Ptr())
		for i := 0; i < a[3].Uint(); i++ {
			out[i] = x[i] + y[i]
		}
	case k == kAddBias:
		x, b := view[float32](e, a[0].Ptr()), view[float32](e, a[1].Ptr())
		rows, n := a[2].Int(), a[3].Int()
		for i := 0; i < rows*n; i++ {
			x[i] += b[i%n]
		}
	case k == kSiLUMul:
		n := a[3].Uint()
		cpu.SwiGLU(view[float32](e, a[0].Ptr())[:n], view[float32](e, a[1].Ptr())[:n], view[float32](e, a[2].Ptr())[:n])
	case k == kSiLUMulSplit:
		out, in := view[float32](e, a[0].Ptr()), view[float32](e, a[1].Ptr())
		rows, ffn := a[2].Int(), a[3].Int()
		for r := 0; r < rows; r++ {
			cpu.SwiGLU(out[r*ffn:(r+1)*ffn], in[2*r*ffn:2*r*ffn+ffn], in[2*r*ffn+ffn:2*(r+1)*ffn])
		}
	case k == kRopeKVWrite || k == kRopeInplace:
		return e.rope(k, int(grid.X), a)
	case k == kAttnDecode:
		return e.attnDecode(grid, a)
	case k == kAttnCombine:
		pml, pacc, out := view[float32](e, a[0].Ptr()), view[float32](e, a[1].Ptr()), view[float32](e, a[2].Ptr())
		nsplit, D := a[3].Int(), a[4].Int()
		for r := 0; r < int(grid.X); r++ {
			M := math.Inf(-1)
			for s := 0; s < nsplit; s++ {
				M = math.Max(M, float64(pml[(r*nsplit+s)*2]))
			}
			var L float64
			for s := 0; s < nsplit; s++ {
				L += float64(pml[(r*nsplit+s)*2+1]) * math.Exp(float64(pml[(r*nsplit+s)*2])-M)
			}
			for d := 0; d < D; d++ {
				var acc float64
				for s := 0; s < nsplit; s++ {
					acc += float64(pacc[(r*nsplit+s)*D+d]) * math.Exp(float64(pml[(r*nsplit+s)*2])-M)
				}
				out[r*D+d] = float32(acc / L)
			}
		}
	case k == kAttnPrefill:
		return e.attnPrefill(grid, a)
	case k == kGatherRows:
		out, in, idx := view[float32](e, a[0].Ptr()), view[float32](e, a[1].Ptr()), view[int32](e, a[2].Ptr())
		cols := a[3].Int()
		for i := 0; i < int(grid.X); i++ {
			copy(out[i*cols:(i+1)*cols], in[int(idx[i])*cols:(int(idx[i])+1)*cols])
		}
	case k == kF32ToF16:
		x, y := view[float32](e, a[0].Ptr()), view[uint16](e, a[1].Ptr())
		for i := 0; i < a[2].Uint(); i++ {
			y[i] = cpu.F32ToF16(x[i])
		}
	case k == kArgmax:
		x, out := view[float32](e, a[0].Ptr()), view[int32](e, a[2].Ptr())
		vocab := a[1].Int()
		for r := 0; r < int(grid.X); r++ {
			out[r] = cuda.ArgmaxRef(x[r*vocab : (r+1)*vocab])
		}
	case k == kSampleTopKTopP:
		x, vocab := view[float32](e, a[0].Ptr()), a[1].Int()
		temp, topk, topp, u, out := view[float32](e, a[2].Ptr()), view[int32](e, a[3].Ptr()), view[float32](e, a[4].Ptr()), view[float32](e, a[5].Ptr()), view[int32](e, a[6].Ptr())
		for r := 0; r < int(grid.X); r++ {
			out[r], _, _ = cuda.SampleRef(x[r*vocab:(r+1)*vocab], temp[r], int(topk[r]), topp[r], u[r])
		}
	case strings.HasPrefix(k, "gemv_"):
		typ := typeOf(k, "gemv_")
		x, y := view[float32](e, a[2].Ptr()), view[float32](e, a[3].Ptr())
		rows, cols, ntok, ldy := a[4].Int(), a[5].Int(), a[6].Int(), a[7].Int()
		w, err := e.matrix(typ, a[0].Ptr(), a[1].Uint(), rows, cols)
		if err != nil {
			return err
		}
		if ldy == rows {
			e.pool.MatMul(y[:ntok*rows], w, x[:ntok*cols], ntok)
			break
		}
		out := make([]float32, rows)
		for t := 0; t < ntok; t++ {
			e.pool.MatMul(out, w, x[t*cols:(t+1)*cols], 1)
			copy(y[t*ldy:t*ldy+rows], out)
		}
	case strings.HasPrefix(k, "get_rows_"):
		typ := typeOf(k, "get_rows_")
		W, rb := view[byte](e, a[0].Ptr()), a[1].Uint()
		ids, out := view[int32](e, a[2].Ptr()), view[float32](e, a[3].Ptr())
		n, rows, cols := a[4].Int(), a[5].Int(), a[6].Int()
		for i := 0; i < n; i++ {
			o := out[i*cols : (i+1)*cols]
			if id := int(ids[i]); id >= 0 && id < rows {
				if err := cpu.Dequantize(typ, W[id*rb:(id+1)*rb], o); err != nil {
					return err
				}
			} else {
				clear(o)
			}
		}
	default:
		return fmt.Errorf("emulator: kernel %s not emulated", k)
	}
	return nil
}

func (e *emulator) rope(k string, T int, a []cuda.Arg) error {
	if k == kRopeInplace {
		x, pos := view[float32](e, a[0].Ptr()), view[int32](e, a[1].Ptr())
		H, D, nRot := a[2].Int(), a[3].Int(), a[4].Int()
		factors := view[float32](e, a[7].Ptr())
		for t := 0; t < T; t++ {
			cpu.Rope(x[t*H*D:(t+1)*H*D], H, D, nRot, ropeCS(pos[t], nRot, a[5].Float(), a[6].Float(), factors), a[8].Int() != 0)
		}
		return nil
	}
	q, kk, v := view[float32](e, a[0].Ptr()), view[float32](e, a[1].Ptr()), view[float32](e, a[2].Ptr())
	kc, vc := view[uint16](e, a[3].Ptr()), view[uint16](e, a[4].Ptr())
	pos, slot := view[int32](e, a[5].Ptr()), view[int32](e, a[6].Ptr())
	Hq, Hk, D, nRot := a[7].Int(), a[8].Int(), a[9].Int(), a[10].Int()
	factors := view[float32](e, a[13].Ptr())
	neox := a[14].Int() != 0
	for t := 0; t < T; t++ {
		cs := ropeCS(pos[t], nRot, a[11].Float(), a[12].Float(), factors)
		cpu.Rope(q[t*Hq*D:(t+1)*Hq*D], Hq, D, nRot, cs, neox)
		kt := kk[t*Hk*D : (t+1)*Hk*D]
		cpu.Rope(kt, Hk, D, nRot, cs, neox)
		if s := int(slot[t]); s >= 0 {
			cpu.StoreRowF16(kc[s*Hk*D:(s+1)*Hk*D], kt)
			cpu.StoreRowF16(vc[s*Hk*D:(s+1)*Hk*D], v[t*Hk*D:(t+1)*Hk*D])
		}
	}
	return nil
}

func (e *emulator) attnDecode(grid cuda.Dim3, a []cuda.Arg) error {
	q, kc, vc := view[float32](e, a[0].Ptr()), view[uint16](e, a[1].Ptr()), view[uint16](e, a[2].Ptr())
	tables, maxPages := view[int32](e, a[3].Ptr()), a[4].Int()
	seq, npos := view[int32](e, a[5].Ptr()), view[int32](e, a[6].Ptr())
	Hq, Hk, D, pageSize, splitLen := a[7].Int(), a[8].Int(), a[9].Int(), a[10].Int(), a[11].Int()
	scale := float64(a[12].Float())
	pml, pacc := view[float32](e, a[13].Ptr()), view[float32](e, a[14].Ptr())
	nsplit, G := int(grid.Y), Hq/Hk
	T := int(grid.X) / Hk
	for t := 0; t < T; t++ {
		table := tables[int(seq[t])*maxPages:]
		for kh := 0; kh < Hk; kh++ {
			for split := 0; split < nsplit; split++ {
				start, end := split*splitLen, min(int(npos[t]), (split+1)*splitLen)
				for h := 0; h < G; h++ {
					row := (t*Hq+kh*G+h)*nsplit + split
					qh := q[(t*Hq+kh*G+h)*D:]
					scores := make([]float64, 0, max(0, end-start))
					m := math.Inf(-1)
					for p := start; p < end; p++ {
						slot := int(table[p/pageSize])*pageSize + p%pageSize
						var s float64
						for d := 0; d < D; d++ {
							s += float64(qh[d]) * float64(cpu.F16ToF32(kc[slot*Hk*D+kh*D+d]))
						}
						s *= scale
						scores = append(scores, s)
						m = math.Max(m, s)
					}
					var l float64
					acc := make([]float64, D)
					for i, s := range scores {
						p := start + i
						slot := int(table[p/pageSize])*pageSize + p%pageSize
						w := math.Exp(s - m)
						l += w
						for d := 0; d < D; d++ {
							acc[d] += w * float64(cpu.F16ToF32(vc[slot*Hk*D+kh*D+d]))
						}
					}
					pml[row*2], pml[row*2+1] = float32(m), float32(l)
					for d := 0; d < D; d++ {
						pacc[row*D+d] = float32(acc[d])
					}
				}
			}
		}
	}
	return nil
}

func (e *emulator) attnPrefill(grid cuda.Dim3, a []cuda.Arg) error {
	q, kc, vc := view[float32](e, a[0].Ptr()), view[uint16](e, a[1].Ptr()), view[uint16](e, a[2].Ptr())
	tables, maxPages := view[int32](e, a[3].Ptr()), a[4].Int()
	seq, npos := view[int32](e, a[5].Ptr()), view[int32](e, a[6].Ptr())
	tstart, tlen := view[int32](e, a[7].Ptr()), view[int32](e, a[8].Ptr())
	Hq, Hk, D, pageSize := a[9].Int(), a[10].Int(), a[11].Int(), a[12].Int()
	scale := a[13].Float()
	out := view[float32](e, a[14].Ptr())
	G := Hq / Hk
	k := cpu.KVRows{F16: kc, PageSize: pageSize, Stride: Hk * D}
	v := cpu.KVRows{F16: vc, PageSize: pageSize, Stride: Hk * D}
	for tile := 0; tile < int(grid.X); tile++ {
		for t := int(tstart[tile]); t < int(tstart[tile]+tlen[tile]); t++ {
			if seq[t] != seq[tstart[tile]] {
				return fmt.Errorf("emulator: tile %d mixes sequences", tile)
			}
			table := tables[int(seq[t])*maxPages : (int(seq[t])+1)*maxPages]
			if need := cpu.AttnScratch(G, int(npos[t]), D); len(e.scratch) < need {
				e.scratch = make([]float32, need)
			}
			for kh := 0; kh < int(grid.Y); kh++ {
				o := out[(t*Hq+kh*G)*D : (t*Hq+(kh+1)*G)*D]
				cpu.Attend(o, q[(t*Hq+kh*G)*D:(t*Hq+(kh+1)*G)*D], G, k, v, table, int(npos[t]), kh*D, scale, e.scratch)
			}
		}
	}
	return nil
}
