package sampling

import (
	"math"
	"slices"
	"sync"
)

// scratch holds the per-call work buffers of Sample and ComputeLogprobs.
// They are pooled, so a busy engine reuses a few of them instead of holding
// vocabulary-sized buffers per sequence.
type scratch struct {
	z     []float32 // [vocab] penalised logits
	idx   []int32   // [vocab] capacity: candidate token ids
	w     []float64 // [vocab] candidate weights exp((z-m)/T)
	top   []int32   // [vocab] capacity: heap / bucket members
	aux   []int32   // rank counters of ComputeLogprobs
	bmass []float64 // [topPBuckets] mass per bucket
}

var scratchPool sync.Pool // of *scratch

func getScratch(v int) *scratch {
	sc, _ := scratchPool.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	if cap(sc.z) < v {
		sc.z = make([]float32, v)
		sc.idx = make([]int32, 0, v)
		sc.w = make([]float64, v)
		sc.top = make([]int32, 0, v)
	}
	if sc.bmass == nil {
		sc.bmass = make([]float64, topPBuckets)
	}
	return sc
}

func putScratch(sc *scratch) { scratchPool.Put(sc) }

func isNaN32(x float32) bool { return x != x }

// key orders logits: NaN sorts as -Inf.
func key(x float32) float32 {
	if x != x {
		return float32(math.Inf(-1))
	}
	return x
}

// better is the total order used everywhere: higher logit first, ties to
// the lower token id. z must hold no NaN at a and b (callers filter NaN out
// or sanitise with key first), which keeps this small enough to inline.
func better(z []float32, a, b int32) bool {
	x, y := z[a], z[b]
	return x > y || (x == y && a < b)
}

// argmax returns the best token under better (NaN never wins; all-NaN gives
// token 0).
func argmax(z []float32) int32 {
	best := -1
	var bv float32
	for i, x := range z {
		if isNaN32(x) {
			continue
		}
		if best < 0 || x > bv {
			best, bv = i, x
		}
	}
	if best < 0 {
		return 0
	}
	return int32(best)
}

// maxValue returns the largest non-NaN value of z (-Inf when there is none).
func maxValue(z []float32) float32 {
	m := float32(math.Inf(-1))
	for _, x := range z {
		if x > m {
			m = x
		}
	}
	return m
}

// selectTop permutes ids so that ids[:k] holds the k best of them (under
// better) in best-first order, and returns ids[:k]. No full sort: a heap of
// the k best seen, O(n + k log k) typical, O(n log k) worst case.
func selectTop(z []float32, ids []int32, k int) []int32 {
	h := heapSelect(z, ids, k)
	// Heap sort: popping the worst to the end leaves best-first order.
	for end := len(h) - 1; end > 0; end-- {
		h[0], h[end] = h[end], h[0]
		siftDown(z, h[:end], 0)
	}
	return h
}

// heapSelect permutes ids so that ids[:k] is a heap of the k best ids (root
// ids[0] = the worst of them, i.e. the k-th best) and returns ids[:k].
func heapSelect(z []float32, ids []int32, k int) []int32 {
	if k > len(ids) {
		k = len(ids)
	}
	if k <= 0 {
		return ids[:0]
	}
	h := ids[:k]
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(z, h, i)
	}
	for j := k; j < len(ids); j++ {
		if better(z, ids[j], h[0]) {
			ids[j], h[0] = h[0], ids[j]
			siftDown(z, h, 0)
		}
	}
	return h
}

// topKScan returns, in id order, the k best finite tokens of z that are
// >= cut (all of them when there are fewer), in one pass: a heap of the k
// best so far whose root (the k-th best) rejects most tokens with a single
// comparison. ids is the buffer to use (capacity >= k).
func topKScan(z []float32, cut float32, k int, ids []int32) []int32 {
	h := ids[:0]
	i := 0
	for ; i < len(z) && len(h) < k; i++ {
		if x := z[i]; x >= cut && !math.IsInf(float64(x), 0) {
			h = append(h, int32(i))
		}
	}
	if len(h) == k {
		for j := k/2 - 1; j >= 0; j-- {
			siftDown(z, h, j)
		}
		root := z[h[0]]
		for ; i < len(z); i++ {
			// i is above every id in the heap, so a tie with the root loses;
			// !(x > root) also skips NaN. x > root >= cut, and x is not
			// +Inf because the maximum is finite.
			if x := z[i]; !(x > root) {
				continue
			}
			h[0] = int32(i)
			siftDown(z, h, 0)
			root = z[h[0]]
		}
	}
	slices.Sort(h)
	return h
}

