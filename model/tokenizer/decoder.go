package tokenizer

import (
	"bytes"
	"unicode/utf8"
)

// Decoder turns a stream of token ids into text without ever splitting a
// UTF-8 character: bytes of an unfinished character are held back until
// the tokens that complete it arrive. For WordPiece vocabularies it also
// holds back the text from a space until the next three bytes show whether
// cleanSpaces removes that space. The concatenation of every Push
// result and the final Flush equals string(Decode(ids)) (or DecodeSpecial
// when the decoder renders special tokens). Bytes that can never become
// valid UTF-8 are passed through as they are. A Decoder is not safe for
// concurrent use.
type Decoder struct {
	t       *Tokenizer
	special bool
	pending []byte
}

// NewDecoder returns a streaming decoder that, like Decode, renders
// control tokens as nothing.
func (t *Tokenizer) NewDecoder() *Decoder { return &Decoder{t: t} }

// NewDecoderSpecial returns a streaming decoder that renders control tokens
// as their text, like DecodeSpecial.
func (t *Tokenizer) NewDecoderSpecial() *Decoder { return &Decoder{t: t, special: true} }

// Push adds one token and returns the text that is now complete.
func (d *Decoder) Push(id int32) string {
	if d.special {
		d.pending = append(d.pending, d.t.PieceSpecial(id)...)
	} else {
		d.pending = append(d.pending, d.t.Piece(id)...)
	}
	cut := completePrefix(d.pending)
	if d.t.wpm != nil {
		cut = cleanCut(d.pending[:cut])
	}
	if cut == 0 {
		return ""
	}
	var out string
	if d.t.wpm != nil {
		out = string(cleanSpaces(d.pending[:cut]))
	} else {
		out = string(d.pending[:cut])
	}
	d.pending = append(d.pending[:0], d.pending[cut:]...)
	return out
}

// Flush returns whatever is held back (an incomplete character, or text
// that cleanSpaces was waiting on) and resets the decoder.
func (d *Decoder) Flush() string {
	var out string
	if d.t.wpm != nil {
		out = string(cleanSpaces(d.pending))
	} else {
		out = string(d.pending)
	}
	d.pending = d.pending[:0]
	return out
}

// Pending reports how many bytes are held back.
func (d *Decoder) Pending() int { return len(d.pending) }

// completePrefix is the length of the longest prefix of b that does not
// end inside a UTF-8 sequence that later bytes could still complete.
func completePrefix(b []byte) int {
	// Find the last byte that is not a continuation byte, within the
	// longest possible sequence.
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if b[i]&0xC0 == 0x80 {
			continue
		}
		if b[i] >= 0xC0 && !utf8.FullRune(b[i:]) {
			return i
		}
		return len(b)
	}
	return len(b)
}

// cleanSpaces is llama.cpp's clean-up of detokenized text for vocabularies
// with clean_spaces set (of those here, WordPiece), three passes in order,
// in place:
//
//  1. a space before ? ! . or , is removed;
//  2. " ' " becomes "'", leftmost occurrences first, never overlapping;
//  3. a space before 's, 'm, 're or 've is removed (not before 't, 'd or
//     'll).
func cleanSpaces(b []byte) []byte {
	n := 0
	for i, c := range b {
		if c == ' ' && i+1 < len(b) && (b[i+1] == '?' || b[i+1] == '!' || b[i+1] == '.' || b[i+1] == ',') {
			continue
		}
		b[n] = c
		n++
	}
	b = b[:n]
	n = 0
	for i := 0; i < len(b); i++ {
		if b[i] == ' ' && i+2 < len(b) && b[i+1] == '\'' && b[i+2] == ' ' {
			b[n] = '\''
			n++
			i += 2
			continue
		}
		b[n] = b[i]
		n++
	}
	b = b[:n]
	n = 0
	for i, c := range b {
		if c == ' ' && i+2 < len(b) && b[i+1] == '\'' {
			x1, x2 := b[i+2], byte(0)
			if i+3 < len(b) {
				x2 = b[i+3]
			}
			if x1 == 's' || x1 == 'm' || (x1 == 'r' || x1 == 'v') && x2 == 'e' {
				continue
			}
		}
		b[n] = c
		n++
	}
	return b[:n]
}

// cleanWindow is how far cleanSpaces looks ahead of the last space: a
// space with no space after it is decided by the next three bytes
// (" 're"). An earlier space may look further, up to p+5 in "  ' re"
// (passes 2 then 3 remove all three spaces), but only through the spaces
// after it, so three bytes after the last space settle them all.
// TestCleanCut checks it (two bytes fail).
const cleanWindow = 3

// cleanCut returns the largest c <= len(b) such that
// cleanSpaces(b[:c] + x) == cleanSpaces(b[:c]) + cleanSpaces(x) for every
// later x: no space within the last cleanWindow bytes before c. (Text
// already emitted ended the same way, so the window may reach before b.)
func cleanCut(b []byte) int {
	c := len(b)
	for c > 0 {
		lo := max(0, c-cleanWindow)
		k := bytes.IndexByte(b[lo:c], ' ')
		if k < 0 {
			break
		}
		c = lo + k
	}
	return c
}
