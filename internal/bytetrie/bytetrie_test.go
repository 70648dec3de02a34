package bytetrie

import (
	"slices"
	"strings"
	"testing"
)

// TestBuild: every selected key is found by walking its bytes from the
// root and ends at the node that lists it, keys of equal text in
// ascending order; unselected keys are absent; edges are sorted.
func TestBuild(t *testing.T) {
	text := []string{"ab", "a", "b", "", "abc", "ab", "zz", "a"}
	keys := []int32{0, 1, 2, 4, 5, 7} // not 3 (empty) nor 6
	tr := Build(text, keys)
	walk := func(s string) int32 {
		n := int32(0)
		for i := 0; i < len(s); i++ {
			next := int32(-1)
			for e := tr.EdgeStart[n]; e < tr.EdgeStart[n+1]; e++ {
				if tr.EdgeByte[e] == s[i] {
					next = tr.EdgeNode[e]
				}
			}
			if next < 0 {
				return -1
			}
			n = next
		}
		return n
	}
	for _, tc := range []struct {
		s    string
		want []int32
	}{{"a", []int32{1, 7}}, {"ab", []int32{0, 5}}, {"b", []int32{2}}, {"abc", []int32{4}}, {"", nil}} {
		n := walk(tc.s)
		if n < 0 || !slices.Equal(tr.Keys[tr.KeyStart[n]:tr.KeyStart[n+1]], tc.want) {
			t.Fatalf("%q: node %d with keys %v, want %v", tc.s, n, tr.Keys[tr.KeyStart[max(n, 0)]:tr.KeyStart[max(n, 0)+1]], tc.want)
		}
	}
	if walk("zz") >= 0 || walk("z") >= 0 {
		t.Fatal("an unselected key is in the trie")
	}
	for n := 0; n+1 < len(tr.EdgeStart); n++ {
		if !slices.IsSorted(tr.EdgeByte[tr.EdgeStart[n]:tr.EdgeStart[n+1]]) {
			t.Fatalf("node %d: edges not sorted", n)
		}
	}
	// []byte texts build the same trie.
	bs := make([][]byte, len(text))
	for i, s := range text {
		bs[i] = []byte(strings.Clone(s))
	}
	if b := Build(bs, keys); !slices.Equal(b.EdgeByte, tr.EdgeByte) || !slices.Equal(b.Keys, tr.Keys) || !slices.Equal(b.EdgeNode, tr.EdgeNode) {
		t.Fatal("[]byte and string texts build different tries")
	}
}
