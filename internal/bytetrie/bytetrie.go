// Package bytetrie builds a trie over byte strings flattened into arrays,
// the layout the grammar automaton's token trie (grammar.Vocab) and the
// unigram tokenizer's piece trie (model/tokenizer) walk: nodes numbered
// breadth first from the root (node 0), each node's edges contiguous and
// sorted by byte.
package bytetrie

import (
	"cmp"
	"slices"
)

// Trie is the flattened trie. Node n's edges are [EdgeStart[n],
// EdgeStart[n+1]), labelled EdgeByte and leading to EdgeNode; the keys
// that end at node n are Keys[KeyStart[n]:KeyStart[n+1]], in ascending
// order.
type Trie struct {
	EdgeStart []int32 // [nodes+1]
	EdgeByte  []byte  // [edges]
	EdgeNode  []int32 // [edges]
	KeyStart  []int32 // [nodes+1]
	Keys      []int32
}

// Build makes the trie of the strings text[k] for the keys k listed in
// keys (the caller's choice of which; an empty string ends at the root).
// Sorting the keys by (text, key) makes a node a run of keys sharing a
// prefix: those ending there first, then the children in byte order.
func Build[S ~string | ~[]byte](text []S, keys []int32) Trie {
	order := slices.Clone(keys)
	slices.SortFunc(order, func(a, b int32) int {
		if c := compare(text[a], text[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	var t Trie
	type span struct{ lo, hi, depth int }
	queue := []span{{0, len(order), 0}}
	for q := 0; q < len(queue); q++ {
		sp := queue[q]
		t.EdgeStart = append(t.EdgeStart, int32(len(t.EdgeByte)))
		t.KeyStart = append(t.KeyStart, int32(len(t.Keys)))
		i := sp.lo
		for i < sp.hi && len(text[order[i]]) == sp.depth {
			t.Keys = append(t.Keys, order[i])
			i++
		}
		for i < sp.hi {
			c := text[order[i]][sp.depth]
			j := i + 1
			for j < sp.hi && text[order[j]][sp.depth] == c {
				j++
			}
			t.EdgeByte = append(t.EdgeByte, c)
			t.EdgeNode = append(t.EdgeNode, int32(len(queue)))
			queue = append(queue, span{i, j, sp.depth + 1})
			i = j
		}
	}
	t.EdgeStart = append(t.EdgeStart, int32(len(t.EdgeByte)))
	t.KeyStart = append(t.KeyStart, int32(len(t.Keys)))
	return t
}

// compare orders byte strings as bytes.Compare and strings.Compare do,
// without converting one kind to the other.
func compare[S ~string | ~[]byte](a, b S) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return cmp.Compare(a[i], b[i])
		}
	}
	return cmp.Compare(len(a), len(b))
}
