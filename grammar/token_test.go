package grammar

import "testing"

// TestIndexMaskBudget: past its byte budget an Index computes masks of
// new states without keeping them: the masks stay right and the cache
// stops growing (a client's constraint cannot make the server hold more).
func TestIndexMaskBudget(t *testing.T) {
	d, err := CompileRegex(`[a-z]{40}`)
	if err != nil {
		t.Fatal(err)
	}
	v := byteVocab()
	ix := NewIndex(d, v)
	maskBytes := int64(len(NewMask(v.Size())) * 8)
	ix.budget = 5 * maskBytes
	m := ix.NewMatcher()
	for i := 0; i < 40; i++ {
		if got, want := m.Mask(), ix.referenceMask(m.State()); !equalMasks(got, want) {
			t.Fatalf("state %d: mask differs from the reference", m.State())
		}
		if err := m.Advance(int32('a' + i%26)); err != nil {
			t.Fatal(err)
		}
	}
	if ix.cachedBytes() != 5*maskBytes {
		t.Fatalf("cache holds %d bytes, want the budget %d", ix.cachedBytes(), 5*maskBytes)
	}
	kept := 0
	for s := range ix.masks {
		if ix.masks[s].Load() != nil {
			kept++
		}
	}
	if kept != 5 {
		t.Fatalf("%d masks kept, want 5", kept)
	}
}
