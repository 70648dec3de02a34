package engine

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"oengine/grammar"
	"oengine/model/gguf"
	"oengine/model/tokenizer"
	"oengine/sampling"
)

// guidedBenchSchema is a typical tool-call argument object: required and
// optional properties, an enum, bounded strings and integers, an array.
const guidedBenchSchema = `{"type":"object","properties":{
	"city":{"type":"string","maxLength":24},
	"unit":{"enum":["celsius","fahrenheit"]},
	"days":{"type":"integer","minimum":1,"maximum":14},
	"tags":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":3},
	"hourly":{"type":"boolean"}},
	"required":["city","unit"]}`

var guidedBenchVocabs = []struct{ name, file string }{
	{"32k-llama-spm", "ggml-vocab-llama-spm.gguf"},
	{"151k-qwen3", "ggml-vocab-qwen3.gguf"},
}

// guidedTrace is a constraint over a real vocabulary and a seeded walk
// through it (uniform among allowed tokens, then steered to completion),
// with every state's mask already computed: what a running constrained
// sequence sees once its states are cached.
func guidedTrace(b *testing.B, file string) (*grammar.Index, []int32) {
	b.Helper()
	f, err := gguf.Open(filepath.Join(sharedTestdata(b), "tokenizer", file))
	if err != nil {
		b.Skipf("vocabulary %s: %v", file, err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		b.Fatal(err)
	}
	pieces := make([][]byte, tok.VocabSize())
	for id := range pieces {
		pieces[id] = tok.Piece(int32(id))
	}
	d, err := grammar.CompileSchema([]byte(guidedBenchSchema), grammar.SchemaOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ix := grammar.NewIndex(d, grammar.NewVocab(pieces, tok.EOGTokens()))
	r := rand.New(rand.NewPCG(7, 7))
	m := ix.NewMatcher()
	var trace []int32
	for !m.Done() && len(trace) < 400 {
		mask := m.Mask()
		var cands []int32
		for id := int32(0); int(id) < len(pieces); id++ {
			if !mask.Has(id) {
				continue
			}
			if len(trace) >= 40 { // steer: only tokens that bring the end closer
				end := m.State()
				for _, c := range pieces[id] {
					end = d.Next(end, c)
				}
				if len(pieces[id]) > 0 && d.DistToAccept(end) >= d.DistToAccept(m.State()) {
					continue
				}
			}
			cands = append(cands, id)
		}
		if len(cands) == 0 {
			b.Fatalf("no candidate after %d tokens", len(trace))
		}
		id := cands[r.IntN(len(cands))]
		if err := m.Advance(id); err != nil {
			b.Fatal(err)
		}
		trace = append(trace, id)
	}
	return ix, trace
}

// BenchmarkGuidedStep is the engine's per-token cost of a constrained
// output over its cached states (docs/api.md, "Structured outputs
// core"): the guide's mask, applyMask on the logits row (sampleOne's
// masking) and Advance. One op is one token; compare with
// BenchmarkGuidedSample for the sampling itself.
func BenchmarkGuidedStep(b *testing.B) {
	for _, bv := range guidedBenchVocabs {
		b.Run(bv.name, func(b *testing.B) {
			ix, trace := guidedTrace(b, bv.file)
			row := randomRow(ix.VocabSize())
			var dst []float32
			b.ResetTimer()
			// guidedTrace computed every state's mask of the trace: the
			// loop measures cached states only.
			for i := 0; i < b.N; {
				g := ix.Start()
				for _, id := range trace {
					if !applyMask(&dst, row, g.Mask()) {
						b.Fatal("empty mask")
					}
					if err := g.Advance(id); err != nil {
						b.Fatal(err)
					}
					if i++; i == b.N {
						break
					}
				}
			}
		})
	}
}

// BenchmarkGuidedSample is one sampling step at temperature 1 over a
// full logits row, free and constrained (mask + applyMask + sample +
// Advance of the sampled token): the difference is the constrained
// overhead per token as the step loop pays it.
func BenchmarkGuidedSample(b *testing.B) {
	p, err := sampling.Options{Temperature: ptr(1.0), Seed: ptr(uint64(3))}.Resolve(1)
	if err != nil {
		b.Fatal(err)
	}
	for _, bv := range guidedBenchVocabs {
		ix, _ := guidedTrace(b, bv.file)
		row := randomRow(ix.VocabSize())
		b.Run(bv.name+"/free", func(b *testing.B) {
			s := sampling.New(p, 0)
			for i := 0; i < b.N; i++ {
				s.Sample(row, sampling.History{})
			}
		})
		b.Run(bv.name+"/constrained", func(b *testing.B) {
			s := sampling.New(p, 0)
			var dst []float32
			g := ix.Start()
			step := func() {
				if g.Done() {
					g = ix.Start()
				}
				if !applyMask(&dst, row, g.Mask()) {
					b.Fatal("empty mask")
				}
				if err := g.Advance(s.Sample(dst, sampling.History{})); err != nil {
					b.Fatal(err)
				}
			}
			// Warm the masks of the states this row's walks visit (a
			// running server has them cached after the first requests).
			for range 3000 {
				step()
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				step()
			}
		})
	}
}

func randomRow(n int) []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	row := make([]float32, n)
	for i := range row {
		row[i] = float32(r.NormFloat64() * 3)
	}
	return row
}
