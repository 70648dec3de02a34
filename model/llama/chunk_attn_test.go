package llama

import (
	"fmt"
	"slices"
	"testing"

	"oengine/ggml"
	"oengine/kernels/cpu"
	"oengine/model/synth"
)

// TestChunkAttentionInvariance: with prompts long enough that most
// positions take the cpu.Attend path (past f16AttnPositions), a token's
// logits are bitwise the same whether its sequence runs token by token
// (cpu.Attend per KV head), in one batch or odd chunks (cpu.AttendChunk
// tiles), or in batches shared with another sequence's chunk; for F16 and
// F32 KV stores, and for gpt-oss (attention sinks, a window on every
// other layer). It also checks that the whole-prompt batch did take the
// tiles.
func TestChunkAttentionInvariance(t *testing.T) {
	for _, c := range []struct {
		arch string
		typ  ggml.Type
		kv   KVType
	}{
		{"llama", ggml.TypeQ8_0, KVF16},
		{"llama", ggml.TypeF32, KVF32},
		{"qwen2", ggml.TypeQ4_0, KVF16},
		// sinks in the tiles (cpu.AttendChunkSinks) on the global layers,
		// the window's tokens past 128 one by one on the local ones
		{"gpt-oss", ggml.TypeMXFP4, KVF16},
	} {
		t.Run(c.arch+"_"+c.typ.String()+"_"+c.kv.String(), func(t *testing.T) {
			m := synthModel(t, c.arch, c.typ)
			V := m.Config().Vocab
			const n, page = 210, 16
			a, other := testTokens(n, V, 3), testTokens(n, V, 4)
			kv, err := m.NewKV(2*(n/page+1)+2, page, c.kv)
			if err != nil {
				t.Fatal(err)
			}
			per := n/page + 1
			tableA, tableB := make([]int32, per), make([]int32, per)
			for i := range tableA { // scrambled, interleaved pages
				tableA[i] = int32(2*per - 1 - 2*i)
				tableB[i] = int32(2 * i)
			}
			want := runChunks(t, m, kv, tableA, a, []int{1})
			got := runChunks(t, m, kv, tableA, a, []int{n})
			if !slices.ContainsFunc(m.fw.attnItems, func(it attnItem) bool { return it.n > 1 }) {
				t.Fatalf("a %d-token prompt made no chunk tiles: %v", n, m.fw.attnItems)
			}
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("one batch: logits differ at token %d: %g vs %g", i/V, got[i], want[i])
			}
			for _, chunks := range [][]int{{70, 3, 101, 36}, {5}} {
				got := runChunks(t, m, kv, tableA, a, chunks)
				if i := firstDiff(got, want); i >= 0 {
					t.Fatalf("chunks %v: logits differ at token %d: %g vs %g", chunks, i/V, got[i], want[i])
				}
			}
			// Each batch: a chunk of B then a chunk of A (B offset by 9 positions).
			got = make([]float32, n*V)
			out := make([]float32, 2*40*V)
			for pos, k := 0, 0; pos < n; k++ {
				na := min(17+k%23, n-pos)
				b := &Batch{Seqs: [][]int32{tableB, tableA}}
				for i := 0; i < na; i++ {
					b.Tokens = append(b.Tokens, other[(pos+i+9)%n])
					b.Pos = append(b.Pos, int32(pos+i))
					b.Seq = append(b.Seq, 0)
				}
				for i := 0; i < na; i++ {
					b.Tokens = append(b.Tokens, a[pos+i])
					b.Pos = append(b.Pos, int32(pos+i))
					b.Seq = append(b.Seq, 1)
					b.Logits = append(b.Logits, int32(na+i))
				}
				if err := m.Forward(kv, b, out); err != nil {
					t.Fatal(err)
				}
				copy(got[pos*V:(pos+na)*V], out[:na*V])
				pos += na
			}
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("shared batches: logits differ at token %d: %g vs %g", i/V, got[i], want[i])
			}
		})
	}
}

