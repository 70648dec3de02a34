package grammar

// Split masks. In a state whose stacks all share a bottom B (the context:
// the rules the output is nested in), most tokens never reach B: inside a
// JSON string, a token that does not close the string is allowed or not
// whatever the string is part of. The mask is then computed in two parts,
// after the context-independent tokens of XGrammar:
//
//   - the relative walk: the trie walk of the state with B cut off (the
//     relative state R). Its mask holds the tokens that stay inside R; it
//     also lists the trie nodes where a parse of R has ended (popped into
//     B). R does not depend on B, so this result is cached by R and shared
//     by every context R occurs in.
//   - the resumption: at each listed trie node, the walk goes on from F,
//     the set B continues with once R's rule is done.
//
// The union is the mask of the whole state, as each stack steps on its
// own. The recognizer's bounds count whole sets, so the split is used only
// when it cannot change what they cut: every set met in either part has at
// most half of maxGBNFStacks stacks, no transition came near a bound, and
// R's stacks stay within maxGBNFDepth once B is under them. Otherwise the
// whole state is walked.

// relResult is the relative walk of a relative state.
type relResult struct {
	mask   Mask
	bounds []int32 // trie nodes where a parse popped into the context
	stats  walkStats
}

// maskSplit computes into m (empty, no end tokens) the mask of state by a
// split, and says whether it did; on false m holds garbage.
func (c *gbnfConstraint) maskSplit(w *recognizer, mm *memo, state []int32, m Mask) bool {
	// The longest common bottom of the stacks; B keeps all but its last
	// entry so that every relative stack keeps its rule.
	first, common := []int32(nil), -1
	for i := 0; i < len(state); {
		n := int(state[i])
		s := state[i+1 : i+1+n]
		if first == nil {
			first, common = s, n
		} else {
			l := 0
			for l < common && l < n && s[l] == first[l] {
				l++
			}
			common = l
		}
		i += 1 + n
	}
	k := common - 1
	if k < 1 {
		return false
	}
	ctx := first[:k]
	r := make([]int32, 0, len(state))
	for i := 0; i < len(state); {
		n := int(state[i])
		r = append(r, int32(n-k))
		r = append(r, state[i+1+k:i+1+n]...)
		i += 1 + n
	}
	rkey := stateKey(r)
	rel, ok := c.rels.get(rkey)
	if !ok {
		if rel = c.relWalk(w, mm, r, rkey); rel == nil {
			return false
		}
		rel = c.rels.put(rkey, rel)
	}
	if rel.stats.fellBack || rel.stats.bound || rel.stats.size > maxGBNFStacks/2 || int(rel.stats.depth)+k > maxGBNFDepth {
		return false
	}
	// F: the context's top entry expanded over the rest of it.
	w.reset()
	parent := int32(-1)
	for _, pos := range ctx[:k-1] {
		parent = w.newNode(pos, parent)
	}
	lo := len(w.sets)
	w.work = 0
	w.expand(ctx[k-1], parent, -1, lo)
	hi := len(w.sets)
	if w.overflow || w.deep || w.work > maxGBNFWork/2 || hi == lo {
		return false
	}
	f := w.save(lo, hi)
	sid, ok := mm.intern(c.g, f, stateKey(f))
	if !ok {
		return false
	}
	copy(m, rel.mask)
	v := c.vocab
	w.stats = walkStats{on: true}
	w.stats.see(mm, sid)
	for _, node := range rel.bounds {
		for _, id := range v.tokIDs[v.tokStart[node]:v.tokStart[node+1]] {
			m.Set(id)
		}
		if v.edgeStart[node] < v.edgeStart[node+1] {
			w.walkMemo(mm, v, node, sid, m, nil)
		}
	}
	st := w.stats
	w.stats = walkStats{}
	return !st.fellBack && !st.bound && st.size <= maxGBNFStacks/2
}

// relWalk walks relative state r from the trie root; nil when the memo is
// full.
func (c *gbnfConstraint) relWalk(w *recognizer, mm *memo, r []int32, rkey string) *relResult {
	sid, ok := mm.intern(c.g, r, rkey)
	if !ok {
		return nil
	}
	res := &relResult{mask: NewMask(c.vocab.n)}
	w.stats = walkStats{on: true}
	w.stats.see(mm, sid)
	w.walkMemo(mm, c.vocab, 0, sid, res.mask, &res.bounds)
	res.stats = w.stats
	w.stats = walkStats{}
	if res.stats.fellBack {
		return nil
	}
	return res
}
