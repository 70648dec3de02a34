package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// kzTypes are the K-quant types with a decode layout.
var kzTypes = []ggml.Type{ggml.TypeQ2_K, ggml.TypeQ3_K, ggml.TypeQ4_K, ggml.TypeQ5_K, ggml.TypeQ6_K}

// TestKZPackRoundTrip: testPackRoundTrip for every K-quant layout through
// PackDecodeLayout, and types without a layout are not packed.
func TestKZPackRoundTrip(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(191, 192))
	for _, typ := range kzTypes {
		testPackRoundTrip(t, rng, typ, PackDecodeLayout, []struct{ rows, cols int }{{16, 256}, {37, 512}, {64, 2048}, {50, 768}})
	}
	for _, typ := range []ggml.Type{ggml.TypeQ4_1, ggml.TypeF16} {
		m := randomMatrix(t, rng, typ, 32, 256)
		if _, ok := PackDecodeLayout(m, make([]byte, len(m.Data))); ok {
			t.Fatalf("%s matrix packed", typ)
		}
	}
}

// kzCase is a test matrix of random rows (extreme: kzExtremeRow), row-major
// and packed, and four tokens' Q8_K activations (kzRandAct; extreme: the
// first token's quants all -128).
type kzCase struct {
	w, pk    Matrix
	qs       []int8
	d        []float32
	bsums    []int16
	nb, cols int
	extreme  bool
}

func newKZCase(t *testing.T, rng *rand.Rand, typ ggml.Type, rows, cols int, extreme bool) kzCase {
	t.Helper()
	nb, bb := cols/qkK, typ.BlockBytes()
	data := make([]byte, 0, rows*nb*bb)
	for r := 0; r < rows; r++ {
		row := kzRandRowK(rng, nb, bb)
		if extreme {
			kzExtremeRow(typ, row, nb, r)
		}
		data = append(data, row...)
	}
	w, err := NewMatrix(typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	pk, ok := PackDecodeLayout(w, make([]byte, len(w.Data)))
	if !ok {
		t.Fatalf("%s not packed", typ)
	}
	c := kzCase{w: w, pk: pk, nb: nb, cols: cols}
	c.qs, c.d, c.bsums = kzRandAct(rng, nb)
	if extreme {
		for i := range c.qs[:cols] {
			c.qs[i] = -128
		}
		for i := range c.bsums[:cols/16] {
			c.bsums[i] = -128 * 16
		}
	}
	return c
}

// token returns token i's activations.
func (c kzCase) token(i int) ([]int8, []float32, []int16) {
	return c.qs[i*c.cols : (i+1)*c.cols], c.d[i*c.nb : (i+1)*c.nb], c.bsums[i*c.cols/16 : (i+1)*c.cols/16]
}

// TestKZGemv: the decode-layout kernels give every row exactly the bits
// of the row-major one-token kernels (gemvQ4_KAVX2 / gemvQ6_KAVX2 through
// decodeRows, and dotQ4_KAVX2 / dotQ5_KAVX2 / dotQ6_KAVX2), on random
// rows with extreme scales (subnormal, huge, zero and negative d / dmin),
// activations with full-range quants and zero, tiny and huge block
// scales, and rows whose quants are all at the top or all at the bottom
// of their range with the largest scales (Q4_K, Q5_K: 63; Q6_K: -128 and
// 127).
func TestKZGemv(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(193, 194))
	for _, typ := range kzTypes {
		for _, sh := range []struct{ rows, cols int }{{16, 256}, {32, 512}, {48, 2048}, {16, 5632}} {
			for _, extreme := range []bool{false, true} {
				c := newKZCase(t, rng, typ, sh.rows, sh.cols, extreme)
				qs, d, bsums := c.token(0)
				v := actView{qs: qs, d: d, bsums: bsums}
				out := make([]float32, sh.rows+1)
				out[sh.rows] = 777
				kzGemv(typ, c.pk.Data, qs, d, bsums, out[:sh.rows], 4096)
				want := make([]float32, sh.rows)
				if !decodeRows(typ, c.w.Data, c.w.rowBytes(), v, want) { // Q5_K has none
					for r := range want {
						want[r] = simdKernels[typ](c.w.Row(r), v)
					}
				}
				for r := 0; r < sh.rows; r++ {
					one := simdKernels[typ](c.w.Row(r), v)
					if math.Float32bits(out[r]) != math.Float32bits(want[r]) || math.Float32bits(one) != math.Float32bits(want[r]) {
						t.Fatalf("%s %v extreme=%v row %d: decode layout %g, rows kernel %g, one-row %g", typ, sh, extreme, r, out[r], want[r], one)
					}
				}
				if out[sh.rows] != 777 {
					t.Fatal("kernel wrote past its rows")
				}
			}
		}
	}
}

