package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "oengine/proto/openengine/v1"
	"oengine/streaming"
)

// wantStreamError checks that an accepted stream ended with exactly one
// terminal EngineError of code and gRPC OK.
func wantStreamError(t *testing.T, rs []*pb.GenerateResponse, err error, code pb.ErrorCode) {
	t.Helper()
	if err != nil {
		t.Fatalf("status %v, want OK with a terminal EngineError", err)
	}
	n := 0
	for _, r := range rs {
		if r.GetError() != nil {
			n++
		}
	}
	if e := terminalError(rs); e == nil || e.GetCode() != code || n != 1 {
		t.Fatalf("terminal %v (%d errors), want one %v", e, n, code)
	}
}

func wantStreamOK(t *testing.T, rs []*pb.GenerateResponse, err error) {
	t.Helper()
	if err != nil || terminalError(rs) != nil {
		t.Fatalf("stream failed: %v %v", err, terminalError(rs))
	}
	finalUsage(t, rs)
}

// TestStreamingConformance: one named case per GenerateStream rule.
func TestStreamingConformance(t *testing.T) {
	h := startExt(t, func(c *ExtensionConfig) {
		c.Streaming = streaming.Limits{MaxChunkTokens: 8, MaxChunkBytes: 64, MaxChunks: 6, IdleTimeout: 300 * time.Millisecond}
	})
	ctx := ctxT(t)
	req := plainReq(4)
	ok := []*pb.GenerateStreamRequest{startFrame(req), textFrame(1, "The cat"), textFrame(2, " sat on"), endFrame(2)}

	t.Run("in order", func(t *testing.T) {
		rs, err := h.stream(ctx, ok, 0, true)
		wantStreamOK(t, rs, err)
		if len(outputIDs(rs)) != 4 {
			t.Fatalf("%d tokens", len(outputIDs(rs)))
		}
	})
	t.Run("duplicate chunk identical", func(t *testing.T) {
		rs, err := h.stream(ctx, []*pb.GenerateStreamRequest{startFrame(req), textFrame(1, "The cat"), textFrame(1, "The cat"),
			textFrame(2, " sat on"), textFrame(2, " sat on"), endFrame(2)}, 0, true)
		wantStreamOK(t, rs, err)
		ref, _ := h.stream(ctx, ok, 0, true)
		if !slices.Equal(outputIDs(rs), outputIDs(ref)) || finalUsage(t, rs).GetPromptTokens() != finalUsage(t, ref).GetPromptTokens() {
			t.Fatal("a retransmit changed the input")
		}
	})
	t.Run("duplicate chunk different", func(t *testing.T) {
		rs, err := h.stream(ctx, []*pb.GenerateStreamRequest{startFrame(req), textFrame(1, "The cat"), textFrame(1, "The dog"), endFrame()}, 0, true)
		wantStreamError(t, rs, err, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT)
	})
	t.Run("gap", func(t *testing.T) {
		rs, err := h.stream(ctx, []*pb.GenerateStreamRequest{startFrame(req), textFrame(1, "a"), textFrame(3, "c"), endFrame()}, 0, true)
		wantStreamError(t, rs, err, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT)
	})
	t.Run("chunk before start", func(t *testing.T) {
		_, err := h.stream(ctx, []*pb.GenerateStreamRequest{textFrame(1, "a"), startFrame(req)}, 0, true)
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("end before start", func(t *testing.T) {
		_, err := h.stream(ctx, []*pb.GenerateStreamRequest{endFrame()}, 0, true)
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("second start", func(t *testing.T) {
		rs, err := h.stream(ctx, []*pb.GenerateStreamRequest{startFrame(req), textFrame(1, "a"), startFrame(req), endFrame()}, 0, true)
		wantStreamError(t, rs, err, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT)
	})
	t.Run("input after end", func(t *testing.T) {
		long := plainReq(1000)
		rs, err := h.stream(ctx, []*pb.GenerateStreamRequest{startFrame(long), textFrame(1, "a b"), endFrame(), textFrame(2, "c")}, 0, true)
		wantStreamError(t, rs, err, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT)
	})
	t.Run("wrong final_seq", func(t *testing.T) {
		rs, err := h.stream(ctx, []*pb.GenerateStreamRequest{startFrame(req), textFrame(1, "a"), endFrame(3)}, 0, true)
		wantStreamError(t, rs, err, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT)
	})
	t.Run("half-close without end", func(t *testing.T) {
		rs, err := h.stream(ctx, []*pb.GenerateStreamRequest{startFrame(req), textFrame(1, "a")}, 0, true)
		wantStreamError(t, rs, err, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT)
	})
	t.Run("early output refused", func(t *testing.T) {
		f := startFrame(req)
		f.GetStart().EarlyOutput = true
		_, err := h.stream(ctx, []*pb.GenerateStreamRequest{f, endFrame()}, 0, true)
		wantStatus(t, err, codes.Unimplemented, "UNSUPPORTED_FEATURE")
	})
	t.Run("idle timeout", func(t *testing.T) {
		start := time.Now()
		rs, err := h.stream(ctx, []*pb.GenerateStreamRequest{startFrame(req), textFrame(1, "a")}, 0, false)
		wantStreamError(t, rs, err, pb.ErrorCode_ERROR_CODE_CANCELLED)
		if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
			t.Fatalf("idle stream ended after %v", d)
		}
	})
	t.Run("input acks", func(t *testing.T) {
		rs, err := h.stream(ctx, ok, 0, true)
		wantStreamOK(t, rs, err)
		var seqs []uint64
		firstToken := -1
		for i, r := range rs {
			if a := r.GetInputAck(); a != nil {
				if firstToken >= 0 {
					t.Fatal("an ack after output began")
				}
				seqs = append(seqs, a.GetReceivedThroughSeq())
			}
			if r.GetToken() != nil && firstToken < 0 {
				firstToken = i
			}
		}
		if !slices.Equal(seqs, []uint64{1, 2, 2}) {
			t.Fatalf("acks through %v", seqs)
		}
	})
	t.Run("advertised limits are enforced", func(t *testing.T) {
		mi, err := h.ctl.GetModelInfo(ctx, &pb.GetModelInfoRequest{Model: extModel})
		if err != nil {
			t.Fatal(err)
		}
		caps := mi.GetStreamingInput()
		if !caps.GetSupported() {
			t.Skip("ModelInfo does not report the extension yet (server-hooks.md)")
		}
		if caps.GetEarlyOutput() || !caps.GetEarlyPrefill() || !slices.Equal(caps.GetModalities(), []string{"text", "token_ids"}) {
			t.Fatalf("caps %v", caps)
		}
		maxBytes, maxToks, maxChunks := int(caps.GetMaxChunkBytes()), int(caps.GetMaxChunkTokens()), caps.GetMaxChunks()
		over := []struct {
			name   string
			frames []*pb.GenerateStreamRequest
		}{
			{"chunk bytes", []*pb.GenerateStreamRequest{startFrame(req), textFrame(1, strings.Repeat("a", maxBytes+1)), endFrame()}},
			{"chunk tokens", []*pb.GenerateStreamRequest{startFrame(req), idsFrame(1, make([]uint32, maxToks+1)...), endFrame()}},
		}
		var many []*pb.GenerateStreamRequest
		many = append(many, startFrame(req))
		for i := uint64(1); i <= uint64(maxChunks)+1; i++ {
			many = append(many, textFrame(i, "x "))
		}
		over = append(over, struct {
			name   string
			frames []*pb.GenerateStreamRequest
		}{"chunks", append(many, endFrame())})
		for _, o := range over {
			rs, err := h.stream(ctx, o.frames, 0, true)
			wantStreamError(t, rs, err, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT)
		}
		// Exactly at the limits is fine.
		at := []*pb.GenerateStreamRequest{startFrame(req), textFrame(1, strings.Repeat("a", maxBytes)), idsFrame(2, make([]uint32, maxToks)...)}
		for i := uint64(3); i <= uint64(maxChunks); i++ {
			at = append(at, textFrame(i, "x "))
		}
		rs, err := h.stream(ctx, append(at, endFrame()), 0, true)
		wantStreamOK(t, rs, err)
		if caps.GetInputIdleTimeoutMs() != 300 {
			t.Fatalf("advertised idle timeout %d ms", caps.GetInputIdleTimeoutMs())
		}
	})
}

// TestStreamedTextEqualsWholeText: over random splits, the tokens a session
// retains from a streamed prompt equal the tokenization of the whole text.
func TestStreamedTextEqualsWholeText(t *testing.T) {
	h := startExt(t, nil)
	ctx := ctxT(t)
	r := rand.New(rand.NewPCG(3, 4))
	whole := "Hello world, this is a   streamed\tprompt: naïve café <s> 1234 fits. </s>Done!\n\nNew line"
	for i := 0; i < 12; i++ {
		id := "split-" + string(rune('a'+i))
		h.open(ctx, id, "")
		var pieces []string
		prev := 0
		for j := range whole {
			if j > 0 && r.IntN(5) == 0 {
				pieces = append(pieces, whole[prev:j])
				prev = j
			}
		}
		pieces = append(pieces, whole[prev:])
		start := h.cont(id, 0, "", 1)
		bos := i%2 == 0 // even: the first piece is the start frame's prompt (BOS rule)
		frames := []*pb.GenerateStreamRequest{}
		if bos {
			start.Input = &pb.GenerateRequest_Prompt{Prompt: pieces[0]}
			pieces = pieces[1:]
		}
		frames = append(frames, startFrame(start))
		for k, p := range pieces {
			frames = append(frames, textFrame(uint64(k+1), p))
		}
		frames = append(frames, endFrame(uint64(len(pieces))))
		rs, err := h.stream(ctx, frames, 0, true)
		wantStreamOK(t, rs, err)
		got := h.get(ctx, id).GetTokenIds()
		want := h.encode(whole, bos)
		if len(got) != len(want)+1 || !slices.Equal(got[:len(want)], want) {
			t.Fatalf("split %q:\n retained %v\n whole    %v", pieces, got, want)
		}
	}
}

// TestStreamedEqualsUnary: a prompt streamed in chunks gives the output of
// the same prompt sent whole to unary Generate.
func TestStreamedEqualsUnary(t *testing.T) {
	h := startExt(t, nil)
	ctx := ctxT(t)
	prompt := "Once upon a time, in a land far away, there lived a small robot who loved to count stars."
	unary := plainReq(8)
	unary.Input = &pb.GenerateRequest_Prompt{Prompt: prompt}
	unary.Kv = &pb.KvOptions{BypassPrefixCache: ptr(true)}
	ur, err := h.generate(ctx, unary)
	if err != nil {
		t.Fatal(err)
	}
	words := splitWords(prompt)
	start := plainReq(8)
	start.Input = &pb.GenerateRequest_Prompt{Prompt: words[0]}
	frames := []*pb.GenerateStreamRequest{startFrame(start)}
	for i, w := range words[1:] {
		frames = append(frames, textFrame(uint64(i+1), w))
	}
	frames = append(frames, endFrame())
	sr, err := h.stream(ctx, frames, 5*time.Millisecond, true)
	wantStreamOK(t, sr, err)
	if !slices.Equal(outputIDs(sr), outputIDs(ur)) || finalUsage(t, sr).GetPromptTokens() != finalUsage(t, ur).GetPromptTokens() {
		t.Fatalf("streamed %v (%d prompt tokens), unary %v (%d)", outputIDs(sr), finalUsage(t, sr).GetPromptTokens(),
			outputIDs(ur), finalUsage(t, ur).GetPromptTokens())
	}
}

// TestStreamCancelAndSession: cancelling a stream that continues a session
// leaves it unchanged, or closes it with close_session_on_cancel.
func TestStreamCancelAndSession(t *testing.T) {
	h := startExt(t, nil)
	ctx := ctxT(t)
	for _, closeIt := range []bool{false, true} {
		id := "keep"
		if closeIt {
			id = "close"
		}
		h.open(ctx, id, sysPrompt)
		before := h.get(ctx, id)
		cctx, cancel := context.WithCancel(ctx)
		st, err := h.strm.GenerateStream(cctx)
		if err != nil {
			t.Fatal(err)
		}
		f := startFrame(h.cont(id, 0, "", 10))
		f.GetStart().CloseSessionOnCancel = closeIt
		st.Send(f)
		st.Send(textFrame(1, " Some streamed input"))
		if r, err := st.Recv(); err != nil || r.GetInputAck() == nil {
			t.Fatalf("first response %v %v", r, err)
		}
		cancel()
		eventually(t, "turn ended", func() bool {
			gs := h.get(ctx, id)
			return gs.GetState() != pb.GenerationSessionState_GENERATION_SESSION_STATE_RUNNING
		})
		after := h.get(ctx, id)
		if closeIt {
			if after.GetState() != pb.GenerationSessionState_GENERATION_SESSION_STATE_CLOSED {
				t.Fatalf("close_session_on_cancel: state %v", after.GetState())
			}
			continue
		}
		if after.GetState() != pb.GenerationSessionState_GENERATION_SESSION_STATE_IDLE || !slices.Equal(after.GetTokenIds(), before.GetTokenIds()) {
			t.Fatalf("cancel changed the session:\n%v\n%v", before, after)
		}
	}
	// Abort(request_id) of a stream that continues a session: the stream
	// ends CANCELLED, the session is unchanged and still open.
	h.open(ctx, "abort", sysPrompt)
	before := h.get(ctx, "abort")
	st, err := h.strm.GenerateStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Send(startFrame(h.cont("abort", 0, "", 10)))
	st.Send(textFrame(1, " input that never ends"))
	r, err := st.Recv()
	if err != nil || r.GetInputAck() == nil || r.GetRequestId() == "" {
		t.Fatalf("first response %v %v", r, err)
	}
	if _, err := h.ctl.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_RequestId{RequestId: r.GetRequestId()}}); err != nil {
		t.Fatal(err)
	}
	var last *pb.GenerateResponse
	for {
		r, err := st.Recv()
		if err != nil {
			break
		}
		last = r
	}
	if last.GetError().GetCode() != pb.ErrorCode_ERROR_CODE_CANCELLED {
		t.Fatalf("aborted stream ended with %v", last)
	}
	after := h.get(ctx, "abort")
	if after.GetState() != pb.GenerationSessionState_GENERATION_SESSION_STATE_IDLE || !slices.Equal(after.GetTokenIds(), before.GetTokenIds()) {
		t.Fatalf("abort changed the session:\n%v\n%v", before, after)
	}
	eventually(t, "engine idle", func() bool { return h.eng.Load().Running == 0 && h.eng.Cache().Stats().InUse == 0 })
}

// TestStreamInputAfterEndOneTerminal (issue 17, point 13): a
// chunk after end_of_input, sent once output has begun, ends the stream
// with exactly one terminal EngineError INVALID_ARGUMENT: no
// GenerationFinished (CANCELLED or other) before it, nothing after it.
func TestStreamInputAfterEndOneTerminal(t *testing.T) {
	h := startExt(t, nil)
	ctx := ctxT(t)
	st, err := h.strm.GenerateStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Long enough that the output is still running when chunk 2 arrives.
	for _, f := range []*pb.GenerateStreamRequest{startFrame(plainReq(1500)), textFrame(1, "The cat sat"), endFrame(1)} {
		if err := st.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	var rs []*pb.GenerateResponse
	for {
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("stream ended before output began: %v", err)
		}
		rs = append(rs, r)
		if r.GetToken() != nil {
			break
		}
	}
	if err := st.Send(textFrame(2, " on the mat")); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("status %v, want OK", err)
		}
		rs = append(rs, r)
	}
	terminals := 0
	for i, r := range rs {
		if f := r.GetFinished(); f != nil {
			t.Errorf("response %d: finished %v (reason %v) before the error", i, f, f.GetReason())
		}
		if r.GetError() != nil {
			terminals++
			if i != len(rs)-1 {
				t.Errorf("response %d is the error, %d responses follow it", i, len(rs)-1-i)
			}
		}
	}
	if e := terminalError(rs); terminals != 1 || e.GetCode() != pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT {
		t.Fatalf("%d errors, last response %v: want exactly one terminal INVALID_ARGUMENT", terminals, rs[len(rs)-1])
	}
}

