package cpu

import "math"

// Plain float64 reference twins of the kernels in ops.go, ops_rope.go and
// attn.go. They favour obviousness over speed; tests compare the kernels to
// them.

// RMSNormRef is the reference twin of RMSNorm.
func RMSNormRef(dst, x, w []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	scale := 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
	for i, v := range x {
		y := float64(v) * scale
		if w != nil {
			y *= float64(w[i])
		}
		dst[i] = float32(y)
	}
}

// SwiGLURef is the reference twin of SwiGLU.
func SwiGLURef(dst, gate, up []float32) {
	for i := range dst {
		g := float64(gate[i])
		dst[i] = float32(g / (1 + math.Exp(-g)) * float64(up[i]))
	}
}

// SwiGLUOAIRef is SwiGLUOAI in float64: the formula itself.
func SwiGLUOAIRef(dst, gate, up []float32, alpha, limit float32) {
	for i := range dst {
		x := math.Min(float64(gate[i]), float64(limit))
		y := math.Max(-float64(limit), math.Min(float64(up[i]), float64(limit)))
		dst[i] = float32(x / (1 + math.Exp(-float64(alpha)*x)) * (y + 1))
	}
}

// GeGLURef is GeGLU in float64 with math.Tanh: the formula itself.
func GeGLURef(dst, gate, up []float32) {
	for i := range dst {
		x := float64(gate[i])
		g := 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
		dst[i] = float32(g * float64(up[i]))
	}
}

// LayerNormRef is the reference twin of LayerNorm, in float64.
func LayerNormRef(dst, x, w, b []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v)
	}
	mean := sum / float64(len(x))
	var ss float64
	for _, v := range x {
		ss += (float64(v) - mean) * (float64(v) - mean)
	}
	scale := 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
	for i, v := range x {
		y := (float64(v) - mean) * scale
		if w != nil {
			y *= float64(w[i])
		}
		if b != nil {
			y += float64(b[i])
		}
		dst[i] = float32(y)
	}
}

// GELURef is the reference twin of GELU, in float64.
func GELURef(dst, x []float32) {
	for i := range dst {
		v := float64(x[i])
		dst[i] = float32(0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))))
	}
}

// SoftmaxRef is the reference twin of Softmax.
func SoftmaxRef(x []float32) {
	if len(x) == 0 {
		return
	}
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v) - m)
	}
	for i, v := range x {
		x[i] = float32(math.Exp(float64(v)-m) / sum)
	}
}

// RopeRef is the reference twin of RopeCache followed by Rope: the angles
// come straight from math.Pow in float64.
func RopeRef(x []float32, heads, headDim, nRot int, pos int32, base, freqScale float32, factors []float32, neox bool) {
	half := nRot / 2
	for h := 0; h < heads; h++ {
		v := x[h*headDim : (h+1)*headDim]
		for j := 0; j < half; j++ {
			theta := float64(pos) * math.Pow(float64(base), -2*float64(j)/float64(nRot))
			if factors != nil {
				theta /= float64(factors[j])
			}
			theta *= float64(freqScale)
			c, s := math.Cos(theta), math.Sin(theta)
			i0, i1 := 2*j, 2*j+1
			if neox {
				i0, i1 = j, j+half
			}
			a, b := float64(v[i0]), float64(v[i1])
			v[i0] = float32(a*c - b*s)
			v[i1] = float32(a*s + b*c)
		}
	}
}

// AttendRef is the reference twin of Attend (same arguments, no scratch):
// every value is read through At and the sums run in float64.
func AttendRef(out, q []float32, g int, k, v KVRows, table []int32, n, off int, scale float32) {
	d := len(q) / g
	for h := 0; h < g; h++ {
		qh := q[h*d : (h+1)*d]
		s := make([]float64, n)
		m := math.Inf(-1)
		for p := 0; p < n; p++ {
			var dot float64
			for j := 0; j < d; j++ {
				dot += float64(qh[j]) * float64(k.At(table, p, off+j))
			}
			s[p] = dot * float64(scale)
			m = math.Max(m, s[p])
		}
		var sum float64
		for p := range s {
			s[p] = math.Exp(s[p] - m)
			sum += s[p]
		}
		for j := 0; j < d; j++ {
			var acc float64
			for p := 0; p < n; p++ {
				acc += s[p] * float64(v.At(table, p, off+j))
			}
			out[h*d+j] = float32(acc / sum)
		}
	}
}

// At returns the value at column col of position pos (through table).
func (kv KVRows) At(table []int32, pos, col int) float32 {
	i := kv.index(table, pos, col)
	if kv.F32 != nil {
		return kv.F32[i]
	}
	return F16ToF32(kv.F16[i])
}
