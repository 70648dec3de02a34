package cpu

import (
	"encoding/binary"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestIQ4LevelsHeader: the level tables of iq4_levels_amd64.h, which the
// IQ4 kernels' VPSHUFB lookups read, are iq4Values (signed, and + 128).
func TestIQ4LevelsHeader(t *testing.T) {
	src, err := os.ReadFile("iq4_levels_amd64.h")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`DATA (iq4lev|iq4lev128)<>\+(\d+)\(SB\)/8, \$0x([0-9a-f]{16})`)
	got := map[string][]byte{"iq4lev": make([]byte, 16), "iq4lev128": make([]byte, 16)}
	n := 0
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		off, _ := strconv.Atoi(m[2])
		v, err := strconv.ParseUint(m[3], 16, 64)
		if err != nil || off > 8 {
			t.Fatalf("bad DATA line %q", m[0])
		}
		binary.LittleEndian.PutUint64(got[m[1]][off:], v)
		n++
	}
	if n != 4 {
		t.Fatalf("%d DATA lines, want 4", n)
	}
	for i, v := range iq4Values {
		if int8(got["iq4lev"][i]) != v || int(got["iq4lev128"][i]) != int(v)+128 {
			t.Fatalf("level %d: %d / %d in the header, want %d / %d", i, int8(got["iq4lev"][i]), got["iq4lev128"][i], v, int(v)+128)
		}
	}
}