// TestPlanAttn: the attention work items of a mixed batch. Runs of
// consecutive positions of one sequence on the cpu.Attend path become
// tiles of cpu.AttnChunkTokens tokens; positions below f16AttnPositions,
// decode tokens and tokens whose neighbour is another sequence or not the
// next position stay single; GGML mode takes no tiles.
func TestPlanAttn(t *testing.T) {
	m := synthModel(t, "llama", ggml.TypeQ8_0)
	c := m.Config()
	tile := cpu.AttnChunkTokens(c.Heads / c.KVHeads)
	kv, err := m.NewKV(64, 16, KVF16)
	if err != nil {
		t.Fatal(err)
	}
	table := func(first int32) []int32 {
		t := make([]int32, 16)
		for i := range t {
			t[i] = first + int32(i)
		}
		return t
	}
	b := &Batch{Seqs: [][]int32{table(0), table(16), table(32), table(48)}}
	add := func(seq int32, pos ...int32) {
		for _, p := range pos {
			b.Tokens = append(b.Tokens, 1)
			b.Pos = append(b.Pos, p)
			b.Seq = append(b.Seq, seq)
		}
	}
	span := func(from, to int32) []int32 {
		var s []int32
		for p := from; p < to; p++ {
			s = append(s, p)
		}
		return s
	}
	add(0, 100)                           // 0: decode token
	add(1, span(60, 64+int32(tile)+3)...) // 1-4: below f16AttnPositions; 5..: a tile and a 3-token tile
	add(2, 200, 201)                      // a 2-token tile
	add(3, 80, 82)                        // not consecutive: two singles
	add(2, 202)                           // 2's next position, but not adjacent in the batch
	T := int32(len(b.Tokens))
	var want []attnItem
	for i := int32(0); i < 5; i++ {
		want = append(want, attnItem{i, 1})
	}
	want = append(want, attnItem{5, int32(tile)}, attnItem{5 + int32(tile), 3})
	i := 5 + int32(tile) + 3
	want = append(want, attnItem{i, 2}, attnItem{i + 2, 1}, attnItem{i + 3, 1}, attnItem{i + 4, 1})
	if i+5 != T {
		t.Fatalf("test batch has %d tokens, items cover %d", T, i+5)
	}
	if err := m.Forward(kv, b, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.fw.attnItems, want) {
		t.Fatalf("items %v, want %v", m.fw.attnItems, want)
	}
	m.SetGGMLArithmetic(true)
	if err := m.Forward(kv, b, nil); err != nil {
		t.Fatal(err)
	}
	for _, it := range m.fw.attnItems {
		if it.n != 1 {
			t.Fatalf("GGML mode made a tile: %v", m.fw.attnItems)
		}
	}
}

// TestChunkAttentionNoAllocs: once the scratch has grown, a prefill chunk
// that runs on chunk tiles allocates nothing.
func TestChunkAttentionNoAllocs(t *testing.T) {
	m := synthModel(t, "llama", ggml.TypeQ8_0)
	V := m.Config().Vocab
	kv, err := m.NewKV(16, 16, KVF16)
	if err != nil {
		t.Fatal(err)
	}
	table := make([]int32, 16)
	for i := range table {
		table[i] = int32(i)
	}
	b := seqBatch(testTokens(150, V, 6), 80, table)
	b.Logits = []int32{149}
	logits := make([]float32, V)
	allocs := testing.AllocsPerRun(3, func() {
		if err := m.Forward(kv, b, logits); err != nil {
			t.Fatal(err)
		}
	})
	if !slices.ContainsFunc(m.fw.attnItems, func(it attnItem) bool { return it.n > 1 }) {
		t.Fatalf("the chunk made no tiles: %v", m.fw.attnItems)
	}
	if allocs != 0 {
		t.Fatalf("prefill chunk allocates %v times", allocs)
	}
}

// TestChunkAttentionTiles: with three, seven or eight query heads per KV
// head (tiles of 30, 28 and 32 lanes, the first two padded to 32) over
// F16 and F32 pages, a prompt's consecutive tokens are tiled, and the
// logits are bitwise those of running the prompt token by token.
func TestChunkAttentionTiles(t *testing.T) {
	for _, g := range []int{3, 7, 8} {
		t.Run(fmt.Sprintf("g%d", g), func(t *testing.T) { testChunkAttentionTiles(t, g) })
	}
}

func testChunkAttentionTiles(t *testing.T, g int) {
	d := synth.Dims{Dim: 64 * g, Layers: 2, Heads: g, KVHeads: 1, FFN: 384, Vocab: 512, CtxLen: 2048, RopeBase: 10000}
	m := synthLoad(t, synth.Options{Arch: "llama", Dims: d, Type: ggml.TypeQ8_0, Seed: 5})
	t.Cleanup(m.Close)
	V := m.Config().Vocab
	const n, page = 150, 16
	tokens := testTokens(n, V, 8)
	table := make([]int32, n/page+1)
	for i := range table {
		table[i] = int32(len(table) - 1 - i)
	}
	for _, kvt := range []KVType{KVF16, KVF32} {
		kv, err := m.NewKV(len(table), page, kvt)
		if err != nil {
			t.Fatal(err)
		}
		want := runChunks(t, m, kv, table, tokens, []int{1})
		got := runChunks(t, m, kv, table, tokens, []int{n})
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("%s: one batch: logits differ at token %d: %g vs %g", kvt, i/V, got[i], want[i])
		}
		if !slices.ContainsFunc(m.fw.attnItems, func(it attnItem) bool { return it.n > 1 }) {
			t.Fatalf("%s: the prompt made no tiles: %v", kvt, m.fw.attnItems)
		}
	}
}