// TestSessionContinuationReusesPartialPage (issue 17 point 12): over gRPC,
// a continuation reuses all the retained K/V the session holds, the partly
// filled last page included (page size 16): a session holding 13 tokens
// continues with cached_prompt_tokens 13 (was 0), one holding 29 with 29
// (was 16); after a turn that sampled, retained - 1 (the last sampled
// token has no K/V yet); a streamed continuation reuses it too. Outputs
// equal runs from scratch, also after a BRANCH cut inside the partial page
// (copy-on-write), and the harness checks the page ledger at the end.
func TestSessionContinuationReusesPartialPage(t *testing.T) {
	h := startExt(t, nil)
	ctx := ctxT(t)
	words := h.encode(strings.Repeat(sysPrompt+" ", 8), true)
	ids := func(v []uint32) *pb.GenerateRequest_TokenIds {
		return &pb.GenerateRequest_TokenIds{TokenIds: &pb.TokenIds{Ids: v}}
	}
	scratch := func(prompt []uint32, n uint32) []uint32 {
		t.Helper()
		req := plainReq(n)
		req.Input = ids(prompt)
		req.Kv = &pb.KvOptions{BypassPrefixCache: ptr(true), CacheSalt: ptr("scratch")}
		rs, err := h.generate(ctx, req)
		if err != nil || terminalError(rs) != nil {
			t.Fatalf("from scratch: %v %v", err, terminalError(rs))
		}
		return outputIDs(rs)
	}
	turn := func(id string, mode pb.ContinuationMode, from *uint32, in []uint32, wantCached uint32) {
		t.Helper()
		base := h.get(ctx, id).GetTokenIds()
		if from != nil {
			base = base[:*from]
		}
		req := h.cont(id, mode, "", 4)
		req.Session.FromToken = from
		req.Input = ids(in)
		rs, err := h.generate(ctx, req)
		if err != nil || terminalError(rs) != nil {
			t.Fatalf("%v turn: %v %v", mode, err, terminalError(rs))
		}
		prompt := append(slices.Clone(base), in...)
		if u := finalUsage(t, rs); u.GetPromptTokens() != uint32(len(prompt)) || u.GetCachedPromptTokens() != wantCached {
			t.Fatalf("%v turn on %d retained tokens: usage %v, want %d cached", mode, len(base), u, wantCached)
		}
		if want := scratch(prompt, 4); !slices.Equal(outputIDs(rs), want) {
			t.Fatalf("%v output %v, from scratch %v", mode, outputIDs(rs), want)
		}
	}
	for _, n := range []int{13, 29} {
		id := fmt.Sprintf("held-%d", n)
		if _, err := h.sess.OpenGenerationSession(ctx, &pb.OpenGenerationSessionRequest{SessionId: id, Model: extModel,
			InitialInput: &pb.OpenGenerationSessionRequest_TokenIds{TokenIds: &pb.TokenIds{Ids: words[:n]}}}); err != nil {
			t.Fatal(err)
		}
		append0 := pb.ContinuationMode_CONTINUATION_MODE_APPEND
		turn(id, append0, nil, words[40:43], uint32(n))
		// n + 3 + 4 retained, the last sampled token not yet computed.
		turn(id, append0, nil, words[43:45], uint32(n+3+4-1))
		// A branch cut inside the partial last page, then the session is
		// continued: its page was copied, not written.
		cut := uint32(n + 2)
		turn(id, pb.ContinuationMode_CONTINUATION_MODE_BRANCH, &cut, words[50:52], cut)
		gs := h.get(ctx, id)
		turn(id, append0, nil, words[45:46], gs.GetRetainedTokens()-1)
	}

	// A streamed continuation: all of the resident tokens, or all but the
	// last when it is admitted before its first chunk arrives.
	gs := h.get(ctx, "held-13")
	rs, err := h.stream(ctx, []*pb.GenerateStreamRequest{startFrame(h.cont("held-13", 0, "", 4)), idsFrame(1, words[46:49]...), endFrame(1)}, 0, true)
	wantStreamOK(t, rs, err)
	if u := finalUsage(t, rs); u.GetCachedPromptTokens() < gs.GetRetainedTokens()-1 || u.GetCachedPromptTokens() > gs.GetRetainedTokens() {
		t.Fatalf("streamed turn on %d retained: usage %v", gs.GetRetainedTokens(), u)
	}
}
