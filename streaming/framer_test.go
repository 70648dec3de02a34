package streaming

import (
	"fmt"
	"slices"
	"testing"
)

func text(seq uint64, s string) Frame {
	return Frame{Kind: FrameChunk, Chunk: Chunk{Seq: seq, Kind: ChunkText, Text: s}}
}

func toks(seq uint64, ids ...int32) Frame {
	return Frame{Kind: FrameChunk, Chunk: Chunk{Seq: seq, Kind: ChunkTokens, Tokens: ids}}
}

func end(final ...uint64) Frame {
	f := Frame{Kind: FrameEnd}
	if len(final) > 0 {
		f.FinalSeq = &final[0]
	}
	return f
}

// feed runs frames through a framer (start already accepted unless
// noStart) and returns the index of the first error (-1: none) and the
// number of fresh chunks.
func feed(t *testing.T, lim Limits, noStart bool, frames []Frame, halfClose bool) (int, int, error) {
	t.Helper()
	f := NewFramer(lim)
	if !noStart {
		if err := f.Start(); err != nil {
			t.Fatal(err)
		}
	}
	fresh := 0
	for i, fr := range frames {
		var err error
		switch fr.Kind {
		case FrameStart:
			err = f.Start()
		case FrameChunk:
			var ok bool
			ok, err = f.Chunk(fr.Chunk)
			if ok {
				fresh++
			}
		case FrameEnd:
			err = f.End(fr.FinalSeq)
		}
		if err != nil {
			return i, fresh, err
		}
	}
	if halfClose {
		if err := f.HalfClose(); err != nil {
			return len(frames), fresh, err
		}
	}
	return -1, fresh, nil
}

func TestFramer(t *testing.T) {
	small := Limits{MaxChunkTokens: 3, MaxChunkBytes: 5, MaxChunks: 3}
	cases := []struct {
		name      string
		lim       Limits
		noStart   bool
		frames    []Frame
		halfClose bool
		failAt    int // -1: no error
		fresh     int
	}{
		{"in order", Limits{}, false, []Frame{text(1, "a"), toks(2, 5), end(2)}, true, -1, 2},
		{"no chunks", Limits{}, false, []Frame{end()}, true, -1, 0},
		{"identical retransmit ignored", Limits{}, false, []Frame{text(1, "a"), text(2, "b"), text(1, "a"), text(2, "b"), end()}, true, -1, 2},
		{"identical token retransmit ignored", Limits{}, false, []Frame{toks(1, 1, 2), toks(1, 1, 2), end(1)}, true, -1, 1},
		{"different payload", Limits{}, false, []Frame{text(1, "a"), text(1, "b")}, false, 1, 1},
		{"different kind same bytes", Limits{}, false, []Frame{text(1, ""), toks(1)}, false, 1, 1},
		{"gap", Limits{}, false, []Frame{text(1, "a"), text(3, "c")}, false, 1, 1},
		{"seq zero", Limits{}, false, []Frame{text(0, "a")}, false, 0, 0},
		{"chunk before start", Limits{}, true, []Frame{text(1, "a")}, false, 0, 0},
		{"end before start", Limits{}, true, []Frame{end()}, false, 0, 0},
		{"second start", Limits{}, false, []Frame{text(1, "a"), {Kind: FrameStart}}, false, 1, 1},
		{"chunk after end", Limits{}, false, []Frame{text(1, "a"), end(), text(2, "b")}, false, 2, 1},
		{"retransmit after end", Limits{}, false, []Frame{text(1, "a"), end(), text(1, "a")}, false, 2, 1},
		{"second end", Limits{}, false, []Frame{end(), end()}, false, 1, 0},
		{"wrong final_seq", Limits{}, false, []Frame{text(1, "a"), end(2)}, false, 1, 1},
		{"final_seq zero without chunks", Limits{}, false, []Frame{end(0)}, true, -1, 0},
		{"half-close without end", Limits{}, false, []Frame{text(1, "a")}, true, 1, 1},
		{"no data", Limits{}, false, []Frame{{Kind: FrameChunk, Chunk: Chunk{Seq: 1}}}, false, 0, 0},
		{"chunk bytes limit", small, false, []Frame{text(1, "12345"), text(2, "123456")}, false, 1, 1},
		{"chunk tokens limit", small, false, []Frame{toks(1, 1, 2, 3), toks(2, 1, 2, 3, 4)}, false, 1, 1},
		{"chunks limit", small, false, []Frame{text(1, "a"), text(2, "b"), text(3, "c"), text(4, "d")}, false, 3, 3},
		{"invalid utf-8", Limits{}, false, []Frame{text(1, "\xff")}, false, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			at, fresh, err := feed(t, c.lim, c.noStart, c.frames, c.halfClose)
			if at != c.failAt || fresh != c.fresh {
				t.Fatalf("failed at %d (%v), %d fresh; want failure at %d, %d fresh", at, err, fresh, c.failAt, c.fresh)
			}
			if err != nil && CodeOf(err) != CodeInvalid {
				t.Fatalf("error %v has code %v", err, CodeOf(err))
			}
		})
	}
}

