package grammar

import (
	"math/rand/v2"
	"testing"
)

var benchVocabs = []struct{ name, file string }{
	{"32k-llama-spm", "ggml-vocab-llama-spm.gguf"},
	{"151k-qwen3", "ggml-vocab-qwen3.gguf"},
}

// benchTrace is a random walk through the "person" schema as the tokens
// and the DFA state before each of them.
func benchTrace(b *testing.B, v *Vocab) (*Index, []int32, []int32) {
	d, err := CompileSchema([]byte(testSchemas["person"]), SchemaOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ix := NewIndex(d, v)
	m := ix.NewMatcher()
	r := rand.New(rand.NewPCG(6, 6))
	var toks, states []int32
	for !m.Done() && len(toks) < 200 {
		mask := m.Mask()
		var cands []int32
		for id := int32(0); int(id) < v.n; id++ {
			if mask.Has(id) && (len(toks) < 60 || isEOS(v, id) || shorter(ix, m.State(), id)) {
				cands = append(cands, id)
			}
		}
		id := cands[r.IntN(len(cands))]
		states = append(states, m.State())
		toks = append(toks, id)
		if err := m.Advance(id); err != nil {
			b.Fatal(err)
		}
	}
	return ix, toks, states
}

func shorter(ix *Index, s, id int32) bool {
	end := s
	for _, c := range ix.vocab.pieces[id] {
		end = ix.dfa.Next(end, c)
	}
	return ix.dfa.DistToAccept(end) < ix.dfa.DistToAccept(s)
}

// BenchmarkMaskCached is the per-token cost of a constrained sequence once
// its states' masks are cached: Mask (a cache load) and Advance. One op is
// one token.
func BenchmarkMaskCached(b *testing.B) {
	for _, bv := range benchVocabs {
		b.Run(bv.name, func(b *testing.B) {
			ix, toks, _ := benchTrace(b, loadVocab(b, bv.file))
			var sink int
			b.ResetTimer()
			for i := 0; i < b.N; {
				m := ix.NewMatcher()
				for _, id := range toks {
					mask := m.Mask()
					sink += int(mask[id>>6] & 1)
					if err := m.Advance(id); err != nil {
						b.Fatal(err)
					}
					if i++; i == b.N {
						break
					}
				}
			}
			_ = sink
		})
	}
}

// BenchmarkMaskUncached is the cost of computing one state's mask (trie
// walk) for the states of the same trace. One op is one mask.
func BenchmarkMaskUncached(b *testing.B) {
	for _, bv := range benchVocabs {
		b.Run(bv.name, func(b *testing.B) {
			ix, _, states := benchTrace(b, loadVocab(b, bv.file))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ix.ComputeMask(states[i%len(states)])
			}
		})
	}
}

// BenchmarkMaskReference is the plain per-token twin, for comparison.
func BenchmarkMaskReference(b *testing.B) {
	ix, _, states := benchTrace(b, loadVocab(b, benchVocabs[0].file))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ix.referenceMask(states[i%len(states)])
	}
}

// BenchmarkCompileSchema is the compile time of typical schemas to a DFA
// (the token masks are then filled lazily, state by state).
func BenchmarkCompileSchema(b *testing.B) {
	for _, name := range []string{"person", "refs", "nested"} {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := CompileSchema([]byte(testSchemas[name]), SchemaOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNewVocab is the once-per-model cost of the token trie.
func BenchmarkNewVocab(b *testing.B) {
	for _, bv := range benchVocabs {
		b.Run(bv.name, func(b *testing.B) {
			v := loadVocab(b, bv.file)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				NewVocab(v.pieces, v.eos)
			}
		})
	}
}
