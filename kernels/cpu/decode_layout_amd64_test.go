package cpu

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// testPackRoundTrip checks a decode-layout packer on random matrices of
// type typ and the given shapes: packing into a new buffer and in place
// give the same bytes and leave the source alone; every row read back
// (Row) is the row-major row; rows after the last whole group are
// untouched and the first group is rewritten; a packed matrix is not
// packed again, nor is one of 15 rows.
func testPackRoundTrip(t *testing.T, rng *rand.Rand, typ ggml.Type, pack func(Matrix, []byte) (Matrix, bool), shapes []struct{ rows, cols int }) {
	t.Helper()
	for _, sh := range shapes {
		w := randomMatrix(t, rng, typ, sh.rows, sh.cols)
		orig := append([]byte(nil), w.Data...)
		p1, ok := pack(w, make([]byte, len(w.Data)))
		if !ok || !p1.DecodeLayout() || p1.dlRows() != sh.rows/16*16 {
			t.Fatalf("%s %v: packed %v, layout rows %d", typ, sh, ok, p1.dlRows())
		}
		if !bytes.Equal(w.Data, orig) {
			t.Fatal("packing into a new buffer changed the source")
		}
		inPlace := Matrix{Type: w.Type, Rows: w.Rows, Cols: w.Cols, Data: append([]byte(nil), orig...)}
		p2, ok := pack(inPlace, inPlace.Data)
		if !ok || !bytes.Equal(p1.Data, p2.Data) {
			t.Fatalf("%s %v: in-place packing differs", typ, sh)
		}
		if _, again := pack(p2, p2.Data); again {
			t.Fatal("a packed matrix was packed again")
		}
		rb := w.rowBytes()
		if tail := p1.dlRows() * rb; !bytes.Equal(p1.Data[tail:], orig[tail:]) {
			t.Fatalf("%s %v: tail rows changed", typ, sh)
		}
		if p1.dlRows() > 0 && bytes.Equal(p1.Data[:rb], orig[:rb]) {
			t.Fatalf("%s %v: first group not rewritten", typ, sh)
		}
		for r := 0; r < sh.rows; r++ {
			if !bytes.Equal(p1.Row(r), orig[r*rb:(r+1)*rb]) {
				t.Fatalf("%s %v: row %d differs after packing", typ, sh, r)
			}
		}
	}
	short := randomMatrix(t, rng, typ, 15, shapes[0].cols)
	if _, ok := pack(short, make([]byte, len(short.Data))); ok {
		t.Fatalf("15-row %s matrix packed", typ)
	}
}

// sameMatMul fails t unless MatMul on the decode-layout matrix pk gives
// bit for bit what it gives on the row-major matrix w, for n tokens of
// random activations on pool.
func sameMatMul(t *testing.T, rng *rand.Rand, pool *Pool, w, pk Matrix, n int) {
	t.Helper()
	x := randNormal(rng, n*w.Cols, 1)
	want := make([]float32, n*w.Rows)
	got := make([]float32, n*w.Rows)
	pool.MatMul(want, w, x, n)
	pool.MatMul(got, pk, x, n)
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s %dx%d, %d tokens: token %d row %d: decode layout %g, row-major %g", w.Type, w.Rows, w.Cols, n, i/w.Rows, i%w.Rows, got[i], want[i])
		}
	}
}
