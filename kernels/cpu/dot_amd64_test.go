package cpu

import (
	"fmt"
	"sync"
	"testing"

	"oengine/ggml"
)

// TestSIMDSelected: on a CPU with AVX2, MatMul must use the SIMD kernels.
func TestSIMDSelected(t *testing.T) {
	t.Logf("AVX2 kernels: %v", hasAVX2)
	if !hasAVX2 {
		t.Skip("no AVX2+FMA+F16C")
	}
	for typ := range simdKernels {
		if fmt.Sprintf("%p", kernels[typ].dot) == fmt.Sprintf("%p", portable[typ].dot) {
			t.Errorf("%s: MatMul uses the portable kernel", typ)
		}
		if kernels[typ].dot4 == nil && kernels[typ].blk == nil && typ != ggml.TypeF32 && typ != ggml.TypeBF16 {
			t.Errorf("%s: no multi-token kernel", typ)
		}
	}
}

// BenchmarkDecodeDRAM: one token against a matrix of each decode type far
// larger than the last-level cache (about 160 MB, 2048 columns), single
// thread, side by side (passes alternate between the variants; each
// reports its fastest pass in GB/s of weights):
//
//	read  32-byte loads of the same bytes with prefetch (the ceiling)
//	old   the previous decode path: the one-row kernel called per row
//	new   the decode path MatMul uses now (blkDotRows, rowsKernels)
//
// then the same with two threads, each on half of the rows (TYPE/2threads).
//
// Run: go test ./kernels/cpu -run '^$' -bench DecodeDRAM -benchtime 10x
func BenchmarkDecodeDRAM(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2")
	}
	for _, typ := range []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeQ6_K, ggml.TypeF16} {
		db := newDecodeBench(b, typ, 2048)
		var sink uint64
		vs := []variant{
			{"read", func() { sink += readAVX2(&db.w.Data[0], len(db.w.Data)&^127, 2048) }},
			{"old", db.oldPath()},
			{"new", db.newPath(-1)},
		}
		b.Run(typ.String(), func(b *testing.B) { roundRobin(b, len(db.w.Data), 1, vs) })
		// Two threads, each on its half of the rows (as decode runs with
		// --threads 2), against a two-thread read.
		halves := db.split(2)
		vs2 := make([]variant, 3)
		for j, name := range []string{"read", "old", "new"} {
			fns := make([]func(), len(halves))
			for h, hb := range halves {
				switch name {
				case "read":
					fns[h] = func() { sinks[h] += readAVX2(&hb.w.Data[0], len(hb.w.Data)&^127, 2048) }
				case "old":
					fns[h] = hb.oldPath()
				default:
					fns[h] = hb.newPath(-1)
				}
			}
			vs2[j] = variant{name, parallel(fns)}
		}
		b.Run(typ.String()+"/2threads", func(b *testing.B) { roundRobin(b, len(db.w.Data), 1, vs2) })
		_ = sink
		delete(benchMatrices, fmt.Sprint(typ, db.w.Rows, db.w.Cols)) // 160 MB each
	}
}

var sinks [2]uint64

// parallel returns a function that runs fns on their own goroutines and
// waits for all of them.
func parallel(fns []func()) func() {
	return func() {
		var wg sync.WaitGroup
		for _, fn := range fns {
			wg.Go(fn)
		}
		wg.Wait()
	}
}
