package tokenizer

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// A SentencePiece precompiled_charsmap (tokenizer.ggml.precompiled_charsmap,
// the normalizer of unigram vocabularies, ugm.go) maps input byte strings
// to replacement strings, longest match first. Its layout:
//
//	uint32 n (little endian)                 the size in bytes of the array
//	[n/4]uint32                              an XOR-compressed compact double array
//	NUL-terminated replacement strings       the rest of the blob
//
// Each array entry packs BASE in bits 10-30 (shifted left by 8 more when
// bit 9 is set), LEAF in bit 8 and LCHECK in bits 0-7 plus bit 31 (an
// entry with bit 31 set is a value: bits 0-30 are a replacement's offset).
// A match starts at state BASE[0]; byte c moves from state s to entry
// s^c, which is a child when its LCHECK is c; the next state is that
// entry's index XOR its BASE, and a LEAF child means the bytes so far are
// a key whose replacement offset is the value entry at the next state.
// A NUL byte ends the match.

// charsmapMaxDepth bounds the longest key a charsmap may hold: every match
// walks at most this many bytes, so that hostile files cannot make
// normalization quadratic. Real charsmaps (NFKC and its variants) have
// keys of a few characters.
const charsmapMaxDepth = 1024

// charsmap is a parsed precompiled_charsmap.
type charsmap struct {
	xcda []uint32
	repl string // the replacement strings, NUL-terminated
}

func xcdaBase(u uint32) uint32 { return (u >> 10) << ((u & (1 << 9)) >> 6) }
func xcdaLeaf(u uint32) bool   { return u>>8&1 != 0 }

// xcdaLabel is LCHECK: a byte, or a value above 255 for an entry that is
// no child.
func xcdaLabel(u uint32) uint32 { return u & (1<<31 | 0xFF) }
func xcdaValue(u uint32) uint32 { return u & (1<<31 - 1) }

// parseCharsmap reads a precompiled_charsmap and checks it whole: the
// header as llama.cpp checks it (at least four bytes, and an array that
// leaves at least one byte of replacements), then every state a match can
// reach (checkXCDA). llama.cpp checks array and replacement indices during
// each match and fails that tokenization; here a charsmap that could fail
// a match, or holds a cycle or a key longer than charsmapMaxDepth, fails
// the load instead, and matching never fails.
func parseCharsmap(b []byte) (*charsmap, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: precompiled_charsmap of %d bytes has no size header", ErrInvalid, len(b))
	}
	n := uint64(binary.LittleEndian.Uint32(b))
	if n+4 >= uint64(len(b)) {
		return nil, fmt.Errorf("%w: precompiled_charsmap array of %d bytes in a blob of %d", ErrInvalid, n, len(b))
	}
	m := &charsmap{xcda: make([]uint32, n/4), repl: string(b[4+n:])}
	for i := range m.xcda {
		m.xcda[i] = binary.LittleEndian.Uint32(b[4+4*i:])
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%w: precompiled_charsmap: %v", ErrInvalid, err)
	}
	return m, nil
}

// check walks every state reachable from the root, depth first: each
// state s must have s^c inside the array for every byte c from 1 to 255
// (llama.cpp reads that entry whatever byte comes), every key's
// replacement offset must lie in the replacements and be NUL-terminated,
// and the states must form no cycle and no path longer than
// charsmapMaxDepth. An empty array is no charsmap: llama.cpp then skips
// the match. The children of each state are found by bucketing the
// entries by the state they hang from (entry e with label c hangs from
// e^c), so the walk is linear in the array.
func (m *charsmap) check() error {
	x := m.xcda
	if len(x) == 0 {
		return nil
	}
	// kids[start[s]:start[s+1]] are the entries that hang from state s.
	start := make([]int32, len(x)+257)
	hangs := func(e int, u uint32) (uint32, bool) {
		c := u & 0xFF
		return uint32(e) ^ c, u&(1<<31) == 0 && c != 0
	}
	for e, u := range x {
		if s, ok := hangs(e, u); ok {
			start[s+1]++
		}
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	kids := make([]int32, start[len(start)-1])
	fill := append([]int32(nil), start...)
	for e, u := range x {
		if s, ok := hangs(e, u); ok {
			kids[fill[s]] = int32(e)
			fill[s]++
		}
	}

	const (
		white = iota
		grey  // on the stack
		black // done; depth known
	)
	// Every state passes checkState before it is used, so states index
	// the array's entries.
	color := make([]uint8, len(x))
	depth := make([]int32, len(x))
	type frame struct {
		s    uint32
		next int32 // index into kids of the next child
	}
	root := xcdaBase(x[0])
	if err := m.checkState(root); err != nil {
		return err
	}
	stack := []frame{{s: root, next: start[root]}}
	color[root] = grey
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		s := f.s
		if f.next == start[s+1] {
			color[s] = black
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				p := stack[len(stack)-1].s
				depth[p] = max(depth[p], depth[s]+1)
			}
			continue
		}
		e := uint32(kids[f.next])
		f.next++
		u := x[e]
		next := e ^ xcdaBase(u)
		if err := m.checkState(next); err != nil {
			return err
		}
		if xcdaLeaf(u) {
			if err := m.checkValue(x[next]); err != nil {
				return err
			}
		}
		switch color[next] {
		case grey:
			return fmt.Errorf("the key trie has a cycle through state %d", next)
		case black:
			depth[s] = max(depth[s], depth[next]+1)
		default:
			color[next] = grey
			stack = append(stack, frame{s: next, next: start[next]})
		}
		if depth[s] > charsmapMaxDepth || len(stack) > charsmapMaxDepth+1 {
			return fmt.Errorf("a key longer than %d bytes", charsmapMaxDepth)
		}
	}
	return nil
}

// checkState reports a state whose entries s^c (c = 1..255) or own entry
// (read for a key's value) lie outside the array.
func (m *charsmap) checkState(s uint32) error {
	if uint64(s|0xFF) >= uint64(len(m.xcda)) {
		return fmt.Errorf("state %d outside the array of %d entries", s, len(m.xcda))
	}
	return nil
}

func (m *charsmap) checkValue(u uint32) error {
	off := xcdaValue(u)
	if uint64(off) >= uint64(len(m.repl)) {
		return fmt.Errorf("replacement offset %d outside %d bytes", off, len(m.repl))
	}
	if strings.IndexByte(m.repl[off:], 0) < 0 {
		return fmt.Errorf("replacement at %d is not NUL-terminated", off)
	}
	return nil
}

// match is the longest key that prefixes s: its replacement and length
// (0 when no key matches). open reports that the walk reached the end of
// s, so that more bytes could give a longer key.
func (m *charsmap) match(s string) (repl string, n int, open bool) {
	x := m.xcda
	if len(x) == 0 {
		return "", 0, false
	}
	var off uint32
	state := xcdaBase(x[0])
	p := 0
	for ; p < len(s); p++ {
		c := uint32(s[p])
		if c == 0 {
			break
		}
		e := state ^ c
		u := x[e] // in the array: check
		if xcdaLabel(u) != c {
			break
		}
		state = e ^ xcdaBase(u)
		if xcdaLeaf(u) {
			n, off = p+1, xcdaValue(x[state])
		}
	}
	open = p == len(s)
	if n == 0 {
		return "", 0, open
	}
	r := m.repl[off:]
	return r[:strings.IndexByte(r, 0)], n, open // terminated: check
}
