// Package asmgen is what the assembly generators of kernels/cpu
// (dot_blk16_gen.go, blk_decode_gen.go, attn_z_gen.go,
// k_decode_gen.go, run by go generate) share: a file buffer that writes
// instruction lines, and the addresses of the per-token data their
// kernels read.
package asmgen

import (
	"bytes"
	"fmt"
	"os"
)

// File is a generated assembly file being written; fmt.Fprintf(f, ...)
// writes text as is (comments, labels, TEXT lines).
type File struct{ bytes.Buffer }

// I writes one instruction line, indented by a tab.
func (f *File) I(format string, args ...any) { fmt.Fprintf(f, "\t"+format+"\n", args...) }

// Save writes the file to name.
func (f *File) Save(name string) error { return os.WriteFile(name, f.Bytes(), 0o644) }

// TokAddr is the address of byte off of token t's data when the tokens
// lie a stride apart: tokens 0-3 from base[0], tokens 4-7 from base[1]
// (4 strides further), one the register holding the stride and three
// the one holding 3× the stride.
func TokAddr(base [2]string, one, three string, t, off int) string {
	idx := [...]string{"", "(" + one + "*1)", "(" + one + "*2)", "(" + three + "*1)"}[t%4]
	return fmt.Sprintf("%d(%s)%s", off, base[t/4], idx)
}

// HSum8 sums the eight 16-lane vectors Z(z)..Z(z+7) into Z(z) in the
// order HSUM8 (dot_amd64.s) sums the eight lanes of one row in the AVX2
// kernels: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), lane k of a row being
// vector k here, so each of the 16 rows gets the AVX2 kernel's bits.
func (f *File) HSum8(z int) {
	for k := 0; k < 4; k++ {
		f.I("VADDPS Z%d, Z%d, Z%d", z+4+k, z+k, z+k)
	}
	f.I("VADDPS Z%d, Z%d, Z%d", z+2, z, z)
	f.I("VADDPS Z%d, Z%d, Z%d", z+3, z+1, z+1)
	f.I("VADDPS Z%d, Z%d, Z%d", z+1, z, z)
}
