package bench

import (
	"slices"
	"strings"
	"testing"
)

// TestRerankSplit: the query is the prompt's first words (12 at most,
// half of a short prompt), the documents the rest in nearly equal parts,
// none empty, every word once and in order.
func TestRerankSplit(t *testing.T) {
	for _, tc := range []struct {
		words, n       int
		query, docs    int
		shortest, most int
	}{
		{100, 8, 12, 8, 11, 11}, {30, 4, 12, 4, 4, 5}, {10, 8, 5, 5, 1, 1}, {2, 3, 1, 1, 1, 1},
	} {
		w := make([]string, tc.words)
		for i := range w {
			w[i] = "w" + strings.Repeat("x", i%3)
		}
		q, docs := rerankSplit(strings.Join(w, " "), tc.n)
		if len(strings.Fields(q)) != tc.query || len(docs) != tc.docs {
			t.Fatalf("%d words into %d: query of %d words, %d documents", tc.words, tc.n, len(strings.Fields(q)), len(docs))
		}
		var all []string
		all = append(all, strings.Fields(q)...)
		for _, d := range docs {
			n := len(strings.Fields(d))
			if n < tc.shortest || n > tc.most {
				t.Fatalf("%d words into %d: a document of %d words", tc.words, tc.n, n)
			}
			all = append(all, strings.Fields(d)...)
		}
		if !slices.Equal(all, w) {
			t.Fatalf("%d words into %d: the words changed", tc.words, tc.n)
		}
	}
	if q, docs := rerankSplit("one", 4); q != "one" || len(docs) != 0 {
		t.Fatalf("one word: %q, %v", q, docs)
	}
}
