package cpu

import (
	"fmt"
	"testing"

	"oengine/ggml"
)

// TestGemvZ runs the decode-kernel tests with the 16-row AVX-512 VNNI Q4_0
// kernel switched off and on: in both cases every row must carry exactly
// the bits of the one-row kernel blkDot1 (random rows, row counts that
// leave 8-row groups and single rows after the 16-row groups, extreme
// block sums).
func TestGemvZ(t *testing.T) {
	if !hasBlkZ || !blkActive {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	defer func(v bool) { gemvZ = v }(gemvZ)
	for _, on := range []bool{false, true} {
		gemvZ = on
		t.Run(fmt.Sprint("gemvZ=", on), func(t *testing.T) {
			t.Run("random", TestGemv8)
			t.Run("extremes", TestGemv8Extremes)
		})
	}
}

// TestGemvZInstalled: on a CPU with AVX-512 VNNI, Q4_0 decode takes the
// 16-row kernel.
func TestGemvZInstalled(t *testing.T) {
	if hasBlkZ && hasAVX2 && !gemvZ {
		t.Fatal("AVX-512 VNNI present but the 16-row Q4_0 decode kernel is off")
	}
}

// BenchmarkGemvZ: Q4_0 decode, the 16-row AVX-512 VNNI kernel against the
// 8-row AVX2 one, side by side (GB/s of weights, fastest pass): from DRAM
// (160 MB, one and two threads, with the read ceiling) and from cache (the
// first 1 MiB of rows, the kernels' compute rate).
//
// Run: go test ./kernels/cpu -run '^$' -bench GemvZ -benchtime 10x
func BenchmarkGemvZ(b *testing.B) {
	if !hasBlkZ || !blkActive {
		b.Skip("no AVX-512 VNNI on this CPU")
	}
	defer func(v bool) { gemvZ = v }(gemvZ)
	for _, cols := range []int{2048, 5632} {
		db := newDecodeBench(b, ggml.TypeQ4_0, cols)
		with := func(on bool, fn func()) func() { return func() { gemvZ = on; fn() } }
		var sink uint64
		vs := []variant{
			{"read", func() { sink += readAVX2(&db.w.Data[0], len(db.w.Data)&^127, 2048) }},
			{"avx2", with(false, db.newPath(-1))},
			{"zmm", with(true, db.newPath(-1))},
		}
		b.Run(fmt.Sprintf("DRAM/%d", cols), func(b *testing.B) { roundRobin(b, len(db.w.Data), 1, vs) })
		halves := db.split(2)
		vs2 := make([]variant, 3)
		for j, name := range []string{"read", "avx2", "zmm"} {
			fns := make([]func(), len(halves))
			for h, hb := range halves {
				if name == "read" {
					fns[h] = func() { sinks[h] += readAVX2(&hb.w.Data[0], len(hb.w.Data)&^127, 2048) }
				} else {
					fns[h] = hb.newPath(-1)
				}
			}
			vs2[j] = variant{name, with(name == "zmm", parallel(fns))}
		}
		b.Run(fmt.Sprintf("DRAM/%d/2threads", cols), func(b *testing.B) { roundRobin(b, len(db.w.Data), 1, vs2) })
		small := *db
		rows := (256 << 10) / db.rb &^ 15
		small.w.Rows, small.w.Data, small.out = rows, db.w.Data[:rows*db.rb], db.out[:rows]
		vs3 := []variant{{"avx2", with(false, small.newPath(-1))}, {"zmm", with(true, small.newPath(-1))}}
		b.Run(fmt.Sprintf("cache/%d", cols), func(b *testing.B) { roundRobin(b, len(small.w.Data), 20, vs3) })
		_ = sink
		delete(benchMatrices, fmt.Sprint(ggml.TypeQ4_0, db.w.Rows, db.w.Cols))
	}
}
