// Package chat turns conversations into prompt tokens the way a model
// expects them: through the GGUF's Jinja chat template
// (tokenizer.chat_template, rendered with github.com/ardanlabs/jinja under
// limits, template.go) when the model has one, as plain text otherwise. It
// also splits reasoning blocks (<think>...</think>) out of generated text
// (filter.go).
//
// Special tokens: the template's own markers (<|im_start|>, <|eot_id|>, ...)
// are parsed as special tokens; the client's text never is, so a message
// that contains "<|im_end|>" cannot end its turn early. To keep the two
// apart, every control-token text inside the client's strings is replaced by
// a random placeholder before rendering; the rendered text is tokenized with
// special parsing except around the placeholders, whose runs (up to the
// template's nearest markers) are tokenized as plain text with the original
// text put back. A conversation without control-token text in it is
// therefore tokenized exactly as its whole rendered text.
//
// Plain fallback (no template): one user message is its text as it is;
// any other conversation is rendered as "Role: content" paragraphs
// separated by a blank line ("System: ...\n\nUser: ...\n\nAssistant: ..."),
// with "Assistant:" appended for the generation prompt. The BOS rule of the
// vocabulary applies and nothing is special-parsed.
package chat

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"sort"
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
	VocabSize() int
}

// ErrTemplate reports a chat template that cannot be used (it does not
// compile, fails to render, runs past a limit, or does not insert the user
// message). NewEncoder's callers fall back to plain text; at request time
// it is the request's error.
var ErrTemplate = errors.New("chat: unusable chat template")

// Reasoning block markers recognised in templates and generated text.
const (
	ThinkOpen  = "<think>"
	ThinkClose = "</think>"
)

// Prompt is one encoded conversation.
type Prompt struct {
	// Tokens are the prompt token ids, BOS included when the model wants one
	// (exactly once).
	Tokens []int32
	// Text is the rendered prompt (for logs and tests; it is not what was
	// tokenized in one piece).
	Text string
	// InReasoning reports that the generation prompt opens a reasoning
	// block the model is expected to close (e.g. a template ending with
	// "<think>\n"): generated text starts inside the block.
	InReasoning bool
}

// Options are the per-request choices of a conversation render.
type Options struct {
	// AddGenerationPrompt appends the assistant turn's opening.
	AddGenerationPrompt bool
	// Kwargs are extra template variables (chat_template_kwargs, e.g.
	// enable_thinking), see DecodeKwargs.
	Kwargs map[string]jinja.Value
	// Tools are the function tools offered to the model (a decoded JSON
	// list, see DecodeTools), rendered by the template's `tools`
	// variable; nil: the variable stays undefined.
	Tools []jinja.Value
}

// Encoder encodes conversations for one model. It is safe for concurrent
// use.
type Encoder struct {
	tok      Tokenizer
	tmpl     *Template // nil: plain text
	specials Specials
	// controls are the texts of the vocabulary's control tokens, longest
	// first, bucketed by first byte.
	controls [256][]string
}

// NewEncoder returns an encoder for tok with the default limits (see
// NewEncoderLimits).
func NewEncoder(tok Tokenizer, template string) (*Encoder, error) {
	return NewEncoderLimits(tok, template, Limits{})
}

