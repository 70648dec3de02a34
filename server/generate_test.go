package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	pb "oengine/proto/openengine/v1"
)

func prompt(p string) *pb.GenerateRequest {
	return &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: p}}
}

func tokens(ids ...uint32) *pb.GenerateRequest {
	return &pb.GenerateRequest{Input: &pb.GenerateRequest_TokenIds{TokenIds: &pb.TokenIds{Ids: ids}}}
}

// TestGenerateRefusedBeforeAcceptance: every validation and admission row
// of the error table is a non-OK status with an ErrorInfo and no event.
func TestGenerateRefusedBeforeAcceptance(t *testing.T) {
	f := newFake(t, "m")
	cfg := testConfig()
	cfg.MaxPromptBytes = 64
	h := startServer(t, cfg, Model{Backend: f})
	big := strings.Repeat("x", 65)
	cases := []struct {
		name   string
		req    *pb.GenerateRequest
		md     []string
		code   codes.Code
		reason string
	}{
		{"no input", &pb.GenerateRequest{}, nil, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"empty token_ids", tokens(), nil, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"token id outside vocabulary", tokens(1, fakeVocab), nil, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"num_sequences zero", with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Sampling = &pb.SamplingParams{NumSequences: proto.Uint32(0)}
		}), nil, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"max_tokens zero", with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Stopping = &pb.StoppingOptions{MaxTokens: proto.Uint32(0)}
		}), nil, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"min_tokens above max_tokens", with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Stopping = &pb.StoppingOptions{MaxTokens: proto.Uint32(2), MinTokens: proto.Uint32(3)}
		}), nil, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"empty stop condition", with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Stopping = &pb.StoppingOptions{Conditions: []*pb.StopCondition{{}}}
		}), nil, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"empty candidate token ids", with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Response = &pb.ResponseOptions{ReturnOutputLogprobs: proto.Bool(true),
				OutputCandidates: &pb.CandidateTokenSelection{Selection: &pb.CandidateTokenSelection_TokenIds{TokenIds: &pb.TokenIds{}}}}
		}), nil, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"prompt too large", prompt(big), nil, codes.InvalidArgument, "PAYLOAD_TOO_LARGE"},
		{"context length exceeded", prompt("too-long"), nil, codes.InvalidArgument, "CONTEXT_LENGTH_EXCEEDED"},
		{"unknown model", with(prompt("a"), func(r *pb.GenerateRequest) { r.Model = "nope" }), nil, codes.NotFound, "MODEL_NOT_FOUND"},
		{"guided decoding without a tokenizer", with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Guided = &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_Regex{Regex: "a+"}}
		}), nil, codes.Unimplemented, "UNSUPPORTED_FEATURE"},
		{"guided structural_tag unsupported", with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Guided = &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_StructuralTag{StructuralTag: "{}"}}
		}), nil, codes.Unimplemented, "UNSUPPORTED_FEATURE"},
		{"guided unknown backend", with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Guided = &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_Regex{Regex: "a+"}, Backend: "xgrammar"}
		}), nil, codes.Unimplemented, "UNSUPPORTED_FEATURE"},
		{"guided backend without a guide", with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Guided = &pb.GuidedDecoding{Backend: "oengine"}
		}), nil, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"guided empty choice", with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Guided = &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_Choice{Choice: &pb.ChoiceConstraint{}}}
		}), nil, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"media unsupported", with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Media = []*pb.MediaItem{{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_Url{Url: "http://x/y.png"}}}
		}), nil, codes.Unimplemented, "UNSUPPORTED_FEATURE"},
		{"lora unsupported", with(prompt("a"), func(r *pb.GenerateRequest) { r.LoraName = "adapter" }), nil, codes.Unimplemented, "UNSUPPORTED_FEATURE"},
		{"generation session unsupported", with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Session = &pb.GenerationSessionContinuation{Ref: &pb.GenerationSessionRef{SessionId: "s"}}
		}), nil, codes.Unimplemented, "UNSUPPORTED_FEATURE"},
		{"kv session on aggregated is role mismatch", with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Kv = &pb.KvOptions{Session: &pb.KvSessionRef{SessionId: "k"}}
		}), nil, codes.FailedPrecondition, "ROLE_MISMATCH"},
		{"kv session dp rank disagrees with metadata", with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Kv = &pb.KvOptions{Session: &pb.KvSessionRef{SessionId: "k", DpRank: 1}}
		}), []string{mdTargetDPRank, "0"}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"queue full", prompt("overload"), nil, codes.ResourceExhausted, "OVERLOADED"},
		{"malformed priority", prompt("a"), []string{mdPriority, "high"}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"priority out of int32", prompt("a"), []string{mdPriority, "2147483648"}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"priority with plus sign", prompt("a"), []string{mdPriority, "+3"}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"repeated priority", prompt("a"), []string{mdPriority, "1", mdPriority, "2"}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"malformed dp rank", prompt("a"), []string{mdTargetDPRank, "-1"}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"unknown dp rank", prompt("a"), []string{mdTargetDPRank, "3"}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"empty routing key", prompt("a"), []string{mdRoutingKey, ""}, codes.InvalidArgument, "INVALID_ARGUMENT"},
		{"repeated routing key", prompt("a"), []string{mdRoutingKey, "a", mdRoutingKey, "b"}, codes.InvalidArgument, "INVALID_ARGUMENT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := h.generate(ctxT(t), tc.req, tc.md...)
			if len(rs) != 0 {
				t.Fatalf("refused request sent %d events", len(rs))
			}
			wantStatus(t, err, tc.code, tc.reason)
		})
	}
}

