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

// blkZTypes are the blocked types with a decode layout.
var blkZTypes = []ggml.Type{ggml.TypeQ4_0, ggml.TypeQ8_0, ggml.TypeIQ4_NL, ggml.TypeQ5_0}

// blkRows returns rows (whole blocks) as the blocked kernels read them:
// IQ4_NL and Q5_0 rows converted to Q8_0, others as they are.
func blkRows(typ ggml.Type, rows []byte) []byte {
	switch typ {
	case ggml.TypeIQ4_NL:
		nb := len(rows) / 18
		out := make([]byte, 34*nb)
		iq4NLToQ8_0(out, rows, nb)
		return out
	case ggml.TypeQ5_0:
		nb := len(rows) / 22
		out := make([]byte, 34*nb)
		q5_0ToQ8_0(out, rows, nb)
		return out
	}
	return rows
}

// packBlkZ packs m into its type's decode layout in a new buffer.
func packBlkZ(t testing.TB, m Matrix) Matrix {
	t.Helper()
	pk, ok := PackDecodeLayout(m, make([]byte, len(m.Data)))
	if !ok {
		t.Fatalf("%s %dx%d not packed", m.Type, m.Rows, m.Cols)
	}
	return pk
}

// extremeBlkRows sets every weight of w to its type's extremes, rows of
// the largest and of the smallest value alternating (Q4_0 nibbles 15
// and 0, Q8_0 bytes 127 and -128; Q5_0 as extremeQ5Rows), scales
// untouched.
func extremeBlkRows(w Matrix) {
	if w.Type == ggml.TypeQ5_0 {
		extremeQ5Rows(rand.New(rand.NewPCG(5, 0)), w)
		return
	}
	bb, hi, lo := 18, byte(0xff), byte(0x00)
	if w.Type == ggml.TypeQ8_0 {
		bb, hi, lo = 34, 0x7f, 0x80
	}
	rb := w.rowBytes()
	for i := range w.Data {
		if i%bb >= 2 {
			w.Data[i] = map[bool]byte{false: hi, true: lo}[i/rb%2 == 1]
		}
	}
}

// TestQ4ZPackRoundTrip: testPackRoundTrip for PackQ4_0Decode and
// PackQ8_0Decode, and a matrix of another type is not packed.
func TestQ4ZPackRoundTrip(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(91, 92))
	shapes := []struct{ rows, cols int }{{16, 32}, {37, 256}, {64, 2048}, {50, 96}}
	testPackRoundTrip(t, rng, ggml.TypeQ4_0, PackQ4_0Decode, shapes)
	testPackRoundTrip(t, rng, ggml.TypeQ8_0, PackQ8_0Decode, shapes)
	testPackRoundTrip(t, rng, ggml.TypeIQ4_NL, PackIQ4_NLDecode, shapes)
	f16 := randomMatrix(t, rng, ggml.TypeF16, 32, 64)
	q8 := randomMatrix(t, rng, ggml.TypeQ8_0, 32, 64)
	q4 := randomMatrix(t, rng, ggml.TypeQ4_0, 32, 64)
	for _, c := range []struct {
		m    Matrix
		pack func(Matrix, []byte) (Matrix, bool)
	}{{f16, PackQ4_0Decode}, {f16, PackQ8_0Decode}, {q8, PackQ4_0Decode}, {q4, PackQ8_0Decode}, {q4, PackIQ4_NLDecode}} {
		if _, ok := c.pack(c.m, make([]byte, len(c.m.Data))); ok {
			t.Fatalf("%s matrix packed by the wrong packer", c.m.Type)
		}
	}
}

// TestQ4ZPanel: a group unpacks into exactly the panel bytes that its
// row-major rows pack into (Q4_0: Go twin and assembly; Q8_0; IQ4_NL and
// Q5_0, whose rows pack as converted to Q8_0).
func TestQ4ZPanel(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(93, 94))
	for _, typ := range blkZTypes {
		w := randomMatrix(t, rng, typ, 16, 512)
		rb, nb := w.rowBytes(), 512/qk
		pk := packBlkZ(t, w)
		want := make([]byte, nb*panelBlockZ)
		if rows := blkRows(typ, w.Data); typ == ggml.TypeIQ4_NL || typ == ggml.TypeQ5_0 {
			packPanelZ(kernels[typ].blk, want, rows, 34*nb, nb)
		} else {
			packPanelZ(kernels[typ].blk, want, rows, rb, nb)
		}
		got := make([]byte, nb*panelBlockZ)
		blkZ(typ).panel(got, pk.Data, nil, nb)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: panel from the decode layout differs from the row-major panel", typ)
		}
		if typ == ggml.TypeQ4_0 {
			packPanelFromQ4Z(got, pk.Data, nb)
			if !bytes.Equal(got, want) {
				t.Fatal("Go twin's panel from the decode layout differs from the row-major panel")
			}
		}
	}
}

