package tokenizer

import "unicode/utf8"

// GPT-2's byte-level alphabet: every byte is shown as a printable
// codepoint. Bytes '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF map to
// themselves; the remaining 68 bytes (controls, space, DEL, NBSP, soft
// hyphen, ...) map, in increasing byte order, to U+0100, U+0101, ...
var (
	byteToRune   [256]rune
	byteToString [256]string
	// runeToByte[r] is the byte shown as r, or -1; the alphabet ends at U+0143.
	runeToByte [0x144]int16
)

func init() {
	for i := range runeToByte {
		runeToByte[i] = -1
	}
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = 256 + n
			n++
		}
		byteToString[b] = string(byteToRune[b])
		runeToByte[byteToRune[b]] = int16(b)
	}
}

// byteEncode appends the byte-level form of raw to dst.
func byteEncode(dst []byte, raw string) []byte {
	for i := 0; i < len(raw); i++ {
		dst = append(dst, byteToString[raw[i]]...)
	}
	return dst
}

// byteDecode undoes byteEncode for a token text. A codepoint outside the
// byte alphabet is kept as its own UTF-8 (llama.cpp writes a diagnostic
// "[UNK_BYTE_...]" string there; keeping the text is more useful and only
// concerns malformed vocabularies).
func byteDecode(dst []byte, text string) []byte {
	for i := 0; i < len(text); {
		if c := text[i]; c < 0x80 {
			if b := runeToByte[c]; b >= 0 {
				dst = append(dst, byte(b))
			} else {
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(text[i:])
		if r < rune(len(runeToByte)) && runeToByte[r] >= 0 && n > 1 {
			dst = append(dst, byte(runeToByte[r]))
		} else {
			dst = append(dst, text[i:i+n]...)
		}
		i += n
	}
	return dst
}