// TestKZGemvFew: the two- to four-token Q5_K and Q6_K decode-layout kernels give
// every token and row exactly the bits of the one-token kernel, on the
// rows and activations of TestKZGemv (extreme ones included), with the
// tokens' activations and results a stride apart and nothing written
// outside their rows.
func TestKZGemvFew(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(197, 198))
	for _, typ := range []ggml.Type{ggml.TypeQ5_K, ggml.TypeQ6_K} {
		for _, sh := range []struct{ rows, cols int }{{16, 256}, {32, 768}, {48, 2048}} {
			for _, extreme := range []bool{false, true} {
				c := newKZCase(t, rng, typ, sh.rows, sh.cols, extreme)
				for n := 2; n <= 4; n++ {
					ostride := sh.rows + 5
					out := make([]float32, n*ostride)
					for i := range out {
						out[i] = 777
					}
					kzGemvFew(typ, c.pk.Data, n, c.qs[:n*sh.cols], c.d[:n*c.nb], c.bsums[:n*sh.cols/16], out, ostride, sh.rows, 4096)
					for tok := 0; tok < n; tok++ {
						want := make([]float32, sh.rows)
						qs, d, bsums := c.token(tok)
						kzGemv(typ, c.pk.Data, qs, d, bsums, want, 4096)
						for r := 0; r < ostride; r++ {
							got := out[tok*ostride+r]
							if r >= sh.rows {
								if got != 777 {
									t.Fatalf("%s n=%d token %d: wrote past its rows", typ, n, tok)
								}
								continue
							}
							if math.Float32bits(got) != math.Float32bits(want[r]) {
								t.Fatalf("%s %v extreme=%v n=%d token %d row %d: %g, one-token kernel %g", typ, sh, extreme, n, tok, r, got, want[r])
							}
						}
					}
				}
			}
		}
	}
}

// TestKZChunk: calls of at most four tokens cover any count, and none
// takes one token after others.
func TestKZChunk(t *testing.T) {
	for left := 1; left <= 40; left++ {
		var calls []int
		for l := left; l > 0; {
			c := kzChunk(l)
			if c < 1 || c > 4 {
				t.Fatalf("%d left: chunk %d", l, c)
			}
			calls = append(calls, c)
			l -= c
		}
		if len(calls) > 1 && calls[len(calls)-1] == 1 {
			t.Fatalf("%d tokens: calls %v end with one token", left, calls)
		}
	}
}

// kzExtremeRow sets row r's quants to the top of their range (odd r) or
// to 0 (even r) and its scales to their extremes, keeping d and dmin.
func kzExtremeRow(typ ggml.Type, row []byte, nb, r int) {
	for b := 0; b < nb; b++ {
		if typ == ggml.TypeQ2_K {
			blk := row[b*84 : b*84+84]
			for i := 16; i < 80; i++ {
				blk[i] = 0xff * byte(r%2) // values of 3 and of 0
			}
			for i := 0; i < 16; i++ {
				blk[i] = 0xff // scales and mins of 15
			}
			continue
		}
		if typ == ggml.TypeQ3_K {
			blk := row[b*110 : b*110+110]
			for i := 0; i < 96; i++ {
				blk[i] = 0xff * byte(r%2) // values of 3 and of -4 (stored 7 and 0)
			}
			for i := 96; i < 108; i++ {
				blk[i] = byte(0xf0 * (i % 2)) // scales -32 and 31
			}
			continue
		}
		if bb := typ.BlockBytes(); typ != ggml.TypeQ6_K {
			blk := row[b*bb : (b+1)*bb]
			for i := 16; i < bb; i++ {
				blk[i] = 0xff * byte(r%2) // values of 15 (Q5_K: 31) and of 0
			}
			for i := 4; i < 16; i++ {
				blk[i] = 0xff // scales and mins of 63
			}
			continue
		}
		blk := row[b*210 : b*210+210]
		for i := 0; i < 192; i++ {
			blk[i] = 0xff * byte(r%2) // 6-bit values of 63 and of 0
		}
		for i := 192; i < 208; i++ {
			blk[i] = byte(0x7f + i%2) // scales 127 and -128
		}
	}
}

