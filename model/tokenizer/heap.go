package tokenizer

// The merge loops of BPE (bpe.go) and SentencePiece (spm.go) keep their
// candidate pairs in one kind of priority queue: a binary heap over a
// slice, generic over the element so that pushing a pair does not box it
// (container/heap's interface would allocate per push). The sift steps are
// container/heap's, so equal elements come out in the same order.

// ordered is an element of a mergeQueue: a.before(b) is a strict order,
// and pop returns an element that no other is before.
type ordered[T any] interface {
	before(T) bool
}

// mergeQueue is a binary heap of candidate merges.
type mergeQueue[T ordered[T]] []T

func (q *mergeQueue[T]) push(x T) {
	*q = append(*q, x)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

// pop removes and returns the first element; the queue must not be empty.
func (q *mergeQueue[T]) pop() T {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && h[r].before(h[l]) {
			m = r
		}
		if !h[m].before(h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}
