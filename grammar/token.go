package grammar

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"

	"oengine/internal/bytetrie"
)

// ErrTokenRejected is returned by Advance for a token the mask forbids.
var ErrTokenRejected = errors.New("grammar: token not allowed here")

// Mask is a bitset over token ids: bit id set means the token is allowed.
type Mask []uint64

// NewMask returns an empty mask for n tokens.
func NewMask(n int) Mask { return make(Mask, (n+63)/64) }

func (m Mask) Set(id int32) { m[id>>6] |= 1 << (uint(id) & 63) }
func (m Mask) Has(id int32) bool {
	return id >= 0 && int(id>>6) < len(m) && m[id>>6]&(1<<(uint(id)&63)) != 0
}

// Count is the number of allowed tokens.
func (m Mask) Count() int {
	n := 0
	for _, w := range m {
		n += bits.OnesCount64(w)
	}
	return n
}

// Vocab is a model vocabulary seen as bytes: a token trie over the pieces
// plus the end-of-generation tokens, allowed only in accepting states.
// Tokens with empty pieces (control tokens) are never allowed. Build it
// once per model; it is read-only and shared.
type Vocab struct {
	n   int
	eos []int32
	// Token trie over the pieces, node 0 the root, breadth first.
	edgeStart []int32 // edgeStart [nodes+1]: edges of node i are [edgeStart[i], edgeStart[i+1])
	edgeByte  []byte  // edgeByte [edges]
	edgeNode  []int32 // edgeNode [edges]: child node
	tokStart  []int32 // tokStart [nodes+1]: tokens ending at node i are tokIDs[tokStart[i]:tokStart[i+1]]
	tokIDs    []int32
	pieces    [][]byte
}

// NewVocab builds a Vocab from pieces indexed by token id (for example
// tokenizer.Piece for every id) and the end-of-generation ids.
func NewVocab(pieces [][]byte, eos []int32) *Vocab {
	v := &Vocab{n: len(pieces), eos: append([]int32(nil), eos...), pieces: pieces}
	// The trie of the non-empty pieces (internal/bytetrie): a node's
	// tokens are those whose piece ends there, in id order.
	ids := make([]int32, 0, len(pieces))
	for id, p := range pieces {
		if len(p) > 0 {
			ids = append(ids, int32(id))
		}
	}
	t := bytetrie.Build(pieces, ids)
	v.edgeStart, v.edgeByte, v.edgeNode, v.tokStart, v.tokIDs = t.EdgeStart, t.EdgeByte, t.EdgeNode, t.KeyStart, t.Keys
	return v
}

// Size is the number of token ids.
func (v *Vocab) Size() int { return v.n }

// Index pairs a DFA with a vocabulary and caches, per DFA state, the mask
// of allowed tokens. It is safe for concurrent use; share one per
// (constraint, model).
type Index struct {
	dfa   *DFA
	vocab *Vocab
	masks []atomic.Pointer[Mask] // masks [states], filled on first use
	// budget bounds the bytes of cached masks: past it, masks of new
	// states are computed on every use instead of kept, so one constraint
	// holds at most this much however many states a generation visits.
	budget int64
	used   atomic.Int64
}

// IndexMaskBytes is the mask cache budget of one Index (16 MiB: about 860
// masks of a 151k-token vocabulary).
const IndexMaskBytes = 16 << 20

// NewIndex returns an Index with an empty mask cache.
func NewIndex(d *DFA, v *Vocab) *Index {
	return &Index{dfa: d, vocab: v, masks: make([]atomic.Pointer[Mask], d.NumStates()), budget: IndexMaskBytes}
}

// DFA returns the automaton.
func (ix *Index) DFA() *DFA { return ix.dfa }

// Mask returns the allowed tokens in state s: every token whose bytes keep
// the DFA live from s, plus the end-of-generation tokens when s accepts.
// The result is cached and must not be modified.
func (ix *Index) Mask(s int32) Mask {
	if m := ix.masks[s].Load(); m != nil {
		return *m
	}
	// No lock: two sequences reaching a new state together may both
	// compute its (identical) mask; the first stored wins.
	m := ix.ComputeMask(s)
	if size := int64(len(m) * 8); ix.used.Add(size) > ix.budget {
		ix.used.Add(-size)
		return m
	}
	if !ix.masks[s].CompareAndSwap(nil, &m) {
		ix.used.Add(-int64(len(m) * 8)) // another sequence stored it first
		return *ix.masks[s].Load()
	}
	return m
}

