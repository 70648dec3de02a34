package cpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// TestQ4KZPackRoundTrip: packing into a new buffer and in place gives the
// same bytes; every row read back (Row) is the row-major row; rows after
// the last whole group are untouched; other types and short matrices are
// not packed, nor is a packed matrix packed again.
func TestQ4KZPackRoundTrip(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(191, 192))
	for _, sh := range []struct{ rows, cols int }{{16, 256}, {37, 512}, {64, 2048}, {50, 768}} {
		w := randomMatrix(t, rng, ggml.TypeQ4_K, sh.rows, sh.cols)
		orig := append([]byte(nil), w.Data...)
		p1, ok := PackDecodeLayout(w, make([]byte, len(w.Data)))
		if !ok || !p1.DecodeLayout() || p1.dlRows() != sh.rows/16*16 {
			t.Fatalf("%v: packed %v, layout rows %d", sh, ok, p1.dlRows())
		}
		if !bytes.Equal(w.Data, orig) {
			t.Fatal("packing into a new buffer changed the source")
		}
		inPlace := Matrix{Type: w.Type, Rows: w.Rows, Cols: w.Cols, Data: append([]byte(nil), orig...)}
		p2, ok := PackQ4_KDecode(inPlace, inPlace.Data)
		if !ok || !bytes.Equal(p1.Data, p2.Data) {
			t.Fatalf("%v: in-place packing differs", sh)
		}
		if _, again := PackDecodeLayout(p2, p2.Data); again {
			t.Fatal("a packed matrix was packed again")
		}
		rb := w.rowBytes()
		if tail := p1.dlRows() * rb; !bytes.Equal(p1.Data[tail:], orig[tail:]) {
			t.Fatalf("%v: tail rows changed", sh)
		}
		if bytes.Equal(p1.Data[:rb], orig[:rb]) {
			t.Fatalf("%v: first group not rewritten", sh)
		}
		for r := 0; r < sh.rows; r++ {
			if !bytes.Equal(p1.Row(r), orig[r*rb:(r+1)*rb]) {
				t.Fatalf("%v: row %d differs after packing", sh, r)
			}
		}
	}
	for _, typ := range []ggml.Type{ggml.TypeQ6_K, ggml.TypeF16} {
		m := randomMatrix(t, rng, typ, 32, 256)
		if _, ok := PackDecodeLayout(m, make([]byte, len(m.Data))); ok {
			t.Fatalf("%s matrix packed", typ)
		}
	}
	short := randomMatrix(t, rng, ggml.TypeQ4_K, 15, 256)
	if _, ok := PackQ4_KDecode(short, make([]byte, len(short.Data))); ok {
		t.Fatal("15-row matrix packed")
	}
}

// TestQ4KZGemv: the decode-layout kernel gives every row exactly the bits
// of the row-major one-token kernels (gemvQ4_KAVX2 through decodeRows,
// and dotQ4_KAVX2), on random rows with extreme scales (subnormal, huge,
// zero and negative d / dmin, every 6-bit scale and min), activations
// with full-range quants and zero, tiny and huge block scales, and rows
// of all-15 and all-0 nibbles.
func TestQ4KZGemv(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(193, 194))
	for _, sh := range []struct{ rows, cols int }{{16, 256}, {32, 512}, {48, 2048}, {16, 5632}} {
		for _, extreme := range []bool{false, true} {
			nb := sh.cols / qkK
			data := make([]byte, 0, sh.rows*nb*144)
			for r := 0; r < sh.rows; r++ {
				row := kzRandRowK(rng, nb, 144)
				if extreme {
					for b := 0; b < nb; b++ {
						for i := 16; i < 144; i++ {
							row[b*144+i] = 0xff * byte(r%2) // nibbles of 15 and of 0
						}
						for i := 4; i < 16; i++ {
							row[b*144+i] = 0xff // scales and mins of 63
						}
					}
				}
				data = append(data, row...)
			}
			w, err := NewMatrix(ggml.TypeQ4_K, sh.rows, sh.cols, data)
			if err != nil {
				t.Fatal(err)
			}
			qs, d, bsums := kzRandAct(rng, nb)
			qs, d, bsums = qs[:sh.cols], d[:nb], bsums[:sh.cols/16]
			if extreme {
				for i := range qs {
					qs[i] = -128
				}
				for i := range bsums {
					bsums[i] = -128 * 16
				}
			}
			v := actView{qs: qs, d: d, bsums: bsums}
			pk, _ := PackQ4_KDecode(w, make([]byte, len(w.Data)))
			out := make([]float32, sh.rows+1)
			out[sh.rows] = 777
			q4kzGemv(pk.Data, qs, d, bsums, out[:sh.rows], 4096)
			want := make([]float32, sh.rows)
			if !decodeRows(ggml.TypeQ4_K, w.Data, w.rowBytes(), v, want) {
				t.Fatal("no Q4_K rows kernel")
			}
			for r := 0; r < sh.rows; r++ {
				one := simdKernels[ggml.TypeQ4_K](w.Row(r), v)
				if math.Float32bits(out[r]) != math.Float32bits(want[r]) || math.Float32bits(one) != math.Float32bits(want[r]) {
					t.Fatalf("%v extreme=%v row %d: decode layout %g, rows kernel %g, one-row %g", sh, extreme, r, out[r], want[r], one)
				}
			}
			if out[sh.rows] != 777 {
				t.Fatal("kernel wrote past its rows")
			}
		}
	}
}

