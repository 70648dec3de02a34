package synth

import "math"

// rng is a small deterministic generator (splitmix64) so that a seed
// names the same model on every machine and Go version.
type rng struct{ s uint64 }

func newRNG(seed uint64) *rng { return &rng{s: seed} }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// uniform returns a float64 in (0, 1).
func (r *rng) uniform() float64 {
	return (float64(r.next()>>11) + 0.5) / (1 << 53)
}

// normal returns a standard normal sample (Box-Muller, one of the pair).
func (r *rng) normal() float32 {
	u1, u2 := r.uniform(), r.uniform()
	return float32(math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2))
}

// hashName is FNV-1a of a tensor name, mixing it into the seed.
func hashName(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
