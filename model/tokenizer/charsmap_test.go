package tokenizer

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Builders of precompiled_charsmap blobs (charsmap.go) for tests.

// xcdaLE is xs as little-endian bytes.
func xcdaLE(xs ...uint32) []byte {
	var b []byte
	for _, x := range xs {
		b = append(b, byte(x), byte(x>>8), byte(x>>16), byte(x>>24))
	}
	return b
}

// xcdaEntry packs a child entry: BASE (below 1<<21), LEAF, LCHECK.
func xcdaEntry(base uint32, leaf bool, label byte) uint32 {
	u := base<<10 | uint32(label)
	if leaf {
		u |= 1 << 8
	}
	return u
}

// xcdaBlock is an array of n entries, those given set and the others no
// child of anything.
func xcdaBlock(entries map[int]uint32, n int) []uint32 {
	x := make([]uint32, n)
	for i := range x {
		x[i] = 1 << 31
	}
	for i, u := range entries {
		x[i] = u
	}
	return x
}

// xcdaBlob is the charsmap of array x and replacement strings repl.
func xcdaBlob(x []uint32, repl string) []byte {
	return append(append(xcdaLE(uint32(4*len(x))), xcdaLE(x...)...), repl...)
}

// xcdaOneKey is a charsmap mapping the one byte key to repl: the root
// (entry 0) has BASE 256, key's entry 256^key is a leaf whose next state
// 512 holds the offset 0 of repl.
func xcdaOneKey(key byte, repl string) []byte {
	x := xcdaBlock(map[int]uint32{0: xcdaEntry(256, false, 0), 256 ^ int(key): xcdaEntry((256^uint32(key))^512, true, key), 512: 0}, 768)
	return xcdaBlob(x, repl+"\x00")
}

// TestCharsmapHostile: a precompiled_charsmap comes from a file. Headers
// that llama.cpp refuses are refused; so is an array with a cycle, an
// entry that a match could read outside the array, or a replacement
// outside the strings or unterminated. Random corruptions of the real
// charsmap either fail the load or give a tokenizer that encodes without
// panicking.
func TestCharsmapHostile(t *testing.T) {
	real := ugmTok(t).Vocab().Charsmap
	if _, err := parseCharsmap(real); err != nil {
		t.Fatalf("the real charsmap: %v", err)
	}
	cases := []struct {
		name string
		blob []byte
		want string // in the error; "" for none
	}{
		{"valid", xcdaOneKey('a', "A"), ""},
		{"empty", nil, "no size header"},
		{"short header", []byte{1, 0}, "no size header"},
		{"array fills the blob", xcdaLE(4, 0), "in a blob"},
		{"array beyond the blob", xcdaLE(1 << 31), "in a blob"},
		{"root state outside", xcdaBlob(xcdaBlock(map[int]uint32{0: xcdaEntry(4096, false, 0)}, 256), "\x00"), "outside the array"},
		{"child state outside", xcdaBlob(xcdaBlock(map[int]uint32{0: xcdaEntry(256, false, 0), 256 ^ 'a': xcdaEntry((256^'a')^4096, false, 'a')}, 512), "\x00"), "outside the array"},
		{"cycle", xcdaBlob(xcdaBlock(map[int]uint32{0: xcdaEntry(256, false, 0), 256 ^ 'a': xcdaEntry((256^'a')^256, false, 'a')}, 512), "\x00"), "cycle"},
		{"value outside", xcdaBlob(xcdaBlock(map[int]uint32{0: xcdaEntry(256, false, 0), 256 ^ 'a': xcdaEntry((256^'a')^512, true, 'a'), 512: 99}, 768), "A\x00"), "offset 99 outside"},
		{"unterminated", xcdaBlob(xcdaBlock(map[int]uint32{0: xcdaEntry(256, false, 0), 256 ^ 'a': xcdaEntry((256^'a')^512, true, 'a'), 512: 2}, 768), "A\x00B"), "not NUL-terminated"},
	}
	for _, c := range cases {
		cm, err := parseCharsmap(c.blob)
		if (c.want == "") != (err == nil) || err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
			continue
		}
		if err == nil && c.name == "valid" {
			if r, n, open := cm.match("ab"); r != "A" || n != 1 || open {
				t.Errorf("match = %q, %d, %v", r, n, open)
			}
			if r, n, open := cm.match("a"); r != "A" || n != 1 || !open {
				t.Errorf("match = %q, %d, %v", r, n, open)
			}
		}
	}
	// A path of a's through the states longer than charsmapMaxDepth
	// fails; one as long loads.
	const depth = charsmapMaxDepth + 1
	chain := map[int]uint32{0: xcdaEntry(256, false, 0)}
	for k := 1; k <= depth; k++ {
		s, next := 256*k, 256*(k+1)
		chain[s^'a'] = xcdaEntry(uint32((s^'a')^next), false, 'a')
	}
	if _, err := parseCharsmap(xcdaBlob(xcdaBlock(chain, 256*(depth+2)), "\x00")); err == nil || !strings.Contains(err.Error(), "key longer") {
		t.Errorf("a key deeper than charsmapMaxDepth: %v", err)
	}
	chain = map[int]uint32{0: xcdaEntry(256, false, 0)}
	for k := 1; k <= charsmapMaxDepth; k++ {
		s, next := 256*k, 256*(k+1)
		chain[s^'a'] = xcdaEntry(uint32((s^'a')^next), false, 'a')
	}
	if _, err := parseCharsmap(xcdaBlob(xcdaBlock(chain, 256*(charsmapMaxDepth+2)), "\x00")); err != nil {
		t.Errorf("a key of charsmapMaxDepth bytes: %v", err)
	}

	r := rand.New(rand.NewPCG(23, 29))
	texts := []string{"Hello ＡＢＣ ｶﾀｶﾅ e\u0301 ﬁ ①", "\xff\x00\xe3", strings.Repeat("ab ", 50)}
	base := ugmTok(t).ugm
	loaded, n := 0, 150
	if testing.Short() {
		n = 30
	}
	for i := 0; i < n; i++ {
		b := slices.Clone(real)
		for k := 1 + r.IntN(4); k > 0; k-- {
			b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
		}
		cm, err := parseCharsmap(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			continue
		}
		loaded++
		m := *base
		m.setCharsmap(cm)
		tok := &Tokenizer{ugm: &m}
		for _, s := range texts {
			m.viterbi(m.normalize(nil, s, true), &ugmScratch{}, nil)
			tok.ugmCut(s, 0, &ugmScratch{})
		}
	}
	t.Logf("%d of %d corrupted charsmaps loaded", loaded, n)
}
