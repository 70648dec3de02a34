package tokenizer

import "oengine/internal/bytetrie"

// byteTrie is a trie over byte strings, flattened into arrays: node n's
// children are the edges first[n]..first[n+1]-1, whose labels are sorted,
// and value[n] is the id stored at n (-1 for none). Node 0 is the root;
// its children are also indexed by byte in root for a direct first step.
// The unigram tokenizer (ugm.go) walks it byte by byte.
type byteTrie struct {
	first  []int32 // per node, one extra entry at the end
	labels []byte  // per edge
	child  []int32 // per edge
	value  []int32 // per node
	root   [256]int32
}

// newByteTrie builds the trie of keys, keys[i] storing ids[i]. When a key
// occurs twice, the later one's id is kept (a later insertion overwrites,
// as in llama.cpp's naive_trie).
func newByteTrie(keys []string, ids []int32) *byteTrie {
	all := make([]int32, len(keys))
	for i := range all {
		all[i] = int32(i)
	}
	bt := bytetrie.Build(keys, all)
	tr := &byteTrie{first: bt.EdgeStart, labels: bt.EdgeByte, child: bt.EdgeNode, value: make([]int32, len(bt.KeyStart)-1)}
	for n := range tr.value {
		tr.value[n] = -1
		if lo, hi := bt.KeyStart[n], bt.KeyStart[n+1]; hi > lo {
			tr.value[n] = ids[bt.Keys[hi-1]] // keys in index order: the last equal key wins
		}
	}
	for c := range tr.root {
		tr.root[c] = tr.scan(0, byte(c))
	}
	return tr
}

// next is the child of node n along byte c, or -1.
func (tr *byteTrie) next(n int32, c byte) int32 {
	if n == 0 {
		return tr.root[c]
	}
	return tr.scan(n, c)
}

func (tr *byteTrie) scan(n int32, c byte) int32 {
	lo, hi := tr.first[n], tr.first[n+1]
	if hi-lo <= 8 {
		for i := lo; i < hi; i++ {
			if tr.labels[i] == c {
				return tr.child[i]
			}
		}
		return -1
	}
	for lo < hi {
		mid := int32(uint32(lo+hi) >> 1)
		if tr.labels[mid] < c {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < tr.first[n+1] && tr.labels[lo] == c {
		return tr.child[lo]
	}
	return -1
}

// pathLen is the length of the longest prefix of s that is a path from the
// root, whether or not a key ends there (llama.cpp's
// naive_trie::get_longest_prefix, which checks no values).
func (tr *byteTrie) pathLen(s string) int {
	n := int32(0)
	for i := 0; i < len(s); i++ {
		if n = tr.next(n, s[i]); n < 0 {
			return i
		}
	}
	return len(s)
}
