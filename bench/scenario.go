package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pb "oengine/proto/openengine/v1"
)

// Conversation is the plan of one multi-turn conversation: the new input
// of each turn and its output length.
type Conversation struct {
	Turns []Request
	// StandIns holds, per turn, ids that stand in for the turn's answer
	// when the history is resent as token ids through a target that does
	// not return output ids (OpenAI): the lengths stay exact, only the
	// answer's content differs from what the server generated.
	StandIns [][]uint32
	// MaxContext is the server's context length; a turn that would not
	// fit is not sent and the conversation stops (0: unknown, no check).
	MaxContext int
}

// NewConversation draws a conversation of n turns from g.
func NewConversation(g *Generator, n int) Conversation {
	c := Conversation{Turns: make([]Request, n)}
	for i := range c.Turns {
		c.Turns[i] = g.Next()
	}
	if g.w.Vocab != nil {
		c.StandIns = make([][]uint32, n)
		for i, t := range c.Turns {
			c.StandIns[i] = g.w.Vocab.Draw(g.rng, t.MaxTokens)
		}
	}
	return c
}

// fits reports whether a turn with hist tokens of history fits the
// context; when it does not, stop is the result that records the stop.
func (c Conversation) fits(turn Request, hist int) (stop Result, ok bool) {
	if c.MaxContext <= 0 || hist+turn.InputTokens+turn.MaxTokens <= c.MaxContext {
		return Result{}, true
	}
	return Result{Start: time.Now(), AskedInput: turn.InputTokens, History: hist, AskedOutput: turn.MaxTokens, ContextStop: true}, false
}

// Conversational is a target that can run multi-turn conversations.
type Conversational interface {
	Target
	// Converse runs the turns in order and returns one result per turn
	// attempted (it stops at the first failure, and before a turn that
	// would not fit the context, which it returns as a ContextStop
	// result). append selects session continuation (the server keeps the
	// history); otherwise each turn resends the whole history as its
	// prompt.
	Converse(ctx context.Context, c Conversation, append bool) []Result
}

// sendFunc sends one request and collects its output.
type sendFunc func(ctx context.Context, r Request, out *output) Result

// resend runs a conversation by resending the history each turn, through
// any target. Token-id turns resend ids: earlier inputs, then each answer
// as the ids the server returned (or the conversation's stand-ins), so
// every turn's new input is exactly its asked length. Text turns resend
// text joined by newlines, and count the history with the server's usage.
func resend(ctx context.Context, c Conversation, send sendFunc) []Result {
	var (
		histText strings.Builder
		histIDs  []uint32
		hist     int // tokens of history, as the server counts them
		out      []Result
	)
	for i, turn := range c.Turns {
		if ctx.Err() != nil {
			break
		}
		if stop, ok := c.fits(turn, hist); !ok {
			out = append(out, stop)
			break
		}
		turn.History = hist
		if turn.TokenIDs != nil {
			turn.TokenIDs = append(append([]uint32(nil), histIDs...), turn.TokenIDs...)
		} else {
			if histText.Len() > 0 {
				histText.WriteString("\n")
			}
			histText.WriteString(turn.Prompt)
			turn.Prompt = histText.String()
		}
		var o output
		r := send(ctx, turn, &o)
		out = append(out, r)
		if r.Err != "" || r.Cancelled {
			break
		}
		if turn.TokenIDs != nil {
			ans := o.ids
			if len(ans) != r.OutputTokens && c.StandIns != nil {
				ans = c.StandIns[i][:min(r.OutputTokens, len(c.StandIns[i]))]
			}
			histIDs = append(turn.TokenIDs, ans...)
			hist = len(histIDs)
		} else {
			histText.WriteString(o.text.String())
			hist = r.PromptTokens + r.OutputTokens
		}
	}
	return out
}

// Converse implements Conversational over OpenEngine: APPEND continuation
// of one generation session, or history resent with plain Generate.
func (g *GRPC) Converse(ctx context.Context, c Conversation, appendMode bool) []Result {
	if !appendMode {
		return resend(ctx, c, func(ctx context.Context, r Request, out *output) Result {
			return g.generate(ctx, r, g.request(r), out)
		})
	}
	info, err := g.ServerInfo(ctx)
	if err != nil {
		return []Result{failed(err)}
	}
	owner := info.GetInstanceId()
	id, err := g.openSession(ctx, owner, "")
	if err != nil {
		return []Result{failed(err)}
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = g.closeSession(cctx, id, owner)
	}()
	// The session retains every input and output token of its turns
	// (docs/api.md), so a turn's history is the sum of the turns before.
	var out []Result
	hist := 0
	for i, turn := range c.Turns {
		if ctx.Err() != nil {
			break
		}
		if stop, ok := c.fits(turn, hist); !ok {
			out = append(out, stop)
			break
		}
		turn.History = hist
		gr := g.request(turn)
		if i > 0 && turn.TokenIDs == nil {
			gr.Input = &pb.GenerateRequest_Prompt{Prompt: "\n" + turn.Prompt}
		}
		gr.Session = &pb.GenerationSessionContinuation{
			Ref:  &pb.GenerationSessionRef{SessionId: id, OwnerInstanceId: owner},
			Mode: pb.ContinuationMode_CONTINUATION_MODE_APPEND,
		}
		r := g.generate(ctx, turn, gr, nil)
		out = append(out, r)
		if r.Err != "" || r.Cancelled {
			break
		}
		if turn.TokenIDs != nil {
			hist += len(turn.TokenIDs) + r.OutputTokens
		} else {
			hist = r.PromptTokens + r.OutputTokens
		}
	}
	return out
}