// FuzzFramer drives the frame-order state machine with arbitrary frame
// sequences and compares every answer with a plain model of the rules
// (start once and first; chunks 1, 2, 3, ... with identical repeats
// ignored; end_of_input once with a matching final_seq; half-close only
// after it). Each input byte pair is one frame.
func FuzzFramer(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0x11, 1, 0x21, 2, 0})
	f.Add([]byte{1, 0x11, 0, 0, 2, 1, 3, 0})
	f.Add([]byte{0, 0, 1, 0x11, 1, 0x12, 1, 0x11, 2, 0x3, 1, 0x21, 3, 0})
	f.Add([]byte{0, 0, 0, 0, 1, 0x00, 1, 0x51, 2, 0x05})
	f.Fuzz(func(t *testing.T, ops []byte) {
		fr := NewFramer(Limits{})
		var (
			started, ended bool
			payloads       []Chunk // accepted chunks; payloads[i] is seq i+1
		)
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%4, ops[i+1]
			switch op {
			case 0:
				err := fr.Start()
				if (err != nil) != started {
					t.Fatalf("frame %d start: %v with started=%v", i/2, err, started)
				}
				started = true
			case 1:
				c := Chunk{Seq: uint64(arg >> 4 % 6), Kind: ChunkKind(arg % 3)}
				switch c.Kind {
				case ChunkText:
					c.Text = fmt.Sprint("p", arg>>2%4)
				case ChunkTokens:
					c.Tokens = []int32{int32(arg >> 2 % 4)}
				}
				fresh, err := fr.Chunk(c)
				n := uint64(len(payloads))
				var wantErr, wantFresh bool
				switch {
				case !started || ended || c.Kind == ChunkNone || c.Seq == 0:
					wantErr = true
				case c.Seq <= n:
					p := payloads[c.Seq-1]
					wantErr = p.Kind != c.Kind || p.Text != c.Text || !slices.Equal(p.Tokens, c.Tokens)
				case c.Seq != n+1:
					wantErr = true
				default:
					wantFresh = true
					payloads = append(payloads, c)
				}
				if (err != nil) != wantErr || fresh != wantFresh {
					t.Fatalf("frame %d chunk %+v: fresh=%v err=%v, want fresh=%v err=%v", i/2, c, fresh, err, wantFresh, wantErr)
				}
				if err != nil && CodeOf(err) != CodeInvalid {
					t.Fatalf("chunk error %v has code %v", err, CodeOf(err))
				}
			case 2:
				var final *uint64
				if arg&1 == 1 {
					v := uint64(arg >> 1 % 6)
					final = &v
				}
				err := fr.End(final)
				wantErr := !started || ended || (final != nil && *final != uint64(len(payloads)))
				if (err != nil) != wantErr {
					t.Fatalf("frame %d end(%v): %v", i/2, final, err)
				}
				if !wantErr {
					ended = true
				}
			case 3:
				if err := fr.HalfClose(); (err != nil) != !ended {
					t.Fatalf("frame %d half-close: %v with ended=%v", i/2, err, ended)
				}
			}
			if fr.Received() != uint64(len(payloads)) || fr.Ended() != ended {
				t.Fatalf("frame %d: framer at %d/%v, model at %d/%v", i/2, fr.Received(), fr.Ended(), len(payloads), ended)
			}
		}
	})
}
