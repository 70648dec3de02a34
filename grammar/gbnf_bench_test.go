package grammar

import (
	"strings"
	"testing"
)

// gbnfBenchDoc is the output the json.gbnf benchmarks follow.
const gbnfBenchDoc = `{"name": "Ada Lovelace", "born": 1815, "tags": ["mathematics", "poetry", "engines"],
 "notes": {"analytical": true, "ratio": -1.5e3, "quote": "That brain of mine is something more than merely mortal"}, "children": null}`

// gbnfBenchTrace tokenizes gbnfBenchDoc greedily (the longest allowed
// token each time) and returns the tokens and the state before each.
func gbnfBenchTrace(b *testing.B, v *Vocab) (*gbnfConstraint, []int32, [][]int32) {
	c := compileGBNFTest(b, readGBNF(b, "json"), v)
	g := c.Start().(*gbnfGuide)
	var toks []int32
	var states [][]int32
	for out := gbnfBenchDoc; len(out) > 0; {
		best, bestLen := int32(-1), 0
		mask := g.Mask()
		for id, p := range v.pieces {
			if len(p) > bestLen && strings.HasPrefix(out, string(p)) && mask.Has(int32(id)) {
				best, bestLen = int32(id), len(p)
			}
		}
		if best < 0 {
			b.Fatalf("cannot tokenize %q", out)
		}
		states = append(states, g.state)
		if err := g.Advance(best); err != nil {
			b.Fatal(err)
		}
		toks = append(toks, best)
		out = out[bestLen:]
	}
	return c, toks, states
}

// BenchmarkGBNFMaskCached is the per-token cost of a json.gbnf output
// once its states' masks are cached: Mask (a cache hit) and Advance. One
// op is one token.
func BenchmarkGBNFMaskCached(b *testing.B) {
	for _, bv := range benchVocabs {
		b.Run(bv.name, func(b *testing.B) {
			c, toks, _ := gbnfBenchTrace(b, loadVocab(b, bv.file))
			var sink int
			b.ResetTimer()
			for i := 0; i < b.N; {
				g := c.Start()
				for _, id := range toks {
					mask := g.Mask()
					sink += int(mask[id>>6] & 1)
					if err := g.Advance(id); err != nil {
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

// BenchmarkGBNFMaskUncached is the cost of computing one state's mask
// without the mask cache, for the states of the trace, once the
// relative walks (gbnf_split.go) and the memo are warm: a state met in a
// nesting not seen before. One op is one mask.
func BenchmarkGBNFMaskUncached(b *testing.B) {
	for _, bv := range benchVocabs {
		b.Run(bv.name, func(b *testing.B) {
			c, _, states := gbnfBenchTrace(b, loadVocab(b, bv.file))
			w := &recognizer{g: c.g}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c.computeMask(w, states[i%len(states)])
			}
		})
	}
}

// BenchmarkGBNFMaskReference is the plain per-token twin, for comparison.
func BenchmarkGBNFMaskReference(b *testing.B) {
	c, _, states := gbnfBenchTrace(b, loadVocab(b, benchVocabs[0].file))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.referenceMask(states[i%len(states)])
	}
}

// BenchmarkCompileGBNF is the compile time of json.gbnf (masks are then
// computed lazily, state by state).
func BenchmarkCompileGBNF(b *testing.B) {
	src, v := readGBNF(b, "json"), byteVocab()
	for i := 0; i < b.N; i++ {
		if _, err := CompileGBNF(src, v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGBNFMaskCold computes the masks of every state of the trace
// on a fresh constraint (empty mask and relative-walk caches, no memo
// shared with other runs): the cost a new grammar pays the first time.
// One op is one whole trace; ns/mask is per state.
func BenchmarkGBNFMaskCold(b *testing.B) {
	for _, bv := range benchVocabs {
		b.Run(bv.name, func(b *testing.B) {
			v := loadVocab(b, bv.file)
			_, _, states := gbnfBenchTrace(b, v)
			src := readGBNF(b, "json")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				c := compileGBNFTest(b, src, v)
				w := &recognizer{g: c.g}
				b.StartTimer()
				for _, s := range states {
					c.computeMask(w, s)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(states)), "ns/mask")
		})
	}
}
