//go:build !amd64

package cpu

// tileF16 has no tiled kernel on this architecture: tile() computes every
// token with the generic loops.
func (p *Pool) tileF16(op *opPlan, r0, r1, t0, t1 int) int { return t0 }

// rowsF16 has no rows kernel on this architecture.
func (p *Pool) rowsF16(op *opPlan, r0, r1, t0, t1 int) bool { return false }