func with(r *pb.GenerateRequest, f func(*pb.GenerateRequest)) *pb.GenerateRequest {
	f(r)
	return r
}

// checkStream asserts the stream-shape rules of the contract: output_index
// on every output event, nothing for an index after its
// GenerationFinished, one GenerationFinished per output, Usage only on the
// final response, and the final response is the last GenerationFinished.
func checkStream(t *testing.T, rs []*pb.GenerateResponse, outputs int) {
	t.Helper()
	if len(rs) == 0 {
		t.Fatal("empty stream")
	}
	finished := map[uint32]bool{}
	for i, r := range rs {
		last := i == len(rs)-1
		if (r.GetUsage() != nil) != last {
			t.Fatalf("response %d: usage present=%v, want only on the final response", i, r.GetUsage() != nil)
		}
		switch ev := r.GetEvent().(type) {
		case *pb.GenerateResponse_Token:
			if ev.Token.OutputIndex == nil {
				t.Fatalf("response %d: TokenOutput without output_index", i)
			}
			if finished[ev.Token.GetOutputIndex()] {
				t.Fatalf("response %d: token for output %d after its GenerationFinished", i, ev.Token.GetOutputIndex())
			}
		case *pb.GenerateResponse_Finished:
			if ev.Finished.OutputIndex == nil {
				t.Fatalf("response %d: GenerationFinished without output_index", i)
			}
			if finished[ev.Finished.GetOutputIndex()] {
				t.Fatalf("response %d: second GenerationFinished for output %d", i, ev.Finished.GetOutputIndex())
			}
			finished[ev.Finished.GetOutputIndex()] = true
		case *pb.GenerateResponse_Prompt:
			if i != 0 {
				t.Fatalf("response %d: PromptOutput not first", i)
			}
		}
	}
	if len(finished) != outputs {
		t.Fatalf("%d outputs finished, want %d", len(finished), outputs)
	}
	if rs[len(rs)-1].GetFinished() == nil {
		t.Fatal("the final response is not a GenerationFinished")
	}
	u := rs[len(rs)-1].GetUsage()
	if u.GetCachedPromptTokens() > u.GetPromptTokens() || u.GetTotalTokens() != u.GetPromptTokens()+u.GetCompletionTokens() {
		t.Fatalf("inconsistent usage %v", u)
	}
}

