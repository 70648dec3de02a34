package chat

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestReasoningFilter(t *testing.T) {
	cases := []struct {
		name    string
		pieces  []string
		inBlock bool
		want    string
		opened  int
	}{
		{name: "no block", pieces: []string{"hello ", "world"}, want: "hello world"},
		{name: "one block", pieces: []string{"<think>plan</think>answer"}, want: "answer", opened: 1},
		{name: "markers split", pieces: []string{"a<th", "ink>secret</th", "ink>b"}, want: "ab", opened: 1},
		{name: "split byte by byte", pieces: strings.Split("x<think>y</think>z", ""), want: "xz", opened: 1},
		{name: "two blocks", pieces: []string{"<think>1</think>A<think>2</think>B"}, want: "AB", opened: 2},
		{name: "unclosed block hides the rest", pieces: []string{"A<think>never", " closed"}, want: "A", opened: 1},
		{name: "starts inside (prompt opened it)", pieces: []string{"reasoning</think>", "answer"}, inBlock: true, want: "answer", opened: 1},
		{name: "lookalike is text", pieces: []string{"a <thin", "g> b <", "/think> c"}, want: "a <thing> b </think> c"},
		{name: "trailing partial marker is text", pieces: []string{"ends with <thi"}, want: "ends with <thi"},
		{name: "partial close inside is dropped", pieces: []string{"<think>x</thi"}, want: "", opened: 1},
		{name: "multibyte next to markers", pieces: []string{"é<think>ü</think>", "世"}, want: "é世", opened: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := NewReasoningFilter(tc.inBlock)
			var got strings.Builder
			opened := 0
			for _, p := range tc.pieces {
				v, n := f.Push(p)
				got.WriteString(v)
				opened += n
			}
			got.WriteString(f.Flush())
			if got.String() != tc.want || opened != tc.opened {
				t.Fatalf("got %q (%d blocks), want %q (%d)", got.String(), opened, tc.want, tc.opened)
			}
			ref, n := StripReasoning(strings.Join(tc.pieces, ""), tc.inBlock)
			if ref != tc.want || n != tc.opened {
				t.Fatalf("reference %q (%d), want %q (%d)", ref, n, tc.want, tc.opened)
			}
		})
	}
}

// Any split of any text gives the whole-text result, and every visible
// piece is valid UTF-8 when the input pieces are.
func TestReasoningFilterSplits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	atoms := []string{"<think>", "</think>", "<", "/", "think", ">", "a", " ", "é", "世", "🙂", "<th", "\n"}
	for iter := range 2000 {
		var b strings.Builder
		for range r.IntN(30) {
			b.WriteString(atoms[r.IntN(len(atoms))])
		}
		text := b.String()
		inBlock := r.IntN(4) == 0
		want, wantN := StripReasoning(text, inBlock)
		// Split at random rune boundaries.
		f := NewReasoningFilter(inBlock)
		var got strings.Builder
		n := 0
		rest := text
		for rest != "" {
			k := 0
			for range 1 + r.IntN(4) {
				if k >= len(rest) {
					break
				}
				_, sz := utf8.DecodeRuneInString(rest[k:])
				k += sz
			}
			v, o := f.Push(rest[:k])
			if !utf8.ValidString(v) {
				t.Fatalf("iter %d: invalid UTF-8 piece %q", iter, v)
			}
			got.WriteString(v)
			n += o
			rest = rest[k:]
		}
		if text == "" {
			_, o := f.Push("")
			n += o
		}
		got.WriteString(f.Flush())
		if got.String() != want || n != wantN {
			t.Fatalf("iter %d: text %q: got %q (%d), want %q (%d)", iter, text, got.String(), n, want, wantN)
		}
	}
}

// PushSplit keeps both sides: for any split of any text the pieces join to
// SplitReasoning's whole-text result, and the content side equals what
// Push shows.
func TestReasoningSplit(t *testing.T) {
	c, r := SplitReasoning("<think>\nplan it\n</think>\n\nThe answer.", false)
	if c != "\n\nThe answer." || r != "\nplan it\n" {
		t.Fatalf("split %q / %q", c, r)
	}
	c, r = SplitReasoning("still thinking</think>done<think>more", true)
	if c != "done" || r != "still thinkingmore" {
		t.Fatalf("split from inside %q / %q", c, r)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	atoms := []string{"<think>", "</think>", "<", "/", "think", ">", "a", " ", "é", "<th", "\n"}
	for iter := range 2000 {
		var b strings.Builder
		for range rng.IntN(30) {
			b.WriteString(atoms[rng.IntN(len(atoms))])
		}
		text := b.String()
		in := iter%3 == 0
		wantC, wantR := SplitReasoning(text, in)
		f := NewReasoningFilter(in)
		var gotC, gotR strings.Builder
		for rest := text; rest != ""; {
			n := 1 + rng.IntN(len(rest))
			pc, pr := f.PushSplit(rest[:n])
			gotC.WriteString(pc)
			gotR.WriteString(pr)
			rest = rest[n:]
		}
		fc, fr := f.FlushSplit()
		gotC.WriteString(fc)
		gotR.WriteString(fr)
		if gotC.String() != wantC || gotR.String() != wantR {
			t.Fatalf("text %q (in=%v): got %q / %q, want %q / %q", text, in, gotC.String(), gotR.String(), wantC, wantR)
		}
		if strip, _ := StripReasoning(text, in); strip != wantC {
			t.Fatalf("text %q: SplitReasoning content %q, StripReasoning %q", text, wantC, strip)
		}
	}
}
