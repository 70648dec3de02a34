package sampling

import (
	"math"
	"sort"
)

// referenceDistribution is the plain twin of Sampler.Sample's optimised
// path: given penalised logits z ([vocab]) it returns the tokens that keep
// mass after min-p, top-k and top-p, in the order Sample walks them (by
// id), with their
// normalised probabilities. It sorts the whole vocabulary and is used by
// tests only. z must have a finite maximum and p must not be greedy.
func referenceDistribution(z []float32, p Params) ([]int32, []float64) {
	ids := make([]int32, len(z))
	for i := range ids {
		ids[i] = int32(i)
	}
	sort.SliceStable(ids, func(a, b int) bool { return better(z, ids[a], ids[b]) })
	m := float64(key(z[ids[0]]))
	prob := func(id int32) float64 {
		x := float64(key(z[id]))
		if math.IsInf(x, -1) {
			return 0
		}
		return math.Exp((x - m) / p.Temperature)
	}
	// min-p on probabilities relative to the best token.
	keep := ids[:0:0]
	for _, id := range ids {
		if pr := prob(id); pr > 0 && pr >= p.MinP {
			keep = append(keep, id)
		}
	}
	if p.TopK > 0 && p.TopK < len(keep) {
		keep = keep[:p.TopK]
	}
	if p.TopP < 1 {
		var total float64
		for _, id := range keep {
			total += prob(id)
		}
		var cum float64
		for i, id := range keep {
			cum += prob(id)
			if cum >= p.TopP*total {
				keep = keep[:i+1]
				break
			}
		}
	}
	sort.Slice(keep, func(a, b int) bool { return keep[a] < keep[b] })
	probs := make([]float64, len(keep))
	var total float64
	for i, id := range keep {
		probs[i] = prob(id)
		total += probs[i]
	}
	for i := range probs {
		probs[i] /= total
	}
	return keep, probs
}