// TestKZMatMul: MatMul over a packed Q4_K, Q5_K or Q6_K matrix (whole groups in
// the decode layout, a row-major tail) gives the bits of the row-major
// matrix for 1 to 9 and 40 tokens, on one and two threads.
func TestKZMatMul(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(195, 196))
	for _, c := range []struct {
		typ        ggml.Type
		rows, cols int
	}{{ggml.TypeQ2_K, 40, 512}, {ggml.TypeQ2_K, 96, 2048}, {ggml.TypeQ3_K, 40, 512}, {ggml.TypeQ3_K, 96, 2048}, {ggml.TypeQ4_K, 40, 512}, {ggml.TypeQ4_K, 96, 2048}, {ggml.TypeQ5_K, 40, 512}, {ggml.TypeQ5_K, 96, 2048}, {ggml.TypeQ6_K, 40, 512}, {ggml.TypeQ6_K, 96, 2048}} {
		sh := c
		w := randomMatrix(t, rng, c.typ, sh.rows, sh.cols)
		pk, ok := PackDecodeLayout(w, make([]byte, len(w.Data)))
		if !ok {
			t.Fatal("not packed")
		}
		for _, threads := range []int{1, 2} {
			p := NewPool(threads)
			for _, n := range []int{1, 2, 3, 4, 5, 8, 9, 40} {
				sameMatMul(t, rng, p, w, pk, n)
			}
			p.Close()
		}
	}
}

// BenchmarkKZDecode: Q4_K, Q5_K and Q6_K decode (one token) from DRAM, the
// decode layout against the row-major rows kernel and a plain read of the
// same bytes, on one and two threads, and from L2; GB/s of weights, side
// by side.
func BenchmarkKZDecode(b *testing.B) {
	skipNoQ4Z(b)
	for _, typ := range kzTypes {
		for _, cols := range []int{2048, 5632} {
			benchKZDecode(b, typ, cols)
		}
	}
}

func benchKZDecode(b *testing.B, typ ggml.Type, cols int) {
	{
		db := newDecodeBench(b, typ, cols)
		pk, _ := PackDecodeLayout(db.w, make([]byte, len(db.w.Data)))
		rb := db.rb
		zpath := func(w Matrix, out []float32) func() {
			return func() {
				for r := 0; r+16 <= len(out); r += 16 {
					kzGemv(typ, w.Data[r*rb:(r+16)*rb], db.v.qs, db.v.d, db.v.bsums, out[r:r+16], 16*rb)
				}
			}
		}
		var sink uint64
		rowMajor := func(db *decodeBench) func() {
			if _, ok := rowsKernels[typ]; ok {
				return db.newPath(-1)
			}
			return db.oldPath() // Q5_K: the one-row kernel per row
		}
		vs := []variant{
			{"read", func() { sink += readAVX2(&db.w.Data[0], len(db.w.Data)&^127, 2048) }},
			{"rowmajor", rowMajor(db)},
			{"layout", zpath(pk, db.out)},
		}
		b.Run(fmt.Sprintf("%s/DRAM/%d", typ, cols), func(b *testing.B) { roundRobin(b, len(db.w.Data), 1, vs) })
		halves := db.split(2)
		vs2 := make([]variant, 3)
		for j, name := range []string{"read", "rowmajor", "layout"} {
			fns := make([]func(), len(halves))
			for h, hb := range halves {
				lo := (len(db.w.Data) - len(hb.w.Data)) * h // halves are equal
				hp := Matrix{Type: pk.Type, Rows: hb.w.Rows, Cols: pk.Cols, Data: pk.Data[lo : lo+len(hb.w.Data)]}
				switch name {
				case "read":
					fns[h] = func() { sinks[h] += readAVX2(&hb.w.Data[0], len(hb.w.Data)&^127, 2048) }
				case "rowmajor":
					fns[h] = rowMajor(hb)
				default:
					fns[h] = zpath(hp, hb.out)
				}
			}
			vs2[j] = variant{name, parallel(fns)}
		}
		b.Run(fmt.Sprintf("%s/DRAM/%d/2threads", typ, cols), func(b *testing.B) { roundRobin(b, len(db.w.Data), 1, vs2) })
		small := *db
		rows := (256 << 10) / rb &^ 15
		small.w.Rows, small.w.Data, small.out = rows, db.w.Data[:rows*rb], db.out[:rows]
		spk := Matrix{Type: pk.Type, Rows: rows, Cols: pk.Cols, Data: pk.Data[:rows*rb]}
		vs3 := []variant{{"rowmajor", rowMajor(&small)}, {"layout", zpath(spk, small.out)}}
		b.Run(fmt.Sprintf("%s/cache/%d", typ, cols), func(b *testing.B) { roundRobin(b, len(small.w.Data), 20, vs3) })
		_ = sink
		delete(benchMatrices, fmt.Sprint(typ, db.w.Rows, db.w.Cols))
	}
}