func TestGenerateStreamContract(t *testing.T) {
	f := newFake(t, "m")
	cfg := testConfig()
	h := startServer(t, cfg, Model{Backend: f, Aliases: []string{"alias-m"}})

	t.Run("single output with output_index 0 and usage on the final response", func(t *testing.T) {
		rs, err := h.generate(ctxT(t), with(prompt("hello there"), func(r *pb.GenerateRequest) { r.RequestId = "one" }))
		if err != nil {
			t.Fatal(err)
		}
		checkStream(t, rs, 1)
		for _, r := range rs {
			if r.GetRequestId() != "one" {
				t.Fatalf("request_id %q", r.GetRequestId())
			}
			if r.GetPrompt() != nil {
				t.Fatal("PromptOutput without prompt logprobs asked for")
			}
		}
		if got := textOf(rs, 0); got != "t10 t11 t12 " {
			t.Fatalf("text %q", got)
		}
		u := rs[len(rs)-1].GetUsage()
		if u.GetPromptTokens() != 2 || u.GetCompletionTokens() != 3 || u.GetTotalTokens() != 5 || u.CachedPromptTokens == nil {
			t.Fatalf("usage %v", u)
		}
		if fin := rs[len(rs)-1].GetFinished(); fin.GetReason() != pb.FinishReason_FINISH_REASON_LENGTH || fin.GetStopMatch() != nil {
			t.Fatalf("finish %v", fin)
		}
	})
	t.Run("deltas are never cumulative", func(t *testing.T) {
		rs, err := h.generate(ctxT(t), prompt("a"))
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint32
		for _, r := range rs {
			if tok := r.GetToken(); tok != nil {
				if len(tok.GetTokens()) != 1 || !strings.HasSuffix(tok.GetText(), " ") || strings.Count(tok.GetText(), "t") != 1 {
					t.Fatalf("token event %v is not a delta", tok)
				}
				ids = append(ids, tok.GetTokens()[0].GetTokenId())
				if tok.GetTokens()[0].GetToken() == "" {
					t.Fatal("TokenInfo.token empty")
				}
			}
		}
		if len(ids) != 3 || ids[0] != 10 || ids[2] != 12 {
			t.Fatalf("token ids %v", ids)
		}
	})
	t.Run("num_sequences gives each output its index and one finish", func(t *testing.T) {
		rs, err := h.generate(ctxT(t), with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Sampling = &pb.SamplingParams{NumSequences: proto.Uint32(3)}
		}))
		if err != nil {
			t.Fatal(err)
		}
		checkStream(t, rs, 3)
		if textOf(rs, 2) != "t210 t211 t212 " {
			t.Fatalf("output 2 text %q", textOf(rs, 2))
		}
		if got := f.requests()[len(f.requests())-1].N; got != 3 {
			t.Fatalf("engine N %d", got)
		}
	})
	t.Run("token_ids input used exactly", func(t *testing.T) {
		_, err := h.generate(ctxT(t), tokens(5, 6, 7))
		if err != nil {
			t.Fatal(err)
		}
		r := f.requests()[len(f.requests())-1]
		if len(r.TokenIDs) != 3 || r.TokenIDs[2] != 7 || r.Prompt != "" {
			t.Fatalf("engine request %+v", r)
		}
	})
	t.Run("alias resolves to the model", func(t *testing.T) {
		_, err := h.generate(ctxT(t), with(prompt("a"), func(r *pb.GenerateRequest) { r.Model = "alias-m" }))
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("stop token match", func(t *testing.T) {
		rs, err := h.generate(ctxT(t), with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Stopping = &pb.StoppingOptions{MaxTokens: proto.Uint32(10),
				Conditions: []*pb.StopCondition{{Condition: &pb.StopCondition_StopTokenId{StopTokenId: 11}}}}
		}))
		if err != nil {
			t.Fatal(err)
		}
		fin := rs[len(rs)-1].GetFinished()
		if fin.GetReason() != pb.FinishReason_FINISH_REASON_STOP || fin.GetStopMatch().GetStopTokenId() != 11 {
			t.Fatalf("finish %v", fin)
		}
	})
	t.Run("stop text match", func(t *testing.T) {
		rs, err := h.generate(ctxT(t), with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Stopping = &pb.StoppingOptions{IncludeStopInOutput: proto.Bool(true),
				Conditions: []*pb.StopCondition{{Condition: &pb.StopCondition_StopText{StopText: "t11"}}}}
		}))
		if err != nil {
			t.Fatal(err)
		}
		fin := rs[len(rs)-1].GetFinished()
		if fin.GetStopMatch().GetStopText() != "t11" {
			t.Fatalf("finish %v", fin)
		}
		if r := f.requests()[len(f.requests())-1]; !r.Stop.IncludeStopInOutput || r.Stop.Strings[0] != "t11" {
			t.Fatalf("stop params %+v", r.Stop)
		}
	})
	t.Run("eos match", func(t *testing.T) {
		rs, err := h.generate(ctxT(t), prompt("eos"))
		if err != nil {
			t.Fatal(err)
		}
		fin := rs[len(rs)-1].GetFinished()
		if fin.GetReason() != pb.FinishReason_FINISH_REASON_STOP || fin.GetStopMatch().GetEosTokenId() != fakeEOS {
			t.Fatalf("finish %v", fin)
		}
	})
	t.Run("prompt logprobs: PromptOutput once, first token bare", func(t *testing.T) {
		rs, err := h.generate(ctxT(t), with(tokens(4, 5, 6), func(r *pb.GenerateRequest) {
			r.Response = &pb.ResponseOptions{ReturnPromptLogprobs: proto.Bool(true),
				PromptCandidates: &pb.CandidateTokenSelection{Selection: &pb.CandidateTokenSelection_TopN{TopN: 2}}}
		}))
		if err != nil {
			t.Fatal(err)
		}
		checkStream(t, rs, 1)
		po := rs[0].GetPrompt()
		if po == nil || len(po.GetTokens()) != 3 {
			t.Fatalf("first response %v", rs[0])
		}
		first := po.GetTokens()[0]
		if first.Logprob != nil || first.Rank != nil || len(first.GetCandidates()) != 0 {
			t.Fatalf("first prompt token has logprob data: %v", first)
		}
		second := po.GetTokens()[1]
		if second.Logprob == nil || second.GetRank() != 1 || len(second.GetCandidates()) != 2 {
			t.Fatalf("second prompt token %v", second)
		}
		n := 0
		for _, r := range rs {
			if r.GetPrompt() != nil {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d PromptOutputs", n)
		}
	})
	t.Run("prompt_logprob_start skips leading positions", func(t *testing.T) {
		rs, err := h.generate(ctxT(t), with(tokens(4, 5, 6), func(r *pb.GenerateRequest) {
			r.Response = &pb.ResponseOptions{ReturnPromptLogprobs: proto.Bool(true), PromptLogprobStart: proto.Uint32(2)}
		}))
		if err != nil {
			t.Fatal(err)
		}
		if toks := rs[0].GetPrompt().GetTokens(); len(toks) != 1 || toks[0].GetTokenId() != 6 || toks[0].Logprob == nil {
			t.Fatalf("prompt tokens %v", toks)
		}
	})
	t.Run("output logprobs with explicit candidate ids", func(t *testing.T) {
		rs, err := h.generate(ctxT(t), with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Response = &pb.ResponseOptions{ReturnOutputLogprobs: proto.Bool(true),
				OutputCandidates: &pb.CandidateTokenSelection{Selection: &pb.CandidateTokenSelection_TokenIds{TokenIds: &pb.TokenIds{Ids: []uint32{7, 9}}}}}
		}))
		if err != nil {
			t.Fatal(err)
		}
		ti := rs[0].GetToken().GetTokens()[0]
		if ti.Logprob == nil || len(ti.GetCandidates()) != 2 || ti.GetCandidates()[1].GetTokenId() != 9 || ti.GetCandidates()[1].GetToken() != "t9 " {
			t.Fatalf("token info %v", ti)
		}
	})
	t.Run("no logprobs unless asked", func(t *testing.T) {
		rs, err := h.generate(ctxT(t), prompt("a"))
		if err != nil {
			t.Fatal(err)
		}
		if ti := rs[0].GetToken().GetTokens()[0]; ti.Logprob != nil || ti.Rank != nil {
			t.Fatalf("token info %v", ti)
		}
	})
	t.Run("sampling, stopping and kv options reach the engine", func(t *testing.T) {
		_, err := h.generate(ctxT(t), with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Sampling = &pb.SamplingParams{Temperature: proto.Float64(0.5), TopK: proto.Int32(7), Seed: proto.Uint64(9)}
			r.Stopping = &pb.StoppingOptions{MaxTokens: proto.Uint32(2), MinTokens: proto.Uint32(1), IgnoreEos: proto.Bool(true)}
			r.Kv = &pb.KvOptions{BypassPrefixCache: proto.Bool(true), CacheSalt: proto.String("salt")}
			r.Extra = &structpb.Struct{Fields: map[string]*structpb.Value{"unknown": structpb.NewBoolValue(true), "speculative": structpb.NewBoolValue(false)}}
		}), mdPriority, "-5", mdRoutingKey, "rk", mdTargetDPRank, "0", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		if err != nil {
			t.Fatal(err)
		}
		r := f.requests()[len(f.requests())-1]
		if *r.Sampling.Temperature != 0.5 || *r.Sampling.TopK != 7 || *r.Sampling.Seed != 9 || r.Sampling.TopP != nil ||
			r.MaxTokens != 2 || r.MinTokens != 1 || !r.Stop.IgnoreEOS || !r.BypassPrefixCache || r.CacheSalt != "salt" || r.Priority != -5 || !r.NoSpeculation {
			t.Fatalf("engine request %+v", r)
		}
	})
	t.Run("failure after acceptance is one EngineError then OK", func(t *testing.T) {
		rs, err := h.generate(ctxT(t), prompt("fail"))
		if err != nil {
			t.Fatalf("status %v, want OK", err)
		}
		last := rs[len(rs)-1]
		if last.GetError().GetCode() != pb.ErrorCode_ERROR_CODE_INTERNAL {
			t.Fatalf("last response %v", last)
		}
		for _, r := range rs[:len(rs)-1] {
			if r.GetError() != nil || r.GetFinished() != nil {
				t.Fatalf("unexpected %v before the EngineError", r)
			}
		}
	})
	t.Run("failure before any token is one EngineError", func(t *testing.T) {
		rs, err := h.generate(ctxT(t), prompt("fail-early"))
		if err != nil || len(rs) != 1 || rs[0].GetError() == nil || rs[0].GetError().GetRetryable() {
			t.Fatalf("responses %v, status %v", rs, err)
		}
	})
}

