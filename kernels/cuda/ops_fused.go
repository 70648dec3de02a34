package cuda

// Fused element-wise steps (kernels/fused.cu).

const kAddRMSNorm kernelName = "add_rms_norm"

func init() { registerKernels(kAddRMSNorm) }

// AddRMSNorm adds the residual and normalises in one pass: x[r] += y[r],
// then h[r] = x[r] / sqrt(mean(x[r]²) + eps) * w, for rows of n values.
// h must not alias x or y; w may be 0 for no weight.
func (s *Stream) AddRMSNorm(x, y, w, h DevPtr, rows, n int, eps float32) error {
	return s.launch(kAddRMSNorm, D1(rows), rowBlock(n), 0, P(x), P(y), P(w), P(h), I(n), F(eps))
}