// Converse implements Conversational for OpenAI servers: resend only.
func (o *OpenAI) Converse(ctx context.Context, c Conversation, appendMode bool) []Result {
	if appendMode {
		return []Result{{Err: "bench: openai targets have no sessions (use resend)", ErrKind: "unsupported"}}
	}
	return resend(ctx, c, o.generate)
}

// failed is the result of a request that could not be sent.
func failed(err error) Result {
	return Result{Start: time.Now(), Err: err.Error(), ErrKind: ErrorKind(err)}
}

// openSession opens a generation session owned by owner, with an optional
// initial prompt, and returns its id.
func (g *GRPC) openSession(ctx context.Context, owner, prompt string) (string, error) {
	req := &pb.OpenGenerationSessionRequest{Model: g.modelName(ctx)}
	if prompt != "" {
		req.InitialInput = &pb.OpenGenerationSessionRequest_Prompt{Prompt: prompt}
	}
	s, err := g.ses.OpenGenerationSession(ctx, req)
	if err != nil {
		return "", fmt.Errorf("OpenGenerationSession: %w", err)
	}
	if s.GetRef().GetSessionId() == "" {
		return "", fmt.Errorf("OpenGenerationSession: no session id in the answer")
	}
	_ = owner
	return s.GetRef().GetSessionId(), nil
}

func (g *GRPC) closeSession(ctx context.Context, id, owner string) error {
	_, err := g.ses.CloseGenerationSession(ctx, &pb.CloseGenerationSessionRequest{
		Ref: &pb.GenerationSessionRef{SessionId: id, OwnerInstanceId: owner}})
	return err
}

// StreamInput describes the streaming-input scenario: each prompt is sent
// in Chunks text chunks, one every Interval, then end of input.
type StreamInput struct {
	Chunks   int
	Interval time.Duration
}

// GenerateStream sends req's prompt as streamed input through
// OpenEngineStreaming.GenerateStream. TTFT and E2E count from the moment
// end_of_input is sent.
func (g *GRPC) GenerateStream(ctx context.Context, req Request, si StreamInput) Result {
	ctx, m := startMeter(ctx, req)
	st, err := g.str.GenerateStream(ctx)
	if err != nil {
		m.fail(err)
		return m.done()
	}
	gr := g.request(req)
	gr.Input = nil
	if err := st.Send(&pb.GenerateStreamRequest{Frame: &pb.GenerateStreamRequest_Start{Start: &pb.StreamStart{Request: gr}}}); err != nil {
		m.fail(err)
		return m.done()
	}
	sendErr := make(chan error, 1)
	var chunks []*pb.InputChunk
	if req.TokenIDs != nil {
		for _, ids := range splitIDs(req.TokenIDs, si.Chunks) {
			chunks = append(chunks, &pb.InputChunk{Data: &pb.InputChunk_TokenIds{TokenIds: &pb.TokenIds{Ids: ids}}})
		}
	} else {
		for _, t := range splitWords(req.Prompt, si.Chunks) {
			chunks = append(chunks, &pb.InputChunk{Data: &pb.InputChunk_Text{Text: t}})
		}
	}
	go func() {
		sendErr <- sendChunks(ctx, st, m, chunks, si.Interval)
	}()
	err = readEvents(m, st.Recv, nil)
	if serr := <-sendErr; err == nil && serr != nil {
		err = serr
	}
	m.fail(err)
	return m.done()
}

// streamSender is the sending half of a GenerateStream call.
type streamSender interface {
	Send(*pb.GenerateStreamRequest) error
	CloseSend() error
}

// sendChunks sends the chunks at the pace, then end of input (restarting
// the meter's clock), then half-closes.
func sendChunks(ctx context.Context, st streamSender, m *meter, chunks []*pb.InputChunk, every time.Duration) error {
	for i, c := range chunks {
		if i > 0 && every > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(every):
			}
		}
		c.Seq = uint64(i + 1)
		err := st.Send(&pb.GenerateStreamRequest{Frame: &pb.GenerateStreamRequest_Chunk{Chunk: c}})
		if err != nil {
			return nil // the receive side reports the stream's error
		}
	}
	m.restart()
	err := st.Send(&pb.GenerateStreamRequest{Frame: &pb.GenerateStreamRequest_EndOfInput{
		EndOfInput: &pb.EndOfInput{FinalSeq: proto.Uint64(uint64(len(chunks)))}}})
	if err != nil {
		return nil
	}
	return st.CloseSend()
}

// splitWords cuts text into n pieces at word boundaries, each piece but
// the first starting with its separating space, so that the pieces
// concatenate to text.
func splitWords(text string, n int) []string {
	if n <= 1 {
		return []string{text}
	}
	var cuts []int
	for i := 1; i < len(text); i++ {
		if text[i] == ' ' {
			cuts = append(cuts, i)
		}
	}
	if len(cuts)+1 < n {
		n = len(cuts) + 1
	}
	out := make([]string, 0, n)
	prev := 0
	for k := 1; k < n; k++ {
		c := cuts[k*len(cuts)/n]
		if c <= prev {
			continue
		}
		out = append(out, text[prev:c])
		prev = c
	}
	return append(out, text[prev:])
}

// splitIDs cuts ids into at most n pieces of nearly equal length.
func splitIDs(ids []uint32, n int) [][]uint32 {
	n = max(1, min(n, len(ids)))
	out := make([][]uint32, 0, n)
	for k := range n {
		a, b := k*len(ids)/n, (k+1)*len(ids)/n
		if b > a {
			out = append(out, ids[a:b])
		}
	}
	return out
}

// cancelPlan marks a fraction of requests to be cancelled at a random
// point in their output.
func cancelPlan(r *rand.Rand, req *Request, fraction float64) {
	if fraction <= 0 || r.Float64() >= fraction {
		return
	}
	req.Cancel = true
	req.CancelAfter = r.IntN(max(req.MaxTokens, 1))
}
