package chat

import "strings"

// OpenAI's harmony format, gpt-oss's output (its chat template, and the
// control tokens of its o200k_harmony vocabulary, rendered as text with
// engine.Request.SpecialText). After the prompt's "<|start|>assistant" a
// reply is one or more messages:
//
//	[<|start|>assistant] HEADER <|message|> BODY (<|end|> | <|return|> | <|call|>)
//
// HEADER holds "<|channel|>CHANNEL", and for a tool call the recipient
// "to=functions.NAME" (before or after the channel) and the arguments'
// type ("json" or "<|constrain|>json"). The channels map to the OpenAI
// reply: "analysis" is reasoning (reasoning_content), "final" is the
// content, "commentary" is content unless it has a recipient, which makes
// the body a tool call's arguments.

// Harmony markers (control tokens of the vocabulary).
const (
	harmonyStart     = "<|start|>"
	harmonyEnd       = "<|end|>"
	harmonyMessage   = "<|message|>"
	harmonyChannel   = "<|channel|>"
	harmonyReturn    = "<|return|>"
	harmonyCall      = "<|call|>"
	harmonyConstrain = "<|constrain|>"
)

// IsHarmony reports whether a chat template writes the harmony format (it
// opens channels).
func IsHarmony(template string) bool { return strings.Contains(template, harmonyChannel+"analysis") }

// HarmonyCall is one tool call of a harmony reply.
type HarmonyCall struct {
	Name      string // the recipient without its "functions." namespace
	Arguments string // the body as generated
}

// maxHarmonyHeader bounds a message header: a longer one (or text that
// does not start with a header) is not harmony, and goes out as content.
const maxHarmonyHeader = 256

// HarmonyParser splits a streamed harmony reply into content, reasoning
// and tool calls. Push it each new piece of generated text; the bytes that
// could begin a marker are held back until the next piece decides, so a
// marker split across pieces is recognised. Text that does not follow
// the format (no header where one is due) goes out as content, as the
// model wrote it. Not safe for concurrent use.
type HarmonyParser struct {
	inBody  bool
	header  strings.Builder // the header so far (not in a body)
	started bool            // some text arrived
	tool    string          // the body is this tool's arguments ("": not a call)
	reason  bool            // the body is reasoning
	args    strings.Builder
	held    string
	calls   []HarmonyCall
}

// NewHarmonyParser returns a parser at the start of a reply.
func NewHarmonyParser() *HarmonyParser { return &HarmonyParser{} }

// Push adds text and returns the newly decided content and reasoning.
func (p *HarmonyParser) Push(text string) (content, reasoning string) {
	buf := p.held + text
	p.held = ""
	var out, rsn strings.Builder
	for buf != "" {
		if !p.inBody {
			if !p.started && !couldStartHeader(buf) {
				// Plain text: the whole reply is content.
				p.started, p.inBody = true, true
				continue
			}
			p.started = true
			p.header.WriteString(buf)
			h := p.header.String()
			i := strings.Index(h, harmonyMessage)
			if i < 0 {
				buf = ""
				if len(h) > maxHarmonyHeader { // not a header: give it back as content
					out.WriteString(h)
					p.header.Reset()
					p.inBody, p.tool, p.reason = true, "", false
				}
				break
			}
			buf = h[i+len(harmonyMessage):]
			p.tool, p.reason = parseHarmonyHeader(h[:i])
			p.header.Reset()
			p.inBody = true
			continue
		}
		i, m := firstMarker(buf)
		if i < 0 {
			k := markerTail(buf)
			p.body(buf[:len(buf)-k], &out, &rsn)
			p.held = buf[len(buf)-k:]
			break
		}
		p.body(buf[:i], &out, &rsn)
		buf = buf[i+len(m):]
		if m == harmonyStart { // a header without an end before it: the message ends here
			p.header.WriteString(harmonyStart)
		}
		p.endMessage()
	}
	return out.String(), rsn.String()
}

// Flush ends the reply: held bytes and an unfinished header go out as
// content, an unfinished tool call is completed.
func (p *HarmonyParser) Flush() (content, reasoning string) {
	var out, rsn strings.Builder
	if p.inBody {
		p.body(p.held, &out, &rsn)
		p.endMessage()
	} else {
		out.WriteString(p.header.String() + p.held)
		p.header.Reset()
	}
	p.held = ""
	return out.String(), rsn.String()
}

// Calls returns the tool calls of the messages ended so far.
func (p *HarmonyParser) Calls() []HarmonyCall { return p.calls }

func (p *HarmonyParser) body(s string, out, rsn *strings.Builder) {
	switch {
	case p.tool != "":
		p.args.WriteString(s)
	case p.reason:
		rsn.WriteString(s)
	default:
		out.WriteString(s)
	}
}

// endMessage closes the message in progress: a tool call is recorded; the
// next text is a header.
func (p *HarmonyParser) endMessage() {
	if p.tool != "" {
		p.calls = append(p.calls, HarmonyCall{Name: p.tool, Arguments: strings.TrimSpace(p.args.String())})
		p.args.Reset()
	}
	p.inBody, p.tool, p.reason = false, "", false
}

// parseHarmonyHeader reads a header: the recipient of a tool call (the
// "functions." namespace dropped) and whether the channel is reasoning.
func parseHarmonyHeader(h string) (tool string, reasoning bool) {
	h = strings.ReplaceAll(h, harmonyConstrain, " ")
	h = strings.ReplaceAll(h, harmonyStart, " ")
	channel := ""
	if i := strings.Index(h, harmonyChannel); i >= 0 {
		rest := h[i+len(harmonyChannel):]
		channel = strings.TrimSpace(rest)
		if j := strings.IndexAny(channel, " \t\n"); j >= 0 {
			channel = channel[:j]
		}
		h = h[:i] + " " + rest
	}
	for _, f := range strings.Fields(h) {
		if r, ok := strings.CutPrefix(f, "to="); ok && r != "" && r != "assistant" {
			tool = strings.TrimPrefix(r, "functions.")
		}
	}
	return tool, channel == "analysis" && tool == ""
}

// couldStartHeader reports whether a reply beginning with s may be
// harmony: a marker (or its beginning), the role, or a recipient first.
func couldStartHeader(s string) bool {
	t := strings.TrimLeft(s, " \n")
	if t == "" {
		return true
	}
	for _, p := range []string{"<|", "assistant", "to="} {
		if strings.HasPrefix(t, p) || strings.HasPrefix(p, t) {
			return true
		}
	}
	return false
}

// firstMarker finds the first marker that ends a body.
func firstMarker(s string) (int, string) {
	best, which := -1, ""
	for _, m := range []string{harmonyEnd, harmonyReturn, harmonyCall, harmonyStart} {
		if i := strings.Index(s, m); i >= 0 && (best < 0 || i < best) {
			best, which = i, m
		}
	}
	return best, which
}

// markerTail returns the length of the longest suffix of s that is a
// proper prefix of a marker ("<", "<|", "<|en", ...).
func markerTail(s string) int {
	for k := min(len(s), len(harmonyReturn)-1); k > 0; k-- {
		tail := s[len(s)-k:]
		for _, m := range []string{harmonyEnd, harmonyReturn, harmonyCall, harmonyStart} {
			if strings.HasPrefix(m, tail) {
				return k
			}
		}
	}
	return 0
}