// TestQ4KZMatMul: MatMul over a packed Q4_K matrix (whole groups in the
// decode layout, a row-major tail) gives the bits of the row-major matrix
// for 1 to 9 and 40 tokens, on one and two threads.
func TestQ4KZMatMul(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(195, 196))
	for _, sh := range []struct{ rows, cols int }{{40, 512}, {96, 2048}} {
		w := randomMatrix(t, rng, ggml.TypeQ4_K, sh.rows, sh.cols)
		pk, ok := PackDecodeLayout(w, make([]byte, len(w.Data)))
		if !ok {
			t.Fatal("not packed")
		}
		for _, threads := range []int{1, 2} {
			p := NewPool(threads)
			for _, n := range []int{1, 2, 3, 4, 5, 8, 9, 40} {
				x := randNormal(rng, n*sh.cols, 1)
				want := make([]float32, n*sh.rows)
				got := make([]float32, n*sh.rows)
				p.MatMul(want, w, x, n)
				p.MatMul(got, pk, x, n)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v threads %d n %d: [%d] packed %g, row-major %g", sh, threads, n, i, got[i], want[i])
					}
				}
			}
			p.Close()
		}
	}
}

// BenchmarkQ4KZ: Q4_K decode (one token) from DRAM, the decode layout
// against the row-major rows kernel and a plain read of the same bytes,
// on one and two threads, and from L2; GB/s of weights, side by side.
func BenchmarkQ4KZ(b *testing.B) {
	skipNoQ4Z(b)
	for _, cols := range []int{2048, 5632} {
		db := newDecodeBench(b, ggml.TypeQ4_K, cols)
		pk, _ := PackQ4_KDecode(db.w, make([]byte, len(db.w.Data)))
		rb := db.rb
		zpath := func(w Matrix, out []float32) func() {
			return func() {
				for r := 0; r+16 <= len(out); r += 16 {
					q4kzGemv(w.Data[r*rb:(r+16)*rb], db.v.qs, db.v.d, db.v.bsums, out[r:r+16], 16*rb)
				}
			}
		}
		var sink uint64
		vs := []variant{
			{"read", func() { sink += readAVX2(&db.w.Data[0], len(db.w.Data)&^127, 2048) }},
			{"rowmajor", db.newPath(-1)},
			{"q4kz", zpath(pk, db.out)},
		}
		b.Run(fmt.Sprintf("DRAM/%d", cols), func(b *testing.B) { roundRobin(b, len(db.w.Data), 1, vs) })
		halves := db.split(2)
		vs2 := make([]variant, 3)
		for j, name := range []string{"read", "rowmajor", "q4kz"} {
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
		vs3 := []variant{{"rowmajor", small.newPath(-1)}, {"q4kz", zpath(spk, small.out)}}
		b.Run(fmt.Sprintf("cache/%d", cols), func(b *testing.B) { roundRobin(b, len(small.w.Data), 20, vs3) })
		_ = sink
		delete(benchMatrices, fmt.Sprint(ggml.TypeQ4_K, db.w.Rows, db.w.Cols))
	}
}

// BenchmarkQ4KZMatMul: MatMul of n tokens over Q4_K FFN matrices of
// tinyllama-1.1b (5632 × 2048, 24 of them in turn, 187 MB: from DRAM),
// row-major against the decode layout, on a 2-thread pool; us/mat is the
// time of one product.
func BenchmarkQ4KZMatMul(b *testing.B) {
	skipNoQ4Z(b)
	const rows, cols, nm = 5632, 2048, 24
	pool := NewPool(2)
	defer pool.Close()
	src := benchMatrix(b, ggml.TypeQ4_K, rows, cols)
	var rm, pk []Matrix
	for range nm {
		m, err := NewMatrix(ggml.TypeQ4_K, rows, cols, append([]byte(nil), src.Data...))
		if err != nil {
			b.Fatal(err)
		}
		rm = append(rm, m)
		p, _ := PackQ4_KDecode(m, make([]byte, len(m.Data)))
		pk = append(pk, p)
	}
	for _, n := range []int{1, 2, 3, 4, 8, 16, 64, 256} {
		for _, mode := range []string{"rowmajor", "q4kz"} {
			ws := map[string][]Matrix{"rowmajor": rm, "q4kz": pk}[mode]
			b.Run(fmt.Sprintf("n%d/%s", n, mode), func(b *testing.B) {
				x := randNormal(rand.New(rand.NewPCG(2, 3)), n*cols, 1)
				dst := make([]float32, n*rows)
				pool.MatMul(dst, ws[0], x, n)
				b.ResetTimer()
				for i := range b.N {
					pool.MatMul(dst, ws[i%len(ws)], x, n)
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/mat")
			})
		}
	}
}
