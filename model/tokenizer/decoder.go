package tokenizer

import "unicode/utf8"

// Decoder turns a stream of token ids into text without ever splitting a
// UTF-8 character: bytes of an unfinished character are held back until
// the tokens that complete it arrive. The concatenation of every Push
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
	if cut == 0 {
		return ""
	}
	out := string(d.pending[:cut])
	d.pending = append(d.pending[:0], d.pending[cut:]...)
	return out
}

// Flush returns whatever is held back (an incomplete character) and resets
// the decoder.
func (d *Decoder) Flush() string {
	out := string(d.pending)
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
