// Package streaming implements streamed generation input (GenerateStream)
// independently of gRPC: the frame protocol state machine (Framer), the
// text-to-token assembly that holds back an unstable tail (Assembler) and
// the pump that feeds an open engine request as chunks arrive (Pump).
package streaming

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Code classifies a streaming error (the server maps it, docs/design.md §1).
type Code int

const (
	// CodeInvalid: a protocol violation or an exceeded limit
	// (INVALID_ARGUMENT; after acceptance one terminal EngineError).
	CodeInvalid Code = iota + 1
	// CodeIdle: no frame within the idle timeout (CANCELLED).
	CodeIdle
	// CodeUnsupported: a feature not offered, e.g. early output (UNIMPLEMENTED).
	CodeUnsupported
)

func (c Code) String() string {
	switch c {
	case CodeInvalid:
		return "INVALID_ARGUMENT"
	case CodeIdle:
		return "CANCELLED"
	case CodeUnsupported:
		return "UNSUPPORTED_FEATURE"
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Error is a streaming protocol or limit error.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return "streaming: " + e.Message }

// Is matches sentinels of the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrInvalid     = &Error{Code: CodeInvalid}
	ErrIdle        = &Error{Code: CodeIdle}
	ErrUnsupported = &Error{Code: CodeUnsupported}
)

func protoErr(format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of a streaming error, 0 for others.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// Limits bound one stream's input; each is advertised in
// StreamingInputCapabilities (MaxInputTokens through the context length).
type Limits struct {
	MaxChunkTokens int           // token ids in one chunk
	MaxChunkBytes  int           // UTF-8 bytes of one text chunk
	MaxChunks      int           // distinct chunks in one stream
	MaxInputTokens int           // new input tokens in one stream (0: only the engine's context limit)
	IdleTimeout    time.Duration // most time between two frames before end of input
}

// Default limits.
const (
	DefaultMaxChunkTokens = 8192
	DefaultMaxChunkBytes  = 64 << 10
	DefaultMaxChunks      = 4096
	DefaultIdleTimeout    = 30 * time.Second
)

// WithDefaults fills zero fields.
func (l Limits) WithDefaults() Limits {
	if l.MaxChunkTokens <= 0 {
		l.MaxChunkTokens = DefaultMaxChunkTokens
	}
	if l.MaxChunkBytes <= 0 {
		l.MaxChunkBytes = DefaultMaxChunkBytes
	}
	if l.MaxChunks <= 0 {
		l.MaxChunks = DefaultMaxChunks
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	return l
}

// Chunk is one InputChunk frame: text or token ids (Kind says which).
type Chunk struct {
	Seq    uint64
	Kind   ChunkKind
	Text   string
	Tokens []int32
}

// ChunkKind is the member of the chunk's data oneof.
type ChunkKind int

const (
	ChunkNone   ChunkKind = iota // oneof unset: invalid
	ChunkText                    // text
	ChunkTokens                  // token ids
)

// digest identifies a chunk's payload for retransmit comparison.
func (c Chunk) digest() [32]byte {
	h := sha256.New()
	h.Write([]byte{byte(c.Kind)})
	if c.Kind == ChunkText {
		h.Write([]byte(c.Text))
	} else {
		var b [4]byte
		for _, id := range c.Tokens {
			binary.LittleEndian.PutUint32(b[:], uint32(id))
			h.Write(b[:])
		}
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// Framer is the frame-order state machine of one stream: start first and
// once, chunks numbered 1, 2, 3, ... (an identical repeat is a retransmit,
// ignored), end_of_input once, nothing after it, and a half-close only
// after end_of_input. It is not safe for concurrent use.
type Framer struct {
	lim     Limits
	started bool
	ended   bool
	digests [][32]byte // digests[i] is chunk seq i+1
}

// NewFramer returns a framer enforcing lim (zero fields: defaults).
func NewFramer(lim Limits) *Framer { return &Framer{lim: lim.WithDefaults()} }

// Received is the highest chunk seq accepted so far (0: none).
func (f *Framer) Received() uint64 { return uint64(len(f.digests)) }

// Ended reports whether end_of_input was accepted.
func (f *Framer) Ended() bool { return f.ended }

// Start accepts the start frame.
func (f *Framer) Start() error {
	if f.started {
		return protoErr("a second start frame")
	}
	f.started = true
	return nil
}

// Chunk checks one chunk frame. fresh is false for an identical
// retransmit of an accepted chunk (to be ignored).
func (f *Framer) Chunk(c Chunk) (fresh bool, err error) {
	switch {
	case !f.started:
		return false, protoErr("chunk %d before the start frame", c.Seq)
	case f.ended:
		return false, protoErr("chunk %d after end_of_input", c.Seq)
	case c.Kind != ChunkText && c.Kind != ChunkTokens:
		return false, protoErr("chunk %d carries neither text nor token_ids", c.Seq)
	case c.Seq == 0:
		return false, protoErr("chunk seq starts at 1, got 0")
	}
	d := c.digest()
	if n := f.Received(); c.Seq <= n {
		if f.digests[c.Seq-1] != d {
			return false, protoErr("chunk %d repeated with a different payload", c.Seq)
		}
		return false, nil
	} else if c.Seq != n+1 {
		return false, protoErr("chunk %d after chunk %d: gap", c.Seq, n)
	}
	switch {
	case c.Kind == ChunkText && len(c.Text) > f.lim.MaxChunkBytes:
		return false, protoErr("chunk %d has %d bytes of text, the limit is %d", c.Seq, len(c.Text), f.lim.MaxChunkBytes)
	case c.Kind == ChunkText && !utf8.ValidString(c.Text):
		return false, protoErr("chunk %d text is not valid UTF-8", c.Seq)
	case c.Kind == ChunkTokens && len(c.Tokens) > f.lim.MaxChunkTokens:
		return false, protoErr("chunk %d has %d token ids, the limit is %d", c.Seq, len(c.Tokens), f.lim.MaxChunkTokens)
	case int(c.Seq) > f.lim.MaxChunks:
		return false, protoErr("chunk %d exceeds the limit of %d chunks", c.Seq, f.lim.MaxChunks)
	}
	f.digests = append(f.digests, d)
	return true, nil
}

// End accepts end_of_input; finalSeq, when set, must equal the last chunk.
func (f *Framer) End(finalSeq *uint64) error {
	switch {
	case !f.started:
		return protoErr("end_of_input before the start frame")
	case f.ended:
		return protoErr("a second end_of_input")
	case finalSeq != nil && *finalSeq != f.Received():
		return protoErr("end_of_input final_seq %d, but the last chunk is %d", *finalSeq, f.Received())
	}
	f.ended = true
	return nil
}

// HalfClose checks the client's end of sending: only after end_of_input.
func (f *Framer) HalfClose() error {
	if !f.ended {
		return protoErr("the client closed its side without end_of_input")
	}
	return nil
}