func TestGenerateDuplicateAbortAndCancel(t *testing.T) {
	f := newFake(t, "m")
	f.gate = make(chan struct{})
	h := startServer(t, testConfig(), Model{Backend: f})
	ctx := ctxT(t)

	// A live request, held at its first token by the gate.
	st, err := h.inf.Generate(ctx, with(prompt("a"), func(r *pb.GenerateRequest) { r.RequestId = "live" }))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "request live", func() bool { return f.liveCount() == 1 })

	t.Run("duplicate live request id", func(t *testing.T) {
		_, err := h.generate(ctx, with(prompt("a"), func(r *pb.GenerateRequest) { r.RequestId = "live" }))
		wantStatus(t, err, codes.AlreadyExists, "DUPLICATE_REQUEST")
	})
	t.Run("abort without target", func(t *testing.T) {
		_, err := h.ctl.Abort(ctx, &pb.AbortRequest{})
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("abort unknown request", func(t *testing.T) {
		_, err := h.ctl.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_RequestId{RequestId: "nope"}})
		wantStatus(t, err, codes.NotFound, "REQUEST_NOT_FOUND")
	})
	t.Run("abort unknown kv session", func(t *testing.T) {
		_, err := h.ctl.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_KvSession{KvSession: &pb.KvSessionRef{SessionId: "k"}}})
		wantStatus(t, err, codes.NotFound, "KV_SESSION_NOT_FOUND")
	})
	t.Run("abort live request after its first token ends it CANCELLED", func(t *testing.T) {
		f.gate <- struct{}{} // one token
		first, err := st.Recv()
		if err != nil || first.GetToken() == nil {
			t.Fatalf("first %v, %v", first, err)
		}
		resp, err := h.ctl.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_RequestId{RequestId: "live"}})
		if err != nil || resp.GetStatus() != pb.AbortStatus_ABORT_STATUS_ABORTED {
			t.Fatalf("abort %v, %v", resp, err)
		}
		var rest []*pb.GenerateResponse
		for {
			r, err := st.Recv()
			if err != nil {
				if status.Code(err) != codes.OK && err.Error() != "EOF" {
					t.Fatalf("status %v", err)
				}
				break
			}
			rest = append(rest, r)
		}
		if len(rest) != 1 || rest[0].GetFinished().GetReason() != pb.FinishReason_FINISH_REASON_CANCELLED || rest[0].GetUsage() == nil {
			t.Fatalf("after abort: %v", rest)
		}
	})
	t.Run("abort finished request is ALREADY_FINISHED, twice", func(t *testing.T) {
		for range 2 {
			resp, err := h.ctl.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_RequestId{RequestId: "live"}})
			if err != nil || resp.GetStatus() != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
				t.Fatalf("abort %v, %v", resp, err)
			}
		}
	})
	t.Run("abort before any token is an EngineError CANCELLED", func(t *testing.T) {
		st, err := h.inf.Generate(ctx, with(prompt("a"), func(r *pb.GenerateRequest) { r.RequestId = "early" }))
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "request live", func() bool { return f.liveCount() == 1 })
		if _, err := h.ctl.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_RequestId{RequestId: "early"}}); err != nil {
			t.Fatal(err)
		}
		r, err := st.Recv()
		if err != nil || r.GetError().GetCode() != pb.ErrorCode_ERROR_CODE_CANCELLED {
			t.Fatalf("got %v, %v", r, err)
		}
		if _, err := st.Recv(); err == nil {
			t.Fatal("event after EngineError")
		}
	})
	t.Run("abort all_requests", func(t *testing.T) {
		for _, id := range []string{"x1", "x2"} {
			if _, err := h.inf.Generate(ctx, with(prompt("a"), func(r *pb.GenerateRequest) { r.RequestId = id })); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, "two live", func() bool { return f.liveCount() == 2 })
		resp, err := h.ctl.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_AllRequests{AllRequests: &pb.AllRequests{}}})
		if err != nil || resp.GetStatus() != pb.AbortStatus_ABORT_STATUS_ABORTED {
			t.Fatalf("abort all %v, %v", resp, err)
		}
		eventually(t, "none live", func() bool { return f.liveCount() == 0 })
	})
	t.Run("client cancel stops the engine request", func(t *testing.T) {
		before := f.cancelCount()
		cctx, cancel := context.WithCancel(ctx)
		st, err := h.inf.Generate(cctx, with(prompt("a"), func(r *pb.GenerateRequest) { r.RequestId = "gone" }))
		if err != nil {
			t.Fatal(err)
		}
		_ = st
		eventually(t, "request live", func() bool { return f.liveCount() == 1 })
		cancel()
		eventually(t, "engine request cancelled", func() bool { return f.cancelCount() == before+1 && f.liveCount() == 0 })
	})
	t.Run("deadline stops the engine request", func(t *testing.T) {
		before := f.cancelCount()
		dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := h.generate(dctx, prompt("a"))
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("status %v", err)
		}
		eventually(t, "engine request cancelled", func() bool { return f.cancelCount() == before+1 })
	})
}
