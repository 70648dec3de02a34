package cpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

func skipNoQ4Z(t testing.TB) {
	if !q4zActive() {
		t.Skip("no AVX-512 VNNI kernels on this CPU")
	}
}

// TestQ4ZPackRoundTrip: testPackRoundTrip for PackQ4_0Decode, and a
// non-Q4_0 matrix is not packed.
func TestQ4ZPackRoundTrip(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(91, 92))
	testPackRoundTrip(t, rng, ggml.TypeQ4_0, PackQ4_0Decode, []struct{ rows, cols int }{{16, 32}, {37, 256}, {64, 2048}, {50, 96}})
	f16 := randomMatrix(t, rng, ggml.TypeF16, 32, 64)
	if _, ok := PackQ4_0Decode(f16, make([]byte, len(f16.Data))); ok {
		t.Fatal("F16 matrix packed")
	}
}

// TestQ4ZPanel: a group unpacks into exactly the panel bytes that its
// row-major rows pack into (Go twin and assembly).
func TestQ4ZPanel(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(93, 94))
	w := randomMatrix(t, rng, ggml.TypeQ4_0, 16, 512)
	rb, nb := w.rowBytes(), 512/qk
	pk, _ := PackQ4_0Decode(w, make([]byte, len(w.Data)))
	want := make([]byte, nb*panelBlockZ)
	packPanelZ(kernels[ggml.TypeQ4_0].blk, want, w.Data, rb, nb)
	got := make([]byte, nb*panelBlockZ)
	packPanelFromQ4Z(got, pk.Data, nb)
	if !bytes.Equal(got, want) {
		t.Fatal("panel from the decode layout differs from the row-major panel")
	}
}

// TestQ4ZGemv: the decode-layout kernel gives every row exactly the bits
// of the one-row kernel blkDot1 on the row-major row (random rows,
// saturated activations, extreme nibbles).
func TestQ4ZGemv(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(95, 96))
	bk := kernels[ggml.TypeQ4_0].blk
	for _, sh := range []struct{ rows, cols int }{{16, 32}, {32, 256}, {48, 2048}, {16, 5632}} {
		for _, extreme := range []bool{false, true} {
			w := randomMatrix(t, rng, ggml.TypeQ4_0, sh.rows, sh.cols)
			if extreme {
				for i := range w.Data {
					if i%18 >= 2 {
						w.Data[i] = 0xff * byte(i/(sh.cols/32*18)%2) // rows of 15s and of 0s
					}
				}
			}
			x := randNormal(rng, sh.cols, 1)
			for i := 0; i < sh.cols; i += 3 {
				x[i] = -30
			}
			var a actBuf
			a.prepare(actQ8_0, 1, sh.cols)
			a.quantizeToken(actQ8_0, 0, sh.cols, x)
			var v actView
			a.view(actQ8_0, 0, sh.cols, x, &v)
			pk, _ := PackQ4_0Decode(w, make([]byte, len(w.Data)))
			out := make([]float32, sh.rows+1)
			out[sh.rows] = 777
			q4zGemv(pk.Data, v.qs, v.d, v.s8, out[:sh.rows], 4096)
			for r := 0; r < sh.rows; r++ {
				want := blkDot1(bk, w.Row(r), v.qs, v.d, v.s8)
				if math.Float32bits(out[r]) != math.Float32bits(want) {
					t.Fatalf("%v extreme=%v row %d: decode layout %g, one-row %g", sh, extreme, r, out[r], want)
				}
			}
			if out[sh.rows] != 777 {
				t.Fatal("wrote past the last row")
			}
		}
	}
}

// TestQ4ZGemvFew: the two- to eight-token decode-layout kernels give every
// (row, token) exactly the bits of the one-token kernel, for one group
// and several, short and long rows, saturated activations and extreme
// nibbles, and write nothing outside their rows and tokens.
func TestQ4ZGemvFew(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(91, 92))
	for _, sh := range []struct{ rows, cols int }{{16, 32}, {32, 256}, {48, 2048}, {16, 5632}} {
		for _, extreme := range []bool{false, true} {
			w := randomMatrix(t, rng, ggml.TypeQ4_0, sh.rows, sh.cols)
			if extreme {
				for i := range w.Data {
					if i%18 >= 2 {
						w.Data[i] = 0xff * byte(i/(sh.cols/32*18)%2) // rows of 15s and of 0s
					}
				}
			}
			pk, _ := PackQ4_0Decode(w, make([]byte, len(w.Data)))
			const maxN = 8
			x := randNormal(rng, maxN*sh.cols, 1)
			for i := 0; i < len(x); i += 3 {
				x[i] = -30
			}
			var a actBuf
			a.prepare(actQ8_0, maxN, sh.cols)
			for i := range maxN {
				a.quantizeToken(actQ8_0, i, sh.cols, x[i*sh.cols:(i+1)*sh.cols])
			}
			nb := sh.cols / 32
			for n := 2; n <= maxN; n++ {
				t.Run(fmt.Sprintf("%dx%d/extreme=%v/n%d", sh.rows, sh.cols, extreme, n), func(t *testing.T) {
					ostride := sh.rows + 3 // a gap between the tokens' outputs
					out := make([]float32, n*ostride)
					for i := range out {
						out[i] = 777
					}
					q4zGemvFew(pk.Data, n, a.qs[:n*sh.cols], a.d[:n*nb], a.s8[:n*nb], out, ostride, sh.rows, 4096)
					for tok := range n {
						want := make([]float32, sh.rows)
						q4zGemv(pk.Data, a.qs[tok*sh.cols:(tok+1)*sh.cols], a.d[tok*nb:(tok+1)*nb], a.s8[tok*nb:(tok+1)*nb], want, 4096)
						for r := range sh.rows {
							if got := out[tok*ostride+r]; math.Float32bits(got) != math.Float32bits(want[r]) {
								t.Fatalf("token %d row %d: %d-token kernel %g, one-token %g", tok, r, n, got, want[r])
							}
						}
						for r := sh.rows; r < ostride; r++ {
							if out[tok*ostride+r] != 777 {
								t.Fatalf("token %d: wrote past the last row", tok)
							}
						}
					}
				})
			}
		}
	}
}

