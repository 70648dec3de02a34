package server

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"oengine/engine"
	pb "oengine/proto/openengine/v1"
)

// TestPromptLogprobsBounded is issue 17 point 4: prompt logprobs over all
// candidates are bounded before acceptance, and what is accepted arrives
// in PromptOutput parts that each fit a client's default 4 MiB receive
// limit (before the fix one 300-token request built a 403 MB message).
func TestPromptLogprobsBounded(t *testing.T) {
	e, _ := realEngine(t, NewMetrics())
	h := startServer(t, testConfig(), NewModel(e, nil))
	all := &pb.CandidateTokenSelection{Selection: &pb.CandidateTokenSelection_All{All: &pb.AllCandidates{}}}
	req := func(positions int) *pb.GenerateRequest {
		ids := make([]uint32, positions+1)
		for i := range ids {
			ids[i] = uint32(100 + i)
		}
		return &pb.GenerateRequest{
			Input:    &pb.GenerateRequest_TokenIds{TokenIds: &pb.TokenIds{Ids: ids}},
			Sampling: &pb.SamplingParams{Temperature: proto.Float64(0)},
			Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(2)},
			Response: &pb.ResponseOptions{ReturnPromptLogprobs: proto.Bool(true), PromptCandidates: all},
		}
	}
	// 300 positions × 32001 entries: far over the bound.
	_, err := h.generate(ctxT(t), req(300))
	wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")

	// 24 positions × 32001 = 768k entries: accepted, several parts.
	rs, err := h.generate(ctxT(t), req(24))
	if err != nil {
		t.Fatalf("a bounded request failed (a message over the client's 4 MiB limit?): %v", err)
	}
	parts, positions, tokenSeen := 0, 0, false
	for _, r := range rs {
		if p := r.GetPrompt(); p != nil {
			if tokenSeen {
				t.Fatal("a PromptOutput part after a token")
			}
			if n := proto.Size(r); n > MaxPromptOutputBytes+64<<10 {
				t.Fatalf("PromptOutput part of %d bytes", n)
			}
			parts++
			positions += len(p.GetTokens())
		}
		if r.GetToken() != nil {
			tokenSeen = true
		}
	}
	if parts < 2 || positions != 25 {
		t.Fatalf("%d parts with %d positions, want ≥ 2 parts and 25 positions", parts, positions)
	}
	// Output candidates: the whole vocabulary per token is within the
	// per-token bound of this 32000-token model.
	r := req(2)
	r.Response = &pb.ResponseOptions{ReturnOutputLogprobs: proto.Bool(true), OutputCandidates: all}
	if _, err := h.generate(ctxT(t), r); err != nil {
		t.Fatal(err)
	}
}

// TestStopStringLimits is issue 17 point 6: stop strings are bounded in
// count and length (before the fix any number of any length was taken).
func TestStopStringLimits(t *testing.T) {
	h := startServer(t, testConfig(), Model{Backend: newFake(t, "m")})
	stops := func(n, size int) *pb.GenerateRequest {
		return with(prompt("hi"), func(r *pb.GenerateRequest) {
			r.Stopping = &pb.StoppingOptions{}
			for i := 0; i < n; i++ {
				r.Stopping.Conditions = append(r.Stopping.Conditions,
					&pb.StopCondition{Condition: &pb.StopCondition_StopText{StopText: strings.Repeat("s", size-1) + string(rune('a'+i%26))}})
			}
		})
	}
	for name, r := range map[string]*pb.GenerateRequest{"33 strings": stops(33, 4), "257 bytes": stops(1, 257)} {
		t.Run(name, func(t *testing.T) {
			_, err := h.generate(ctxT(t), r)
			wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
		})
	}
	if _, err := h.generate(ctxT(t), stops(32, 256)); err != nil {
		t.Fatalf("32 stop strings of 256 bytes refused: %v", err)
	}
}

// TestSpeculativeExtra: ModelInfo.extra.speculative describes the drafter
// when speculation is on and is absent otherwise.
func TestSpeculativeExtra(t *testing.T) {
	if _, ok := limitsExtra(engine.Limits{}).GetFields()["speculative"]; ok {
		t.Fatal("speculative advertised while off")
	}
	sp := limitsExtra(engine.Limits{Speculation: "draft_model", SpecTokens: 5, DraftModel: "tiny"}).GetFields()["speculative"].GetStructValue().GetFields()
	if sp["mode"].GetStringValue() != "draft_model" || sp["draft_tokens"].GetNumberValue() != 5 || sp["draft_model"].GetStringValue() != "tiny" || sp["adaptive"].GetBoolValue() {
		t.Fatalf("speculative extra %v", sp)
	}
}

// TestEmbeddingsExtra: ModelInfo.extra.embeddings gives the vector width
// and default pooling of a model that serves embeddings (and says
// "encoder" for one that serves nothing else, "rerank" for one with a
// classification head), and is absent otherwise.
func TestEmbeddingsExtra(t *testing.T) {
	if _, ok := limitsExtra(engine.Limits{}).GetFields()["embeddings"]; ok {
		t.Fatal("embeddings advertised by a model without hidden states")
	}
	em := limitsExtra(engine.Limits{EmbeddingDim: 256, Pooling: engine.PoolingLast}).GetFields()["embeddings"].GetStructValue().GetFields()
	_, enc := em["encoder"]
	if _, rr := em["rerank"]; em["dimensions"].GetNumberValue() != 256 || em["pooling"].GetStringValue() != "last" || enc || rr {
		t.Fatalf("embeddings extra %v", em)
	}
	em = limitsExtra(engine.Limits{EmbeddingDim: 384, Pooling: engine.PoolingCLS, EmbeddingsOnly: true}).GetFields()["embeddings"].GetStructValue().GetFields()
	if !em["encoder"].GetBoolValue() || em["pooling"].GetStringValue() != "cls" {
		t.Fatalf("an encoder's embeddings extra %v", em)
	}
	em = limitsExtra(engine.Limits{EmbeddingDim: 1024, Pooling: engine.PoolingLast, RankOutputs: 1}).GetFields()["embeddings"].GetStructValue().GetFields()
	if _, enc := em["encoder"]; !em["rerank"].GetBoolValue() || enc {
		t.Fatalf("a causal reranker's embeddings extra %v", em)
	}
}
