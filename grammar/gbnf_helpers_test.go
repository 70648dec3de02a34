package grammar

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// readGBNF reads testdata/gbnf/NAME.gbnf.
func readGBNF(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "gbnf", name+".gbnf"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// byteVocab (compile_test.go) has one token per byte and an end token, id 256.

func compileGBNFTest(t testing.TB, src string, v *Vocab) *gbnfConstraint {
	t.Helper()
	c, err := CompileGBNF(src, v)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return c.(*gbnfConstraint)
}

// gbnfAccepts feeds s byte by byte (a byte vocabulary) and says whether
// every byte was allowed and the output is then complete.
func gbnfAccepts(c *gbnfConstraint, s string) bool {
	g := c.Start().(*gbnfGuide)
	for i := 0; i < len(s); i++ {
		state, err := g.advanceBytes([]byte{s[i]})
		if err != nil {
			return false
		}
		g.state = state
	}
	return stateAccepts(g.state)
}

// gbnfWalk generates one output by sampling uniformly among the tokens
// the guide's mask allows (a seeded stand-in for a model at temperature
// 1), checking that each sampled token is accepted. After budget tokens
// it steers: the end token as soon as it is allowed, else a token that
// brings the output closer to completion. Errors go to t.Errorf (it may
// run in a goroutine); states, when not nil, collects the states met.
func gbnfWalk(t testing.TB, c *gbnfConstraint, r *rand.Rand, budget int, states *[][]int32) []byte {
	t.Helper()
	v := c.vocab
	g := c.Start().(*gbnfGuide)
	var out []byte
	for step := 0; step < budget+3000; step++ {
		if g.Done() {
			return out
		}
		if states != nil {
			*states = append(*states, g.state)
		}
		mask := g.Mask()
		var cands []int32
		for id := int32(0); int(id) < v.n; id++ {
			if mask.Has(id) {
				cands = append(cands, id)
			}
		}
		if len(cands) == 0 {
			t.Errorf("no token allowed after %q", out)
			return out
		}
		id := cands[r.IntN(len(cands))]
		if step >= budget {
			id = steer(g, cands, r)
		}
		if err := g.Advance(id); err != nil {
			t.Errorf("advance %d after %q: %v", id, out, err)
			return out
		}
		if isEOG(v, id) {
			if !g.Done() {
				t.Errorf("end token accepted but the guide is not done")
			}
			return out
		}
		out = append(out, v.pieces[id]...)
	}
	t.Errorf("walk did not finish: %q", out)
	return out
}

// steer picks the end token when allowed, else a random allowed token
// that shortens the way to completion.
func steer(g *gbnfGuide, cands []int32, r *rand.Rand) int32 {
	v := g.c.vocab
	for _, id := range cands {
		if isEOG(v, id) {
			return id
		}
	}
	d := g.distance()
	for _, i := range r.Perm(len(cands)) {
		id := cands[i]
		state, err := g.advanceBytes(v.pieces[id])
		if err != nil {
			continue
		}
		h := &gbnfGuide{c: g.c, state: state}
		if h.distance() < d {
			return id
		}
	}
	return cands[r.IntN(len(cands))]
}
