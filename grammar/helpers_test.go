package grammar

import (
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"oengine/internal/refdata"
	"oengine/model/gguf"
	"oengine/model/tokenizer"
)

var (
	vocabMu    sync.Mutex
	vocabCache = map[string]*Vocab{}
)

// loadVocab builds the Vocab of one ../shared/testdata/tokenizer file
// from tokenizer.Piece and the end-of-generation tokens.
func loadVocab(t testing.TB, name string) *Vocab {
	t.Helper()
	path := filepath.Join(refdata.Dir(t, "tokenizer"), name)
	vocabMu.Lock()
	defer vocabMu.Unlock()
	if v, ok := vocabCache[path]; ok {
		return v
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatalf("tokenizer %s: %v", name, err)
	}
	pieces := make([][]byte, tok.VocabSize())
	for id := range pieces {
		pieces[id] = tok.Piece(int32(id))
	}
	v := NewVocab(pieces, tok.EOGTokens())
	vocabCache[path] = v
	return v
}

// randomWalk generates one output by sampling uniformly among the tokens
// the mask allows (a seeded stand-in for a model at temperature 1). After
// budget tokens it steers: only tokens that bring the DFA closer to
// acceptance, and the end token as soon as it is allowed. It fails the
// test (Errorf: it may run in a goroutine) if a sampled token is refused
// or the walk does not finish.
func randomWalk(t testing.TB, ix *Index, r *rand.Rand, budget int) []byte {
	t.Helper()
	v, d := ix.vocab, ix.dfa
	m := ix.NewMatcher()
	var out []byte
	for step := 0; step < budget+2000; step++ {
		if m.Done() {
			return out
		}
		mask := m.Mask()
		var cands []int32
		for id := int32(0); int(id) < v.n; id++ {
			if !mask.Has(id) {
				continue
			}
			if step >= budget {
				if isEOS(v, id) {
					cands = []int32{id}
					break
				}
				end := m.State()
				for _, b := range v.pieces[id] {
					end = d.Next(end, b)
				}
				if d.DistToAccept(end) >= d.DistToAccept(m.State()) {
					continue
				}
			}
			cands = append(cands, id)
		}
		if len(cands) == 0 {
			t.Errorf("state %d: no token allowed after %q", m.State(), out)
			return out
		}
		id := cands[r.IntN(len(cands))]
		if err := m.Advance(id); err != nil {
			t.Errorf("advance %d after %q: %v", id, out, err)
			return out
		}
		if !isEOS(v, id) {
			out = append(out, v.pieces[id]...)
		}
	}
	t.Errorf("walk did not finish: %q", out)
	return out
}

func isEOS(v *Vocab, id int32) bool {
	for _, e := range v.eos {
		if e == id {
			return true
		}
	}
	return false
}
