package cuda

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"unsafe"

	"oengine/ggml"
	"oengine/kernels/cpu"
)

// A CPU emulator of the kernels: the fake driver's memory plus a launch
// hook that computes what each kernel computes (from its arguments, in the
// signature order of kernels/*.cu) with kernels/cpu. With it the Go side of
// the backend (Decoder, ops, argument marshalling, buffer sizes, page
// tables, tiles) runs end to end on any machine.

type emulator struct {
	f     *fakeDriver
	dense map[DevPtr][]float32 // dequantized weights by address (weights never change)
}

// weights returns the rows×cols matrix at p decoded to float32, cached.
func (e *emulator) weights(typ ggml.Type, p DevPtr, rb, rows, cols int) []float32 {
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

// rest returns the bytes from p to the end of its allocation.
func (e *emulator) rest(p DevPtr) []byte {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	for base, b := range e.f.mem {
		if p >= base && uint64(p-base) < uint64(len(b)) {
			return b[p-base:]
		}
	}
	panic(fmt.Sprintf("emulator: address %#x is not allocated", uint64(p)))
}

func view[T any](e *emulator, p DevPtr) []T {
	if p == 0 {
		return nil
	}
	b := e.rest(p)
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

func (a Arg) ptr() DevPtr  { return DevPtr(a.v) }
func (a Arg) i() int       { return int(int32(uint32(a.v))) }
func (a Arg) u() int       { return int(a.v) }
func (a Arg) f() float32   { return math.Float32frombits(uint32(a.v)) }
func (a Arg) isNull() bool { return a.v == 0 }

var suffixTypes = map[string]ggml.Type{"f32": ggml.TypeF32, "f16": ggml.TypeF16, "bf16": ggml.TypeBF16,
	"q8_0": ggml.TypeQ8_0, "q4_0": ggml.TypeQ4_0, "q4_k": ggml.TypeQ4_K, "q6_k": ggml.TypeQ6_K}

func typeOf(k kernelName, prefix string) ggml.Type {
	return suffixTypes[strings.TrimPrefix(string(k), prefix)]
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

// launch executes kernel k on the emulated memory, or records it into the
// graph being captured.
func (e *emulator) launch(k kernelName, grid, block Dim3, shmem uint32, a []Arg) error {
	e.f.mu.Lock()
	capturing := e.f.capture
	if capturing {
		args := append([]Arg(nil), a...)
		e.f.recording = append(e.f.recording, func() error { return e.exec(k, grid, block, shmem, args) })
	}
	e.f.mu.Unlock()
	if capturing {
		return nil
	}
	return e.exec(k, grid, block, shmem, a)
}

func (e *emulator) exec(k kernelName, grid, block Dim3, shmem uint32, a []Arg) error {
	switch {
	case k == kRMSNorm:
		n := a[3].i()
		out, x, w := view[float32](e, a[0].ptr()), view[float32](e, a[1].ptr()), view[float32](e, a[2].ptr())
		for r := 0; r < int(grid.X); r++ {
			var wr []float32
			if w != nil {
				wr = w[:n]
			}
			cpu.RMSNorm(out[r*n:(r+1)*n], x[r*n:(r+1)*n], wr, a[4].f())
		}
	case k == kAdd:
		out, x, y := view[float32](e, a[0].ptr()), view[float32](e, a[1].ptr()), view[float32](e, a[2].ptr())
		for i := 0; i < a[3].u(); i++ {
			out[i] = x[i] + y[i]
		}
	case k == kAddBias:
		x, b := view[float32](e, a[0].ptr()), view[float32](e, a[1].ptr())
		rows, n := a[2].i(), a[3].i()
		for i := 0; i < rows*n; i++ {
			x[i] += b[i%n]
		}
	case k == kSiLUMul:
		n := a[3].u()
		cpu.SwiGLU(view[float32](e, a[0].ptr())[:n], view[float32](e, a[1].ptr())[:n], view[float32](e, a[2].ptr())[:n])
	case k == kSiLUMulSplit:
		out, in := view[float32](e, a[0].ptr()), view[float32](e, a[1].ptr())
		rows, ffn := a[2].i(), a[3].i()
		for r := 0; r < rows; r++ {
			cpu.SwiGLU(out[r*ffn:(r+1)*ffn], in[2*r*ffn:2*r*ffn+ffn], in[2*r*ffn+ffn:2*(r+1)*ffn])
		}
	case k == kRopeKVWrite || k == kRopeInplace:
		return e.rope(k, int(grid.X), a)
	case k == kAttnDecode:
		return e.attnDecode(grid, a)
	case k == kAttnCombine:
		pml, pacc, out := view[float32](e, a[0].ptr()), view[float32](e, a[1].ptr()), view[float32](e, a[2].ptr())
		nsplit, D := a[3].i(), a[4].i()
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
		out, in, idx := view[float32](e, a[0].ptr()), view[float32](e, a[1].ptr()), view[int32](e, a[2].ptr())
		cols := a[3].i()
		for i := 0; i < int(grid.X); i++ {
			copy(out[i*cols:(i+1)*cols], in[int(idx[i])*cols:(int(idx[i])+1)*cols])
		}
	case k == kF32ToF16:
		x, y := view[float32](e, a[0].ptr()), view[uint16](e, a[1].ptr())
		for i := 0; i < a[2].u(); i++ {
			y[i] = cpu.F32ToF16(x[i])
		}
	case k == kArgmax:
		x, out := view[float32](e, a[0].ptr()), view[int32](e, a[2].ptr())
		vocab := a[1].i()
		for r := 0; r < int(grid.X); r++ {
			out[r] = ArgmaxRef(x[r*vocab : (r+1)*vocab])
		}
	case k == kSampleTopKTopP:
		x, vocab := view[float32](e, a[0].ptr()), a[1].i()
		temp, topk, topp, u, out := view[float32](e, a[2].ptr()), view[int32](e, a[3].ptr()), view[float32](e, a[4].ptr()), view[float32](e, a[5].ptr()), view[int32](e, a[6].ptr())
		for r := 0; r < int(grid.X); r++ {
			out[r], _, _ = SampleRef(x[r*vocab:(r+1)*vocab], temp[r], int(topk[r]), topp[r], u[r])
		}
	case strings.HasPrefix(string(k), "gemv_"):
		typ := typeOf(k, "gemv_")
		x, y := view[float32](e, a[2].ptr()), view[float32](e, a[3].ptr())
		rows, cols, ntok, ldy := a[4].i(), a[5].i(), a[6].i(), a[7].i()
		w := e.weights(typ, a[0].ptr(), a[1].u(), rows, cols)
		for t := 0; t < ntok; t++ {
			xt := x[t*cols : (t+1)*cols]
			for r := 0; r < rows; r++ {
				var s float64
				for c, wv := range w[r*cols : (r+1)*cols] {
					s += float64(wv) * float64(xt[c])
				}
				y[t*ldy+r] = float32(s)
			}
		}
	case strings.HasPrefix(string(k), "get_rows_"):
		typ := typeOf(k, "get_rows_")
		W, rb := view[byte](e, a[0].ptr()), a[1].u()
		ids, out := view[int32](e, a[2].ptr()), view[float32](e, a[3].ptr())
		n, rows, cols := a[4].i(), a[5].i(), a[6].i()
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
	case strings.HasPrefix(string(k), "dequant_f16_"):
		typ := typeOf(k, "dequant_f16_")
		W, rb, out := view[byte](e, a[0].ptr()), a[1].u(), view[uint16](e, a[2].ptr())
		rows, cols := a[3].i(), a[4].i()
		row := make([]float32, cols)
		for r := 0; r < rows; r++ {
			cpu.Dequantize(typ, W[r*rb:(r+1)*rb], row)
			cpu.StoreRowF16(out[r*cols:(r+1)*cols], row)
		}
	default:
		return fmt.Errorf("emulator: kernel %s not emulated", k)
	}
	return nil
}

func (e *emulator) rope(k kernelName, T int, a []Arg) error {
	if k == kRopeInplace {
		x, pos := view[float32](e, a[0].ptr()), view[int32](e, a[1].ptr())
		H, D, nRot := a[2].i(), a[3].i(), a[4].i()
		factors := view[float32](e, a[7].ptr())
		for t := 0; t < T; t++ {
			cpu.Rope(x[t*H*D:(t+1)*H*D], H, D, nRot, ropeCS(pos[t], nRot, a[5].f(), a[6].f(), factors), a[8].i() != 0)
		}
		return nil
	}
	q, kk, v := view[float32](e, a[0].ptr()), view[float32](e, a[1].ptr()), view[float32](e, a[2].ptr())
	kc, vc := view[uint16](e, a[3].ptr()), view[uint16](e, a[4].ptr())
	pos, slot := view[int32](e, a[5].ptr()), view[int32](e, a[6].ptr())
	Hq, Hk, D, nRot := a[7].i(), a[8].i(), a[9].i(), a[10].i()
	factors := view[float32](e, a[13].ptr())
	neox := a[14].i() != 0
	for t := 0; t < T; t++ {
		cs := ropeCS(pos[t], nRot, a[11].f(), a[12].f(), factors)
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

func (e *emulator) attnDecode(grid Dim3, a []Arg) error {
	q, kc, vc := view[float32](e, a[0].ptr()), view[uint16](e, a[1].ptr()), view[uint16](e, a[2].ptr())
	tables, maxPages := view[int32](e, a[3].ptr()), a[4].i()
	seq, npos := view[int32](e, a[5].ptr()), view[int32](e, a[6].ptr())
	Hq, Hk, D, pageSize, splitLen := a[7].i(), a[8].i(), a[9].i(), a[10].i(), a[11].i()
	scale := float64(a[12].f())
	pml, pacc := view[float32](e, a[13].ptr()), view[float32](e, a[14].ptr())
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

func (e *emulator) attnPrefill(grid Dim3, a []Arg) error {
	q, kc, vc := view[float32](e, a[0].ptr()), view[uint16](e, a[1].ptr()), view[uint16](e, a[2].ptr())
	tables, maxPages := view[int32](e, a[3].ptr()), a[4].i()
	seq, npos := view[int32](e, a[5].ptr()), view[int32](e, a[6].ptr())
	tstart, tlen := view[int32](e, a[7].ptr()), view[int32](e, a[8].ptr())
	Hq, Hk, D, pageSize := a[9].i(), a[10].i(), a[11].i(), a[12].i()
	scale := a[13].f()
	out := view[float32](e, a[14].ptr())
	G := Hq / Hk
	k := cpu.KVRows{F16: kc, PageSize: pageSize, Stride: Hk * D}
	v := cpu.KVRows{F16: vc, PageSize: pageSize, Stride: Hk * D}
	for tile := 0; tile < int(grid.X); tile++ {
		for t := int(tstart[tile]); t < int(tstart[tile]+tlen[tile]); t++ {
			if seq[t] != seq[tstart[tile]] {
				return fmt.Errorf("emulator: tile %d mixes sequences", tile)
			}
			table := tables[int(seq[t])*maxPages : (int(seq[t])+1)*maxPages]
			for kh := 0; kh < int(grid.Y); kh++ {
				o := out[(t*Hq+kh*G)*D : (t*Hq+(kh+1)*G)*D]
				cpu.AttendRef(o, q[(t*Hq+kh*G)*D:(t*Hq+(kh+1)*G)*D], G, k, v, table, int(npos[t]), kh*D, scale)
			}
		}
	}
	return nil
}

// NewEmulatedDevice returns a Device whose kernels run on the CPU
// emulator (for tests of code above the kernels, in this package and in
// cuda_test).
func NewEmulatedDevice(t testing.TB) *Device {
	t.Helper()
	f := newFakeDriver()
	e := &emulator{f: f, dense: map[DevPtr][]float32{}}
	var n int
	d, err := openWith(Info{Name: "emulated", Major: 9}, libs{drv: f.api(), compile: fakeCompile(&n), nvrtcVersion: "emu", onLaunch: e.launch},
		Options{CacheDir: "off"}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