// NewEncoderLimits returns an encoder for tok. An empty template gives a
// plain text encoder. The template is checked by rendering a one-message
// conversation under the limits; a template that does not compile, fails
// that render, runs past a limit or does not insert the message's text
// gives an error matching ErrTemplate (use NewEncoder(tok, "") then).
func NewEncoderLimits(tok Tokenizer, template string, lim Limits) (*Encoder, error) {
	e := &Encoder{tok: tok, specials: Specials{BOS: tokenText(tok, tok.BOS()), EOS: tokenText(tok, tok.EOS())}}
	var all []string
	for id := range tok.VocabSize() {
		if tok.IsControl(int32(id)) {
			if t := tok.TokenText(int32(id)); t != "" {
				all = append(all, t)
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return len(all[i]) > len(all[j]) })
	for _, t := range all {
		e.controls[t[0]] = append(e.controls[t[0]], t)
	}
	if strings.TrimSpace(template) == "" {
		return e, nil
	}
	t, err := CompileTemplate(template, lim)
	if err != nil {
		return nil, err
	}
	e.tmpl = t
	// Probe: the template must insert a user message's text (trimmed at
	// most), once and unchanged.
	s, err := newNonce()
	if err != nil {
		return nil, err
	}
	probe := "probe" + s
	out, err := t.Render(Vars{Messages: []Message{{Role: RoleUser, Content: " \n" + probe + "\n "}}, AddGenerationPrompt: true, Specials: e.specials})
	if err != nil {
		return nil, err
	}
	if strings.Count(out, probe) != 1 {
		return nil, fmt.Errorf("%w: the template does not insert the user message content as it is", ErrTemplate)
	}
	return e, nil
}

// Templated reports whether the encoder uses a chat template.
func (e *Encoder) Templated() bool { return e.tmpl != nil }

// Encode encodes user as the only (user) message, followed by the
// generation prompt.
func (e *Encoder) Encode(user string) (Prompt, error) {
	return e.Render([]Message{{Role: RoleUser, Content: user}}, Options{AddGenerationPrompt: true})
}

// Render encodes a conversation.
func (e *Encoder) Render(msgs []Message, opts Options) (Prompt, error) {
	if e.tmpl == nil {
		return e.plain(msgs, opts), nil
	}
	nonce, err := newNonce()
	if err != nil {
		return Prompt{}, err
	}
	n := &neutralizer{e: e, nonce: nonce}
	safe := make([]Message, len(msgs))
	for i, m := range msgs {
		safe[i] = n.message(m)
	}
	kw := make(map[string]jinja.Value, len(opts.Kwargs))
	for k, v := range opts.Kwargs {
		kw[k] = n.value(v)
	}
	var tools []jinja.Value
	for _, t := range opts.Tools {
		tools = append(tools, n.value(t))
	}
	out, err := e.tmpl.Render(Vars{Messages: safe, AddGenerationPrompt: opts.AddGenerationPrompt, Specials: e.specials, Kwargs: kw, Tools: tools})
	if err != nil {
		return Prompt{}, err
	}
	ids, text, err := n.encode(out)
	if err != nil {
		return Prompt{}, err
	}
	return Prompt{
		Tokens:      e.withBOS(ids),
		Text:        text,
		InReasoning: opts.AddGenerationPrompt && opensReasoning(text),
	}, nil
}

// plain is the fallback rendering without a template (package comment).
func (e *Encoder) plain(msgs []Message, opts Options) Prompt {
	var text string
	if len(msgs) == 1 && msgs[0].Role == RoleUser && opts.AddGenerationPrompt {
		text = msgs[0].Content
	} else {
		var b strings.Builder
		for i, m := range msgs {
			if i > 0 {
				b.WriteString("\n\n")
			}
			b.WriteString(roleTitle(m.Role))
			b.WriteString(": ")
			b.WriteString(m.Content)
		}
		if opts.AddGenerationPrompt {
			if len(msgs) > 0 {
				b.WriteString("\n\n")
			}
			b.WriteString("Assistant:")
		}
		text = b.String()
	}
	return Prompt{Tokens: e.tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: true}), Text: text}
}

func roleTitle(r string) string {
	if r == "" {
		return ""
	}
	return strings.ToUpper(r[:1]) + r[1:]
}

// withBOS applies the vocabulary's BOS rule once: a template that printed
// bos_token already has it.
func (e *Encoder) withBOS(ids []int32) []int32 {
	if bos := e.tok.BOS(); e.tok.AddBOS() && bos >= 0 && (len(ids) == 0 || ids[0] != bos) {
		ids = append([]int32{bos}, ids...)
	}
	return ids
}

func tokenText(tok Tokenizer, id int32) string {
	if id < 0 {
		return ""
	}
	return tok.TokenText(id)
}

// opensReasoning reports whether text leaves a reasoning block open.
func opensReasoning(text string) bool {
	return strings.LastIndex(text, ThinkOpen) > strings.LastIndex(text, ThinkClose)
}

// newNonce returns 128 random bits as decimal digits: placeholders built
// from it survive case filters (upper, title) and no client text guesses
// it.
func newNonce() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("chat: nonce: %w", err)
	}
	return new(big.Int).SetBytes(b[:]).String(), nil
}