// TestQ4ZMatMul: MatMul on the decode layout equals MatMul on the
// row-major matrix bit for bit, for decode, short batches and prefill
// tiles, with tail rows, on one and three threads.
func TestQ4ZMatMul(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(97, 98))
	for _, threads := range []int{1, 3} {
		pool := NewPool(threads)
		for _, sh := range []struct{ rows, cols int }{{16, 64}, {37, 256}, {200, 512}} {
			w := randomMatrix(t, rng, ggml.TypeQ4_0, sh.rows, sh.cols)
			pk, ok := PackQ4_0Decode(w, make([]byte, len(w.Data)))
			if !ok {
				t.Fatal("not packed")
			}
			for _, few := range []int{4, q4zFewMaxDefault} {
				for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 16, 17, 19, 37, 63, 64, 71, 255, 256, 300} {
					t.Run(fmt.Sprintf("t%d/%dx%d/n%d/few%d", threads, sh.rows, sh.cols, n, few), func(t *testing.T) {
						defer func(o int, on bool) { q4zFewMax, q4zFewOn = o, on }(q4zFewMax, q4zFewOn)
						q4zFewMax, q4zFewOn = few, few != 4
						x := randNormal(rng, n*sh.cols, 1)
						want := make([]float32, n*sh.rows)
						got := make([]float32, n*sh.rows)
						pool.MatMul(want, w, x, n)
						pool.MatMul(got, pk, x, n)
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("token %d row %d: decode layout %g, row-major %g", i/sh.rows, i%sh.rows, got[i], want[i])
							}
						}
					})
				}
			}
		}
		pool.Close()
	}
}

// BenchmarkQ4Z: Q4_0 decode, the decode layout against the row-major
// 16-row kernel, side by side (GB/s of weights, fastest pass): from DRAM
// (160 MB, one and two threads, with the read ceiling) and from L2 (256
// KiB of rows).
//
// Run: go test ./kernels/cpu -run '^$' -bench Q4Z -benchtime 10x
func BenchmarkQ4Z(b *testing.B) {
	skipNoQ4Z(b)
	for _, cols := range []int{2048, 5632} {
		db := newDecodeBench(b, ggml.TypeQ4_0, cols)
		pk, _ := PackQ4_0Decode(db.w, make([]byte, len(db.w.Data)))
		rb := db.rb
		zpath := func(w Matrix, out []float32) func() {
			return func() {
				for r := 0; r+16 <= len(out); r += 16 {
					q4zGemv(w.Data[r*rb:(r+16)*rb], db.v.qs, db.v.d, db.v.s8, out[r:r+16], 16*rb)
				}
			}
		}
		var sink uint64
		vs := []variant{
			{"read", func() { sink += readAVX2(&db.w.Data[0], len(db.w.Data)&^127, 2048) }},
			{"rowmajor", db.newPath(-1)},
			{"q4z", zpath(pk, db.out)},
		}
		b.Run(fmt.Sprintf("DRAM/%d", cols), func(b *testing.B) { roundRobin(b, len(db.w.Data), 1, vs) })
		halves := db.split(2)
		vs2 := make([]variant, 3)
		for j, name := range []string{"read", "rowmajor", "q4z"} {
			fns := make([]func(), len(halves))
			for h, hb := range halves {
				lo := (len(db.w.Data) - len(hb.w.Data)) * h // halves are equal
				hp := Matrix{Type: pk.Type, Rows: hb.w.Rows, Cols: pk.Cols, Data: pk.Data[lo : lo+len(hb.w.Data)]}
				switch name {
				case "read":
					fns[h] = func() { sinks[h] += readAVX2(&hb.w.Data[0], len(hb.w.Data)&^127, 2048) }
				case "rowmajor":
					fns[h] = hb.newPath(-1)
				default:
					fns[h] = zpath(hp, hb.out)
				}
			}
			vs2[j] = variant{name, parallel(fns)}
		}
		b.Run(fmt.Sprintf("DRAM/%d/2threads", cols), func(b *testing.B) { roundRobin(b, len(db.w.Data), 1, vs2) })
		small := *db
		rows := (256 << 10) / rb &^ 15
		small.w.Rows, small.w.Data, small.out = rows, db.w.Data[:rows*rb], db.out[:rows]
		spk := Matrix{Type: pk.Type, Rows: rows, Cols: pk.Cols, Data: pk.Data[:rows*rb]}
		vs3 := []variant{{"rowmajor", small.newPath(-1)}, {"q4z", zpath(spk, small.out)}}
		b.Run(fmt.Sprintf("cache/%d", cols), func(b *testing.B) { roundRobin(b, len(small.w.Data), 20, vs3) })
		_ = sink
		delete(benchMatrices, fmt.Sprint(ggml.TypeQ4_0, db.w.Rows, db.w.Cols))
	}
}
