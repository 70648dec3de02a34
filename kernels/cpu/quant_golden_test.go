package cpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"oengine/ggml"
	"oengine/model/gguf"
)

// golden is one quants tensor: blocks cut from a llama-quantize output
// and llama.cpp's dequantization of them. Most come from
// ../shared/testdata/quants; the IQ4 ones, which that set lacks, from
// testdata/quants in this package (its README says how they were made),
// as does MXFP4.
type golden struct {
	m    Matrix
	want []float32 // [rows][cols]
}

func loadGolden(t *testing.T, name string) golden {
	t.Helper()
	dir := filepath.Join("testdata", "quants")
	if _, err := os.Stat(filepath.Join(dir, name+".gguf")); err != nil {
		dir = filepath.Join(sharedTestdata(t), "quants")
	}
	f, err := gguf.Open(filepath.Join(dir, name+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	ti, ok := f.Tensor("t")
	if !ok {
		t.Fatalf("%s: no tensor t", name)
	}
	if len(ti.Dims) != 2 {
		t.Fatalf("%s: dims %v", name, ti.Dims)
	}
	cols, rows := int(ti.Dims[0]), int(ti.Dims[1])
	m, err := NewMatrix(ti.Type, rows, cols, ti.Data)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, name+".f32"))
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 4*rows*cols {
		t.Fatalf("%s.f32: %d bytes for %dx%d", name, len(raw), rows, cols)
	}
	want := make([]float32, rows*cols)
	for i := range want {
		want[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return golden{m, want}
}

var goldenNames = []struct {
	name string
	typ  ggml.Type
}{
	{"f16", ggml.TypeF16}, {"bf16", ggml.TypeBF16}, {"q8_0", ggml.TypeQ8_0},
	{"q4_0", ggml.TypeQ4_0}, {"q4_1", ggml.TypeQ4_1}, {"q5_0", ggml.TypeQ5_0},
	{"q5_1", ggml.TypeQ5_1}, {"q2_k", ggml.TypeQ2_K}, {"q3_k", ggml.TypeQ3_K},
	{"q4_k", ggml.TypeQ4_K}, {"q5_k", ggml.TypeQ5_K}, {"q6_k", ggml.TypeQ6_K},
	{"iq4_nl", ggml.TypeIQ4_NL}, {"iq4_xs", ggml.TypeIQ4_XS}, {"mxfp4", ggml.TypeMXFP4},
}

// oneStep reports whether got is within one float32 rounding step of want.
func oneStep(got, want float32) bool {
	if got == want {
		return true
	}
	return got == math.Nextafter32(want, float32(math.Inf(1))) || got == math.Nextafter32(want, float32(math.Inf(-1)))
}

func TestDequantizeGolden(t *testing.T) {
	for _, g := range goldenNames {
		t.Run(g.name, func(t *testing.T) {
			gd := loadGolden(t, g.name)
			if gd.m.Type != g.typ {
				t.Fatalf("type %s, want %s", gd.m.Type, g.typ)
			}
			got := make([]float32, len(gd.want))
			if err := Dequantize(gd.m.Type, gd.m.Data, got); err != nil {
				t.Fatal(err)
			}
			exact := 0
			for i := range got {
				if !oneStep(got[i], gd.want[i]) {
					t.Fatalf("element %d (row %d col %d): got %g want %g", i, i/gd.m.Cols, i%gd.m.Cols, got[i], gd.want[i])
				}
				if got[i] == gd.want[i] {
					exact++
				}
			}
			t.Logf("%d/%d exact", exact, len(got))
			// RowF32 decodes the same values.
			row := make([]float32, gd.m.Cols)
			gd.m.RowF32(gd.m.Rows-1, row, nil)
			for c, v := range row {
				if v != got[(gd.m.Rows-1)*gd.m.Cols+c] {
					t.Fatalf("RowF32 col %d: %g vs %g", c, v, got[(gd.m.Rows-1)*gd.m.Cols+c])
				}
			}
		})
	}
}

// TestDotGolden checks DotRef (float64, exact weights) and MatMul
// (quantized activations) against a float64 dot of the golden values.
// DotRef must agree to 1e-9 relative; MatMul within actErrBound, and within
// 2e-5·Σ|w·xq| of the dot against the quantized activations it uses.
func TestDotGolden(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, g := range goldenNames {
		t.Run(g.name, func(t *testing.T) {
			gd := loadGolden(t, g.name)
			m := gd.m
			const n = 3
			x := randNormal(rng, n*m.Cols, 1)
			got := make([]float32, n*m.Rows)
			pool.MatMul(got, m, x, n)
			var worst float64
			for i := 0; i < n; i++ {
				xi := x[i*m.Cols : (i+1)*m.Cols]
				xq, sCorr := quantActRef(kernels[m.Type].act, xi)
				for r := 0; r < m.Rows; r++ {
					var want, mag float64
					for c := 0; c < m.Cols; c++ {
						p := float64(gd.want[r*m.Cols+c]) * float64(xi[c])
						want += p
						mag += math.Abs(p)
					}
					ref := DotRef(m.Type, m.Row(r), xi)
					if math.Abs(ref-want) > 1e-9*mag+1e-12 {
						t.Fatalf("DotRef token %d row %d: %g want %g", i, r, ref, want)
					}
					v := float64(got[i*m.Rows+r])
					if bound := actErrBound(t, m.Type, m.Row(r), xi); math.Abs(v-want) > bound {
						t.Fatalf("MatMul token %d row %d: %g want %g (bound %g)", i, r, v, want, bound)
					}
					qexp, qmag := quantDotRef(t, m.Type, m.Row(r), xq, sCorr)
					if d := math.Abs(v - qexp); d > 2e-5*qmag+1e-6 {
						t.Fatalf("MatMul token %d row %d vs quantized-activation dot: %g want %g", i, r, v, qexp)
					} else {
						worst = math.Max(worst, d/(qmag+1e-30))
					}
				}
			}
			t.Logf("worst relative error vs quantized-activation dot: %.3g", worst)
		})
	}
}