// TestQ4ZGemv: the decode-layout kernels (Q4_0, Q8_0, IQ4_NL, Q5_0) give every row
// exactly the bits of the one-row kernel blkDot1 on the row-major row,
// and of blkDotRef (random rows, saturated activations, extreme
// weights).
func TestQ4ZGemv(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(95, 96))
	for _, typ := range blkZTypes {
		bk := kernels[typ].blk
		for _, sh := range []struct{ rows, cols int }{{16, 32}, {32, 256}, {48, 2048}, {16, 5632}} {
			for _, extreme := range []bool{false, true} {
				w := randomMatrix(t, rng, typ, sh.rows, sh.cols)
				if extreme {
					extremeBlkRows(w)
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
				pk := packBlkZ(t, w)
				out := make([]float32, sh.rows+1)
				out[sh.rows] = 777
				blkZ(typ).gemv1(pk.Data, v.qs, v.d, v.s8, out[:sh.rows], 4096)
				for r := 0; r < sh.rows; r++ {
					row := blkRows(typ, w.Row(r))
					want := blkDot1(bk, row, v.qs, v.d, v.s8)
					ref := blkDotRef(bk.q4, row, v.qs, v.d)
					if math.Float32bits(out[r]) != math.Float32bits(want) || math.Float32bits(want) != math.Float32bits(ref) {
						t.Fatalf("%s %v extreme=%v row %d: decode layout %g, one-row %g, reference %g", typ, sh, extreme, r, out[r], want, ref)
					}
				}
				if out[sh.rows] != 777 {
					t.Fatal("wrote past the last row")
				}
			}
		}
	}
}

// TestQ4ZGemvFew: the two- to eight-token decode-layout kernels (Q4_0,
// Q8_0, IQ4_NL, Q5_0) give every (row, token) exactly the bits of the one-token
// kernel, for one group and several, short and long rows, saturated
// activations and extreme weights, and write nothing outside their rows
// and tokens.
func TestQ4ZGemvFew(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(91, 92))
	for _, typ := range blkZTypes {
		l := blkZ(typ)
		for _, sh := range []struct{ rows, cols int }{{16, 32}, {32, 256}, {48, 2048}, {16, 5632}} {
			for _, extreme := range []bool{false, true} {
				w := randomMatrix(t, rng, typ, sh.rows, sh.cols)
				if extreme {
					extremeBlkRows(w)
				}
				pk := packBlkZ(t, w)
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
					t.Run(fmt.Sprintf("%s/%dx%d/extreme=%v/n%d", typ, sh.rows, sh.cols, extreme, n), func(t *testing.T) {
						ostride := sh.rows + 3 // a gap between the tokens' outputs
						out := make([]float32, n*ostride)
						for i := range out {
							out[i] = 777
						}
						l.gemvFew(pk.Data, n, a.qs[:n*sh.cols], a.d[:n*nb], a.s8[:n*nb], out, ostride, sh.rows, 4096)
						for tok := range n {
							want := make([]float32, sh.rows)
							l.gemv1(pk.Data, a.qs[tok*sh.cols:(tok+1)*sh.cols], a.d[tok*nb:(tok+1)*nb], a.s8[tok*nb:(tok+1)*nb], want, 4096)
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
}

// TestQ4ZMatMul: MatMul on the decode layout (Q4_0, Q8_0, IQ4_NL, Q5_0) equals MatMul
// on the row-major matrix bit for bit, for decode, short batches and
// prefill tiles, with tail rows, on one and three threads.
func TestQ4ZMatMul(t *testing.T) {
	skipNoQ4Z(t)
	rng := rand.New(rand.NewPCG(97, 98))
	for _, threads := range []int{1, 3} {
		pool := NewPool(threads)
		for _, typ := range blkZTypes {
			for _, sh := range []struct{ rows, cols int }{{16, 64}, {37, 256}, {200, 512}} {
				w := randomMatrix(t, rng, typ, sh.rows, sh.cols)
				pk := packBlkZ(t, w)
				for _, few := range []int{4, blkZFewMaxDefault} {
					for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 16, 17, 19, 37, 63, 64, 71, 255, 256, 300} {
						t.Run(fmt.Sprintf("t%d/%s/%dx%d/n%d/few%d", threads, typ, sh.rows, sh.cols, n, few), func(t *testing.T) {
							defer func(o int, on bool) { blkZFewMax, blkZFewOn = o, on }(blkZFewMax, blkZFewOn)
							blkZFewMax, blkZFewOn = few, few != 4
							sameMatMul(t, rng, pool, w, pk, n)
						})
					}
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
					q4zLayout.gemv1(w.Data[r*rb:(r+16)*rb], db.v.qs, db.v.d, db.v.s8, out[r:r+16], 16*rb)
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