// cachedBytes is the size of the masks kept.
func (ix *Index) cachedBytes() int64 { return ix.used.Load() }

// ComputeMask computes the mask of state s without the cache: a
// depth-first walk of the token trie alongside the DFA, pruning every
// subtree whose prefix is already dead.
func (ix *Index) ComputeMask(s int32) Mask {
	v, d := ix.vocab, ix.dfa
	m := NewMask(v.n)
	if d.Accepting(s) {
		for _, id := range v.eos {
			m.Set(id)
		}
	}
	type frame struct{ node, state int32 }
	stack := []frame{{0, s}}
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		row := d.trans[int(f.state)<<8 : int(f.state)<<8+256]
		for e := v.edgeStart[f.node]; e < v.edgeStart[f.node+1]; e++ {
			next := row[v.edgeByte[e]]
			if next < 0 {
				continue
			}
			child := v.edgeNode[e]
			for _, id := range v.tokIDs[v.tokStart[child]:v.tokStart[child+1]] {
				m.Set(id)
			}
			if v.edgeStart[child] < v.edgeStart[child+1] {
				stack = append(stack, frame{child, next})
			}
		}
	}
	return m
}

// referenceMask is the plain twin of ComputeMask: every token's bytes
// walked one by one through the DFA.
func (ix *Index) referenceMask(s int32) Mask {
	v, d := ix.vocab, ix.dfa
	m := NewMask(v.n)
	for id, p := range v.pieces {
		if len(p) == 0 {
			continue
		}
		t := s
		for _, b := range p {
			t = d.Next(t, b)
		}
		if t >= 0 {
			m.Set(int32(id))
		}
	}
	if d.Accepting(s) {
		for _, id := range v.eos {
			m.Set(id)
		}
	}
	return m
}

// Matcher follows one generation: it holds the DFA state after the tokens
// accepted so far. One per sequence; not safe for concurrent use.
type Matcher struct {
	ix    *Index
	state int32
	ended bool // an end-of-generation token was accepted
}

// NewMatcher starts a generation at the DFA start state.
func (ix *Index) NewMatcher() *Matcher { return &Matcher{ix: ix} }

// Mask is the set of tokens allowed next (empty once ended).
func (m *Matcher) Mask() Mask {
	if m.ended {
		return NewMask(m.ix.vocab.n)
	}
	return m.ix.Mask(m.state)
}

// Advance consumes a token; a token the mask forbids is ErrTokenRejected
// and leaves the state unchanged.
func (m *Matcher) Advance(id int32) error {
	if m.ended {
		return fmt.Errorf("%w: generation already ended", ErrTokenRejected)
	}
	v := m.ix.vocab
	if id < 0 || int(id) >= v.n {
		return fmt.Errorf("%w: token %d outside the vocabulary", ErrTokenRejected, id)
	}
	for _, e := range v.eos {
		if e == id {
			if !m.ix.dfa.Accepting(m.state) {
				return fmt.Errorf("%w: end of generation before the output is complete", ErrTokenRejected)
			}
			m.ended = true
			return nil
		}
	}
	p := v.pieces[id]
	if len(p) == 0 {
		return fmt.Errorf("%w: token %d has no text", ErrTokenRejected, id)
	}
	s := m.state
	for _, b := range p {
		if s = m.ix.dfa.Next(s, b); s < 0 {
			return fmt.Errorf("%w: token %d (%q)", ErrTokenRejected, id, p)
		}
	}
	m.state = s
	return nil
}

// Accepting says whether the output so far is complete (an end token may
// follow).
func (m *Matcher) Accepting() bool { return m.ix.dfa.Accepting(m.state) }

// Done says whether the generation must stop: an end token was accepted,
// or the output is complete and no byte can extend it (the engine then
// finishes the sequence with reason STOP).
func (m *Matcher) Done() bool {
	if m.ended {
		return true
	}
	if !m.Accepting() {
		return false
	}
	row := m.ix.dfa.trans[int(m.state)<<8 : int(m.state)<<8+256]
	for _, t := range row {
		if t >= 0 {
			return false
		}
	}
	return true
}

// State is the current DFA state.
func (m *Matcher) State() int32 { return m.state }
