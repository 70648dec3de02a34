package stopstr

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

type step struct {
	piece  string
	noStop bool // PushNoStop instead of Push
}

func pushes(pieces ...string) []step {
	s := make([]step, len(pieces))
	for i, p := range pieces {
		s[i] = step{piece: p}
	}
	return s
}

func TestMatcher(t *testing.T) {
	tests := []struct {
		name    string
		stops   []string
		include bool
		steps   []step
		emits   []string // per step
		flush   string
		match   int // -1: none
	}{
		{"no stops pass through", nil, false, pushes("a", "END", "b"), []string{"a", "END", "b"}, "", -1},
		{"stop inside one piece", []string{"END"}, false, pushes("Hello END world"), []string{"Hello "}, "", 0},
		{"split across 2 pieces", []string{"END"}, false, pushes("Hel", "lo EN", "D more", "x"), []string{"Hel", "lo ", "", ""}, "", 0},
		{"split across 3 pieces", []string{"END"}, false, pushes("ab E", "N", "D!"), []string{"ab ", "", ""}, "", 0},
		{"holdback released when prefix breaks", []string{"END"}, false, pushes("a E", "Nx", "y"), []string{"a ", "ENx", "y"}, "", -1},
		{"holdback released by flush", []string{"END"}, false, pushes("abc E", "N"), []string{"abc ", ""}, "EN", -1},
		{"held prefix restarts inside itself", []string{"aab"}, false, pushes("a", "a", "a", "b", "c"), []string{"", "", "a", "", ""}, "", 0},
		{"overlapping candidates ENEND", []string{"END"}, false, pushes("EN", "EN", "D"), []string{"", "EN", ""}, "", 0},
		{"earliest end wins over earliest start", []string{"abcd", "bc"}, false, pushes("xabcd"), []string{"xa"}, "", 1},
		{"earliest end wins across pieces", []string{"abcd", "bc"}, false, pushes("xa", "b", "cd"), []string{"x", "", "a"}, "", 1},
		{"same end: longest wins", []string{"bc", "abc"}, false, pushes("zabc"), []string{"z"}, "", 1},
		{"duplicate stops: lowest index", []string{"x", "x"}, false, pushes("abxcd"), []string{"ab"}, "", 0},
		{"two stops, second first", []string{"STOP", "END"}, false, pushes("a END b STOP"), []string{"a "}, "", 1},
		{"include stop", []string{"END"}, true, pushes("Hello END world"), []string{"Hello END"}, "", 0},
		{"include stop split", []string{"END"}, true, pushes("Hel", "lo EN", "D more"), []string{"Hel", "lo ", "END"}, "", 0},
		{"stop is whole piece", []string{"\n\n"}, false, pushes("a", "\n", "\n", "b"), []string{"a", "", "", ""}, "", 0},
		{"unicode stop split by characters", []string{"終わり"}, false, pushes("これで終", "わ", "り。"), []string{"これで", "", ""}, "", 0},
		{"unicode holdback released", []string{"ñu"}, false, pushes("añ", "b"), []string{"a", "ñb"}, "", -1},
		{"unicode include", []string{"。"}, true, pushes("日本語。次"), []string{"日本語。"}, "", 0},
		{"after match nothing more", []string{"E"}, false, pushes("aEb", "c"), []string{"a", ""}, "", 0},
		{"no-stop piece never ends text", []string{"END"}, false,
			[]step{{piece: "xEND", noStop: true}, {piece: "y"}}, []string{"xEND", "y"}, "", -1},
		{"stop spanning the no-stop boundary", []string{"END"}, false,
			[]step{{piece: "xEN", noStop: true}, {piece: "D"}}, []string{"x", ""}, "", 0},
		{"stop inside held no-stop text is not matched later", []string{"xaby", "ab"}, false,
			[]step{{piece: "xab", noStop: true}, {piece: "z"}}, []string{"", "xabz"}, "", -1},
		{"no-stop then stop after held text", []string{"xaby", "ab"}, false,
			[]step{{piece: "xab", noStop: true}, {piece: "ab"}}, []string{"", "xab"}, "", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.stops, tc.include)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, st := range tc.steps {
				if st.noStop {
					got = append(got, m.PushNoStop(st.piece))
				} else {
					e, _ := m.Push(st.piece)
					got = append(got, e)
				}
			}
			if !slices.Equal(got, tc.emits) {
				t.Fatalf("emits %q, want %q", got, tc.emits)
			}
			mt, ok := m.Match()
			if tc.match < 0 {
				if ok {
					t.Fatalf("matched %+v, want none", mt)
				}
			} else if !ok || mt.Index != tc.match || mt.Text != tc.stops[tc.match] {
				t.Fatalf("match %+v (%v), want index %d", mt, ok, tc.match)
			}
			if f := m.Flush(); f != tc.flush {
				t.Fatalf("Flush = %q, want %q", f, tc.flush)
			}
			if !m.Done() {
				t.Fatalf("Done() = false after Flush")
			}
			if e, _ := m.Push("more"); e != "" {
				t.Fatalf("Push after the end emitted %q", e)
			}
			if f := m.Flush(); f != "" {
				t.Fatalf("second Flush = %q", f)
			}
		})
	}
}

