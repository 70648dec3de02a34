package grammar

// Constraint is a compiled constraint over one model's vocabulary: any
// kind (regex, JSON Schema, choice, grammar) the engine can apply. It is
// read-only and shared by every request that uses it; each generated
// output follows it with its own Guide.
type Constraint interface {
	// Start returns a Guide at the beginning of an output.
	Start() Guide
	// VocabSize is the number of token ids the masks cover.
	VocabSize() int
}

// Guide follows one output of a constrained generation. Not safe for
// concurrent use; the engine calls it from its step loop only.
type Guide interface {
	// Mask is the set of tokens allowed next: every token whose bytes keep
	// the output a prefix of an accepted string, plus the end-of-generation
	// tokens where the output so far is complete. The caller must not
	// modify it. It may be empty (no token of the vocabulary can continue):
	// the engine then fails the output.
	Mask() Mask
	// Advance consumes a sampled token; a token the mask forbids is
	// ErrTokenRejected and leaves the guide unchanged.
	Advance(id int32) error
	// Done says whether the output must end now: an end-of-generation
	// token was accepted, or the output is complete and nothing can extend
	// it (the engine finishes it with reason stop).
	Done() bool
}

// Start returns a Matcher at the DFA start state.
func (ix *Index) Start() Guide { return ix.NewMatcher() }

// VocabSize is the vocabulary's number of token ids.
func (ix *Index) VocabSize() int { return ix.vocab.n }

var _ Constraint = (*Index)(nil)
