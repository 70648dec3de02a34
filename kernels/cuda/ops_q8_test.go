package cuda

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"oengine/ggml"
)

func init() { sigOps = append(sigOps, sigOpsQ8()...) }

// sigOpsQ8 are the operations of ops_q8.go for
// TestLaunchArgumentsMatchSignatures: every q8 kernel is launched once.
func sigOpsQ8() []func(s *Stream) error {
	ops := []func(s *Stream) error{
		func(s *Stream) error { return s.QuantizeQ8(1, 2, 3, 256) },
		func(s *Stream) error { return s.RMSNormQ8(1, 2, 3, 4, 3, 256, 1e-5) },
		func(s *Stream) error { return s.QuantizeAct(Q8K, 1, 2, 3, 512) },
		func(s *Stream) error { return s.RMSNormAct(Q8K, 1, 2, 3, 4, 3, 512, 1e-5) },
	}
	for typ := range q8Types {
		w := Weight{Type: typ, Rows: 8, Cols: 256, Ptr: 16}
		for _, b := range q8Buckets {
			n := b.nt
			ops = append(ops, func(s *Stream) error { return s.GemvQ8(1, w, 2, n) })
		}
	}
	return ops
}

// The token buckets of ops_q8.go are the ones compiled in mmvq.cu, with the
// same rows per warp (the launch grid depends on it) and unroll, for every
// type.
func TestQ8BucketsMatchSource(t *testing.T) {
	src, err := os.ReadFile("kernels/mmvq.cu")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^GEMV_Q8\((\w+)_t(\d+), (\w+), (\d+), (\d+), (\d+), (\d+)\)`)
	got := map[string]q8Bucket{}
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		var v [4]int
		for i := range v {
			v[i], _ = strconv.Atoi(m[4+i])
		}
		if m[2] != m[4] {
			t.Errorf("%s_t%s instantiates NT=%s", m[1], m[2], m[4])
		}
		if want := map[string]string{"q4_0": "MQ4_0", "q8_0": "MQ8_0", "q4_k": "MQ4_K", "q6_k": "MQ6_K"}[m[1]]; m[3] != want {
			t.Errorf("%s_t%s uses %s", m[1], m[2], m[3])
		}
		got[m[1]+"_t"+m[2]] = q8Bucket{v[0], v[1], v[2], v[3]}
	}
	if len(got) != len(q8Types)*len(q8Buckets) {
		t.Fatalf("%d GEMV_Q8 lines, want %d", len(got), len(q8Types)*len(q8Buckets))
	}
	for _, suf := range q8Types {
		for _, b := range q8Buckets {
			name := suf + "_t" + strconv.Itoa(b.nt)
			if got[name] != b {
				t.Errorf("%s: source %+v, Go %+v", name, got[name], b)
			}
		}
	}
}

// Q8Bucket picks the smallest compiled bucket holding n tokens.
func TestQ8Bucket(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 4, 5: 8, 8: 8, 9: 16, 17: 32, 33: 64, 64: 64} {
		if nt, _ := Q8Bucket(n); nt != want {
			t.Errorf("Q8Bucket(%d) = %d, want %d", n, nt, want)
		}
	}
}

// Transliteration of gemv_q8's row ownership (mmvq.cu): warp w of block b
// owns rows (4b+w)*RPW .. +RPW-1; with the grid GemvQ8 launches every row
// is computed by exactly one warp and no warp past the last row writes.
func TestQ8RowOwnership(t *testing.T) {
	for _, b := range q8Buckets {
		for _, rows := range []int{1, 7, 8, 9, 37, 4096, 4097} {
			grid := blocks(rows, q8Warps*b.rpw)
			seen := make([]int, rows)
			for blk := 0; blk < grid; blk++ {
				for w := 0; w < q8Warps; w++ {
					r0 := (blk*q8Warps + w) * b.rpw
					if r0 >= rows {
						continue // the kernel's early return
					}
					for rr := 0; rr < b.rpw; rr++ {
						if r0+rr < rows {
							seen[r0+rr]++
						}
					}
				}
			}
			for r, n := range seen {
				if n != 1 {
					t.Fatalf("bucket %d, %d rows: row %d computed %d times", b.nt, rows, r, n)
				}
			}
		}
	}
}

// The q8_1 row size: qs, the scale words, 16-byte alignment.
func TestQ8RowBytes(t *testing.T) {
	for cols, want := range map[int]int{32: 48, 256: 288, 896: 1008, 4096: 4608, 14336: 16128} {
		if got := Q8RowBytes(cols); got != want {
			t.Errorf("Q8RowBytes(%d) = %d, want %d", cols, got, want)
		}
	}
	if Q8Bytes(3, 4096) != 3*4608 {
		t.Fatal("Q8Bytes")
	}
	for cols, want := range map[int]int{256: 272, 4096: 4160, 14336: 14560} {
		if got := Q8ActRowBytes(Q8K, cols); got != want {
			t.Errorf("Q8KRowBytes(%d) = %d, want %d", cols, got, want)
		}
	}
	for typ, want := range map[ggml.Type]Q8Kind{ggml.TypeQ4_0: Q8_1, ggml.TypeQ8_0: Q8_1, ggml.TypeQ4_K: Q8K, ggml.TypeQ6_K: Q8K, ggml.TypeF16: Q8None} {
		if got := Q8KindOf(typ); got != want {
			t.Errorf("Q8KindOf(%s) = %d, want %d", typ, got, want)
		}
	}
}

// MatMul sends quantized weights of the q8 types through GemvQ8 for small
// batches, and nothing else.
func TestUseQ8(t *testing.T) {
	for _, tc := range []struct {
		t    ggml.Type
		n    int
		want bool
	}{
		{ggml.TypeQ4_0, 1, true}, {ggml.TypeQ8_0, 64, true}, {ggml.TypeQ4_K, 65, false},
		{ggml.TypeQ6_K, 0, false}, {ggml.TypeF16, 1, false}, {ggml.TypeBF16, 8, false}, {ggml.TypeQ5_K, 1, false},
	} {
		if got := UseQ8(tc.t, tc.n); got != tc.want {
			t.Errorf("UseQ8(%s, %d) = %v", tc.t, tc.n, got)
		}
	}
}

// GemvQ8 refuses weights its loads cannot read: Q4_K rows need 16-byte
// alignment, the others 2 bytes.
func TestGemvQ8Alignment(t *testing.T) {
	d, _, err := OpenFake(func(*FakeMemory, string, Dim3, Dim3, uint32, []Arg) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, tc := range []struct {
		t   ggml.Type
		ptr DevPtr
		ok  bool
	}{{ggml.TypeQ4_K, 0x1008, false}, {ggml.TypeQ4_K, 0x1010, true}, {ggml.TypeQ4_0, 0x1001, false}, {ggml.TypeQ6_K, 0x1002, true}} {
		err := d.Do(func(s *Stream) error {
			return s.GemvQ8(0x2000, Weight{Type: tc.t, Rows: 4, Cols: 256, Ptr: tc.ptr}, 0x3000, 1)
		})
		if (err == nil) != tc.ok {
			t.Errorf("%s at %#x: %v", tc.t, uint64(tc.ptr), err)
		}
	}
}