func TestHeld(t *testing.T) {
	m, _ := New([]string{"<|end|>"}, false)
	if e, _ := m.Push("ok <|e"); e != "ok " || m.Held() != "<|e" {
		t.Fatalf("emit %q held %q", e, m.Held())
	}
	if e, _ := m.Push("nd"); e != "" || m.Held() != "<|end" {
		t.Fatalf("emit %q held %q", e, m.Held())
	}
	if e, _ := m.Push("|>tail"); e != "" || m.Held() != "" || !m.Done() {
		t.Fatalf("emit %q held %q done %v", e, m.Held(), m.Done())
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name  string
		stops []string
	}{
		{"empty string", []string{"ok", ""}},
		{"invalid UTF-8", []string{"a\xffb"}},
		{"lone continuation byte", []string{"\x80"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.stops, false)
			if !errors.Is(err, ErrInvalidStop) || !strings.HasPrefix(err.Error(), "stopstr: ") {
				t.Fatalf("New = %v, want ErrInvalidStop", err)
			}
		})
	}
}

// reference finds the winning stop occurrence in the whole text.
func reference(text string, stops []string) (idx, start, end int, ok bool) {
	for i, s := range stops {
		j := strings.Index(text, s)
		if j < 0 {
			continue
		}
		if e := j + len(s); !ok || e < end || (e == end && j < start) {
			idx, start, end, ok = i, j, e, true
		}
	}
	return
}

// splitRunes cuts text at rune boundaries chosen by seed.
func splitRunes(text string, seed uint64) []string {
	var pieces []string
	cur := 0
	x := seed | 1
	for i := range text {
		if i == cur {
			continue
		}
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if x%3 == 0 {
			pieces = append(pieces, text[cur:i])
			cur = i
		}
	}
	return append(pieces, text[cur:])
}

func FuzzMatcher(f *testing.F) {
	f.Add("Hello END world", "END", "", uint64(1), false)
	f.Add("aaab", "aab", "b", uint64(7), true)
	f.Add("xabcd", "abcd", "bc", uint64(3), false)
	f.Add("これで終わり。", "終わり", "。", uint64(5), true)
	f.Add("ENENEND", "ENEND", "NEN", uint64(11), false)
	f.Fuzz(func(t *testing.T, text, s1, s2 string, seed uint64, include bool) {
		var stops []string
		for _, s := range []string{s1, s2} {
			if s != "" {
				stops = append(stops, s)
			}
		}
		m, err := New(stops, include)
		if err != nil {
			return // invalid stop strings are rejected, nothing to check
		}
		var out strings.Builder
		matched := false
		seen := 0
		for _, p := range splitRunes(text, seed) {
			e, ok := m.Push(p)
			seen += len(p)
			out.WriteString(e)
			if !strings.HasPrefix(text, out.String()) {
				t.Fatalf("emitted %q is not a prefix of %q", out.String(), text)
			}
			if ok {
				matched = true
			} else if !matched && out.String()+m.Held() != text[:seen] {
				t.Fatalf("emitted %q + held %q != text so far %q", out.String(), m.Held(), text[:seen])
			}
		}
		out.WriteString(m.Flush())
		got := out.String()
		idx, start, end, ok := reference(text, stops)
		switch {
		case ok != matched:
			t.Fatalf("matched = %v, reference %v (text %q stops %q)", matched, ok, text, stops)
		case !ok && got != text:
			t.Fatalf("no match but emitted %q != text %q", got, text)
		case ok:
			want := text[:start]
			if include {
				want = text[:end]
			}
			mt, _ := m.Match()
			if got != want || mt.Index != idx {
				t.Fatalf("emitted %q match %d, want %q match %d (text %q stops %q)", got, mt.Index, want, idx, text, stops)
			}
		}
	})
}

// FuzzNoStopPrefix: the first pieces go through PushNoStop (min_tokens not
// reached). A match may only end after them, and everything else holds.
func FuzzNoStopPrefix(f *testing.F) {
	f.Add("xEND END y", "END", uint64(1), 2)
	f.Add("aaaa", "aa", uint64(9), 1)
	f.Fuzz(func(t *testing.T, text, stop string, seed uint64, noStop int) {
		m, err := New([]string{stop}, false)
		if err != nil {
			return
		}
		var out strings.Builder
		boundary := 0
		for i, p := range splitRunes(text, seed) {
			if i < noStop {
				out.WriteString(m.PushNoStop(p))
				boundary += len(p)
			} else {
				e, _ := m.Push(p)
				out.WriteString(e)
			}
			if !strings.HasPrefix(text, out.String()) {
				t.Fatalf("emitted %q is not a prefix of %q", out.String(), text)
			}
		}
		out.WriteString(m.Flush())
		got := out.String()
		// Reference: first occurrence ending after the boundary.
		from := max(0, boundary-len(stop)+1)
		j := strings.Index(text[from:], stop)
		_, matched := m.Match()
		if (j >= 0) != matched {
			t.Fatalf("matched = %v, want %v (text %q stop %q boundary %d)", matched, j >= 0, text, stop, boundary)
		}
		want := text
		if j >= 0 {
			want = text[:from+j]
		}
		if got != want {
			t.Fatalf("emitted %q, want %q", got, want)
		}
	})
}