// filterWeights collects, in id order, the finite tokens of z that are >=
// cut, with their weights exp((z-m)/T) and the weights' sum (added in id
// order). w must have capacity for len(z) weights: every token's weight is
// computed first (expNegScaled, four at a time), then the kept ones are
// moved down in place.
func filterWeights(z []float32, cut, m float32, invT float64, ids []int32, w []float64) ([]int32, []float64, float64) {
	w = w[:len(z)]
	expNegScaled(w, z, float64(m), invT)
	var sum float64
	n := 0
	for i, x := range z {
		if x >= cut && !math.IsInf(float64(x), 0) { // NaN fails x >= cut
			ids = append(ids, int32(i))
			w[n] = w[i]
			sum += w[i]
			n++
		}
	}
	return ids, w[:n], sum
}

// expNegScaledGo writes w[i] = expNeg((float64(z[i]) − m) · invT): the
// plain twin of expNegScaled. Values above m (not used) give 1.
func expNegScaledGo(w []float64, z []float32, m, invT float64) {
	_ = w[:len(z)]
	for i, x := range z {
		w[i] = expNeg(min((float64(x)-m)*invT, 0))
	}
}

// siftDown restores the heap invariant (every child is better than its
// parent) below position i.
func siftDown(z []float32, h []int32, i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l // the worse child
		if r := l + 1; r < n && better(z, h[l], h[r]) {
			c = r
		}
		if better(z, h[c], h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// weights writes w[i] = exp((z[ids[i]] - m) * invT) and returns their sum.
// m is the maximum of z, so every weight is in [0, 1].
func weights(z []float32, ids []int32, m float32, invT float64, w []float64) float64 {
	var sum float64
	fm := float64(m)
	for i, id := range ids {
		x := expNeg((float64(z[id]) - fm) * invT)
		w[i] = x
		sum += x
	}
	return sum
}

// Top-p buckets: a candidate's bucket is floor(d * topPBuckets/topPSpan)
// with d = (m - z)/T = -ln(weight), clamped to the last bucket. Buckets are
// monotonic in the order better, so whole buckets can be kept or dropped and
// only the bucket where the cumulative mass crosses top_p is sorted.
const (
	topPBuckets = 2048
	topPSpan    = 32.0 // weights below e^-32 share the last bucket
)

func bucketOf(x float32, fm, invT float64) int {
	d := (fm - float64(x)) * invT * (topPBuckets / topPSpan)
	if !(d < topPBuckets-1) { // also catches NaN
		return topPBuckets - 1
	}
	return int(d)
}

// topP keeps the shortest best-first prefix of cand (id order, weights w,
// sum total) whose mass reaches p*total, filtering cand and w in place (id
// order kept). It returns them with the kept mass. Cost O(n + b log b) for
// b candidates in the crossing bucket, instead of sorting all n.
func topP(z []float32, cand []int32, w []float64, total, p float64, m float32, invT float64, sc *scratch) ([]int32, []float64, float64) {
	need := p * total
	fm := float64(m)
	mass := sc.bmass
	clear(mass)
	for i, id := range cand {
		mass[bucketOf(z[id], fm, invT)] += w[i]
	}
	cross, cum := -1, 0.0
	for b, x := range mass {
		if x == 0 {
			continue
		}
		if cum+x >= need {
			cross = b
			break
		}
		cum += x
		cross = b // rounding fallback: the last non-empty bucket
	}
	// Sort the crossing bucket best-first and find the last kept token.
	members := sc.top[:0]
	for _, id := range cand {
		if bucketOf(z[id], fm, invT) == cross {
			members = append(members, id)
		}
	}
	members = selectTop(z, members, len(members))
	last := members[len(members)-1]
	for _, id := range members {
		cum += expNeg((float64(z[id]) - fm) * invT)
		if cum >= need {
			last = id
			break
		}
	}
	n := 0
	var kept float64
	for i, id := range cand {
		b := bucketOf(z[id], fm, invT)
		if b < cross || (b == cross && (id == last || better(z, id, last))) {
			cand[n], w[n] = id, w[i]
			kept += w[i]
			n++
		}
	}
	return cand[:n], w[:n], kept
}