// BenchmarkKZMatMul: MatMul of n tokens over Q4_K, Q5_K and Q6_K FFN matrices
// of tinyllama-1.1b (5632 × 2048, 24 of them in turn, 187 / 273 MB: from
// DRAM), row-major against the decode layout (Q5_K and Q6_K up to four tokens a
// kernel call, and one: layout-pertoken), on a 2-thread pool; us/mat is the time
// of one product.
func BenchmarkKZMatMul(b *testing.B) {
	skipNoQ4Z(b)
	pool := NewPool(2)
	defer pool.Close()
	for _, typ := range kzTypes {
		benchKZMatMul(b, pool, typ)
	}
}

func benchKZMatMul(b *testing.B, pool *Pool, typ ggml.Type) {
	const rows, cols, nm = 5632, 2048, 24
	src := benchMatrix(b, typ, rows, cols)
	var rm, pk []Matrix
	for range nm {
		m, err := NewMatrix(typ, rows, cols, append([]byte(nil), src.Data...))
		if err != nil {
			b.Fatal(err)
		}
		rm = append(rm, m)
		p, _ := PackDecodeLayout(m, make([]byte, len(m.Data)))
		pk = append(pk, p)
	}
	for _, n := range []int{1, 2, 3, 4, 8, 16, 64, 256} {
		for _, mode := range []string{"rowmajor", "layout", "layout-pertoken"} {
			if few, _ := kzFewKernels(typ); mode == "layout-pertoken" && (n == 1 || few == nil) {
				continue
			}
			ws := map[string][]Matrix{"rowmajor": rm, "layout": pk, "layout-pertoken": pk}[mode]
			b.Run(fmt.Sprintf("%s/n%d/%s", typ, n, mode), func(b *testing.B) {
				defer func(on bool) { kzFewOn = on }(kzFewOn)
				kzFewOn = mode == "layout"
				benchMatMulTurns(b, pool, ws, n)
			})
		}
	}
}

// TestKZKernel: kzKernel's and kzFewKernels' super-block sizes (kzGemv's
// and kzGemvFew's bounds) are each type's, and so are the layouts'.
func TestKZKernel(t *testing.T) {
	for typ, l := range kzLayouts {
		if _, bb := kzKernel(typ); bb != typ.BlockBytes() || l.bb != bb {
			t.Fatalf("%s: kzKernel %d, layout %d, type block %d", typ, bb, l.bb, typ.BlockBytes())
		}
		if few, bb := kzFewKernels(typ); few != nil && bb != typ.BlockBytes() {
			t.Fatalf("%s: kzFewKernels %d, type block %d", typ, bb, typ.BlockBytes())
		}
	}
}
