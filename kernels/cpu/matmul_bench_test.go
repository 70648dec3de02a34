package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"oengine/model/gguf"
)

// Benchmarks report MB/s of encoded weights read (b.SetBytes = weight
// bytes per call). Run: go test ./kernels/cpu -run '^$' -bench . -benchtime 20x

var benchMatrices = map[string]Matrix{}

// benchMatrix returns a rows×cols matrix of typ made of 64 quantized random
// rows repeated (quantizing millions of values would dominate setup).
func benchMatrix(b *testing.B, typ gguf.Type, rows, cols int) Matrix {
	key := fmt.Sprint(typ, rows, cols)
	if m, ok := benchMatrices[key]; ok {
		return m
	}
	rng := rand.New(rand.NewPCG(1, uint64(typ)))
	tile := randMatrix(b, rng, typ, 64, cols)
	data := make([]byte, 0, rows*len(tile.Data)/64)
	for len(data) < cap(data) {
		data = append(data, tile.Data[:min(len(tile.Data), cap(data)-len(data))]...)
	}
	m, err := NewMatrix(typ, rows, cols, data)
	if err != nil {
		b.Fatal(err)
	}
	benchMatrices[key] = m
	return m
}

func BenchmarkMatMul(b *testing.B) {
	pool := NewPool(0)
	defer pool.Close()
	for _, typ := range allTypes {
		for _, sh := range []struct{ rows, cols int }{{2048, 2048}, {5632, 2048}} {
			for _, n := range []int{1, 32} {
				b.Run(fmt.Sprintf("%s/%dx%d/n%d", typ, sh.rows, sh.cols, n), func(b *testing.B) {
					w := benchMatrix(b, typ, sh.rows, sh.cols)
					x := randNormal(rand.New(rand.NewPCG(2, 3)), n*sh.cols, 1)
					dst := make([]float32, n*sh.rows)
					b.SetBytes(int64(len(w.Data)))
					b.ResetTimer()
					for range b.N {
						pool.MatMul(dst, w, x, n)
					}
				})
			}
		}
	}
}

func BenchmarkDequantize(b *testing.B) {
	for _, typ := range allTypes {
		b.Run(typ.String(), func(b *testing.B) {
			w := benchMatrix(b, typ, 64, 4096)
			dst := make([]float32, 64*4096)
			b.SetBytes(int64(len(w.Data)))
			for range b.N {
				if err := Dequantize(typ, w.Data, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuantizeActivations: one token of 4096 values per op; SetBytes
// counts the float32 input.
func BenchmarkQuantizeActivations(b *testing.B) {
	const cols = 4096
	x := randNormal(rand.New(rand.NewPCG(4, 5)), cols, 1)
	for _, k := range []struct {
		name string
		kind actKind
	}{{"Q8_0", actQ8_0}, {"Q8_1", actQ8_1}, {"Q8_K", actQ8K}} {
		b.Run(k.name, func(b *testing.B) {
			var a actBuf
			a.prepare(k.kind, 1, cols)
			b.SetBytes(4 * cols)
			for range b.N {
				a.quantizeToken(k.kind, 0, cols, x)
			}
		})
	}
}

func BenchmarkQuantize(b *testing.B) {
	x := randNormal(rand.New(rand.NewPCG(6, 7)), 4096, 1)
	for _, typ := range allTypes {
		b.Run(typ.String(), func(b *testing.B) {
			rb, _ := typ.RowBytes(len(x))
			dst := make([]byte, rb)
			b.SetBytes(4 * int64(len(x)))
			for range b.N {
				if err := Quantize(typ, x, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
