// Package chat turns one user message into prompt tokens the way a model
// expects it: through the GGUF's Jinja chat template (tokenizer.chat_template,
// rendered with github.com/ardanlabs/jinja) when the model has one, as plain
// text otherwise. It also filters reasoning blocks (<think>...</think>) out
// of generated text (filter.go).
//
// Special tokens: the template's own markers (<|im_start|>, <|eot_id|>, ...)
// are parsed as special tokens; the user's text never is, so a prompt that
// contains "<|im_end|>" cannot end its turn early. To keep the two apart the
// template is rendered with a random sentinel in place of the user text; the
// rendered text before and after the sentinel is tokenized with special
// parsing, the user text without, and the pieces are joined.
package chat

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/ardanlabs/jinja"

	"oengine/model/tokenizer"
)

// Tokenizer is what rendering needs of a tokenizer; *tokenizer.Tokenizer
// implements it.
type Tokenizer interface {
	Encode(text string, opts tokenizer.EncodeOptions) []int32
	BOS() int32 // -1 when absent
	EOS() int32 // -1 when absent
	AddBOS() bool
	TokenText(id int32) string
	IsControl(id int32) bool
}

// ErrTemplate reports a chat template that cannot be used for a single user
// message (it does not compile, fails to render, or transforms the user
// text beyond trimming). Callers fall back to plain text.
var ErrTemplate = errors.New("chat: unusable chat template")

// Reasoning block markers recognised in templates and generated text.
const (
	ThinkOpen  = "<think>"
	ThinkClose = "</think>"
)

// Prompt is one encoded user message.
type Prompt struct {
	// Tokens are the prompt token ids, BOS included when the model wants one
	// (exactly once).
	Tokens []int32
	// Text is the rendered prompt with the user text in place (for logs and
	// tests; it is not what was tokenized in one piece).
	Text string
	// InReasoning reports that the generation prompt opens a reasoning
	// block the model is expected to close (e.g. a template ending with
	// "<think>\n"): generated text starts inside the block.
	InReasoning bool
}

// Encoder encodes user messages for one model. It is safe for concurrent
// use.
type Encoder struct {
	tok  Tokenizer
	tmpl *jinja.Template // nil: plain text
	trim bool            // the template trims the message content
}

// NewEncoder returns an encoder for tok. An empty template gives a plain
// text encoder. A template that cannot render a single user message gives
// an error matching ErrTemplate (use NewEncoder(tok, "") then).
func NewEncoder(tok Tokenizer, template string) (*Encoder, error) {
	e := &Encoder{tok: tok}
	if strings.TrimSpace(template) == "" {
		return e, nil
	}
	t, err := jinja.Compile(template)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	e.tmpl = t
	// Find out once how the template treats the content: inserted as it is,
	// or trimmed (Llama 3's "message['content'] | trim").
	s, err := newSentinel()
	if err != nil {
		return nil, err
	}
	padded := " \n" + s + "\n "
	out, err := e.render(padded)
	if err != nil {
		return nil, err
	}
	switch {
	case strings.Count(out, padded) == 1:
	case strings.Count(out, s) == 1:
		e.trim = true
	default:
		return nil, fmt.Errorf("%w: the template does not insert the user message content as it is", ErrTemplate)
	}
	return e, nil
}

// Templated reports whether the encoder uses a chat template.
func (e *Encoder) Templated() bool { return e.tmpl != nil }

// Encode encodes user as the only (user) message, followed by the
// generation prompt. Without a template it is the plain text with the BOS
// rule applied and no special-token parsing.
func (e *Encoder) Encode(user string) (Prompt, error) {
	if e.tmpl == nil {
		return Prompt{Tokens: e.tok.Encode(user, tokenizer.EncodeOptions{AddSpecial: true}), Text: user}, nil
	}
	if e.trim {
		user = strings.TrimSpace(user)
	}
	s, err := newSentinel()
	if err != nil {
		return Prompt{}, err
	}
	out, err := e.render(s)
	if err != nil {
		return Prompt{}, err
	}
	i := strings.Index(out, s)
	if i < 0 || strings.Count(out, s) != 1 {
		return Prompt{}, fmt.Errorf("%w: the user message appears %d times", ErrTemplate, strings.Count(out, s))
	}
	pre, post := out[:i], out[i+len(s):]
	return Prompt{
		Tokens:      e.join(pre, user, post),
		Text:        pre + user + post,
		InReasoning: opensReasoning(post),
	}, nil
}

// join tokenizes the template text around the user text with special
// parsing and the user text without, then applies the BOS rule once.
func (e *Encoder) join(pre, user, post string) []int32 {
	special := tokenizer.EncodeOptions{ParseSpecial: true}
	ids := e.tok.Encode(pre, special)
	if user != "" {
		// SentencePiece adds a leading space only at the start of the text
		// or after a special token, as it would in one whole string.
		cont := len(ids) > 0 && !e.tok.IsControl(ids[len(ids)-1])
		ids = append(ids, e.tok.Encode(user, tokenizer.EncodeOptions{Continuation: cont})...)
	}
	if post != "" {
		special.Continuation = len(ids) > 0
		ids = append(ids, e.tok.Encode(post, special)...)
	}
	if bos := e.tok.BOS(); e.tok.AddBOS() && bos >= 0 && (len(ids) == 0 || ids[0] != bos) {
		ids = append([]int32{bos}, ids...)
	}
	return ids
}

// render renders the template for one user message with content c.
func (e *Encoder) render(c string) (out string, err error) {
	defer func() {
		// The template engine is third-party code running a template from a
		// model file: never let it take the server down.
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: render panicked: %v", ErrTemplate, p)
		}
	}()
	data := map[string]any{
		"messages":              []any{map[string]any{"role": "user", "content": c}},
		"add_generation_prompt": true,
		"bos_token":             e.tokenText(e.tok.BOS()),
		"eos_token":             e.tokenText(e.tok.EOS()),
	}
	out, err = e.tmpl.Render(data)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	return out, nil
}

func (e *Encoder) tokenText(id int32) string {
	if id < 0 {
		return ""
	}
	return e.tok.TokenText(id)
}

// opensReasoning reports whether text leaves a reasoning block open.
func opensReasoning(text string) bool {
	return strings.LastIndex(text, ThinkOpen) > strings.LastIndex(text, ThinkClose)
}

// newSentinel returns a string no template or user text produces by
// accident: 128 random bits between private-use characters.
func newSentinel() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("chat: sentinel: %w", err)
	}
	return "\uE000" + hex.EncodeToString(b[:]) + "\uE001", nil
}
