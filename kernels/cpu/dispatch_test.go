package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"oengine/ggml"
)

// TestKernelSets: the active set is the detected level's; every level this
// CPU can run builds a set with a kernel for every portable type, the
// switches of its level and nothing above, and one-token kernels that
// agree with the portable twins (so a CPU with AVX-512 also checks its
// AVX2 set, without GODEBUG); building sets leaves portable untouched.
func TestKernelSets(t *testing.T) {
	top := detectISA()
	if active.isa != top || Features() != top.String() {
		t.Fatalf("active set %v, Features %q; detected %v", active.isa, Features(), top)
	}
	ptr := func(f any) string { return fmt.Sprintf("%p", f) }
	before := map[string]string{}
	for typ, k := range portable {
		before[typ.String()] = ptr(k.dot)
	}
	rng := rand.New(rand.NewPCG(31, 32))
	for l := isaGeneric; l <= top; l++ {
		s := kernelSetFor(l)
		want := kernelSet{isa: l, simd: l >= isaAVX2, blk: l >= isaAVX2, f16Z: l >= isaAVX512, vnni: l >= isaAVX512VNNI}
		if s.isa != want.isa || s.simd != want.simd || s.blk != want.blk || s.f16Z != want.f16Z || s.vnni != want.vnni ||
			(s.blkZTile != nil) != want.vnni || (len(s.rows) > 0) != want.blk {
			t.Errorf("%v: set %+v", l, s)
		}
		for typ, ref := range portable {
			k, ok := s.matmul[typ]
			if !ok || k.act != ref.act || k.dot == nil {
				t.Fatalf("%v %s: kernel %+v, portable act %v", l, typ, k, ref.act)
			}
			if l == isaGeneric && ptr(k.dot) != ptr(ref.dot) {
				t.Errorf("generic %s: not the portable kernel", typ)
			}
			blk := typ == ggml.TypeQ4_0 || typ == ggml.TypeQ8_0 || typ == ggml.TypeIQ4_NL || typ == ggml.TypeQ5_0 || typ == ggml.TypeMXFP4
			if (k.blk != nil) != (l >= isaAVX2 && blk) {
				t.Errorf("%v %s: blocked kernel %v", l, typ, k.blk)
			}
			cols := 512
			for rep := 0; rep < 4; rep++ {
				row := randomRow(rng, typ, cols)
				x := randNormal(rng, cols, 1)
				var a actBuf
				a.prepare(k.act, 1, cols)
				a.quantizeToken(k.act, 0, cols, x)
				var v actView
				a.view(k.act, 0, cols, x, &v)
				got, want := k.dot(row, v), ref.dot(row, v)
				xq, sCorr := quantActRef(k.act, x)
				_, mag := quantDotRef(t, typ, row, xq, sCorr)
				if d := math.Abs(float64(got) - float64(want)); d > 1e-5*mag+1e-6 {
					t.Fatalf("%v %s: kernel %g, portable %g", l, typ, got, want)
				}
			}
		}
	}
	for typ, k := range portable {
		if ptr(k.dot) != before[typ.String()] {
			t.Errorf("building the sets changed portable[%s]", typ)
		}
	}
}
