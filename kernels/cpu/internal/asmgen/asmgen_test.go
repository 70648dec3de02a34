package asmgen

import "testing"

// TestTokAddr: tokens 0-3 from the first base, 4-7 from the second, with
// no index, one stride, two strides and the 3× register.
func TestTokAddr(t *testing.T) {
	base := [2]string{"DI", "R11"}
	want := []string{"4(DI)", "4(DI)(R8*1)", "4(DI)(R8*2)", "4(DI)(R10*1)", "4(R11)", "4(R11)(R8*1)", "4(R11)(R8*2)", "4(R11)(R10*1)"}
	for tok, w := range want {
		if got := TokAddr(base, "R8", "R10", tok, 4); got != w {
			t.Errorf("token %d: %q, want %q", tok, got, w)
		}
	}
}

// TestFileI: an instruction line is tab-indented and ends the line.
func TestFileI(t *testing.T) {
	var f File
	f.I("ADDQ $%d, %s", 32, "DI")
	if got := f.String(); got != "\tADDQ $32, DI\n" {
		t.Errorf("got %q", got)
	}
}

// TestHSum8: the lane vectors are summed pairwise as HSUM8 does: 0+4,
// 1+5, 2+6, 3+7, then (0+2), (1+3), then the two.
func TestHSum8(t *testing.T) {
	var f File
	f.HSum8(8)
	want := "\tVADDPS Z12, Z8, Z8\n\tVADDPS Z13, Z9, Z9\n\tVADDPS Z14, Z10, Z10\n\tVADDPS Z15, Z11, Z11\n" +
		"\tVADDPS Z10, Z8, Z8\n\tVADDPS Z11, Z9, Z9\n\tVADDPS Z9, Z8, Z8\n"
	if got := f.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
