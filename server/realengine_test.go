package server

import (
	"context"
	"encoding/json"
	"math"
	"oengine/internal/refdata"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"oengine/engine"
	"oengine/loader"
	"oengine/model/gguf"
	pb "oengine/proto/openengine/v1"
)

// refCase is one prompt of a llama.cpp reference file (shared/testdata).
type refCase struct {
	Prompt     string        `json:"prompt"`
	Tokens     []uint32      `json:"tokens"`
	PromptTopK [][][]float64 `json:"prompt_topk"` // [position][rank][token, logit, logprob]
	Greedy     []uint32      `json:"greedy"`
}

// testdataDir finds ../shared/testdata beside the repository root.
func testdataDir(t *testing.T) string {
	t.Helper()
	return refdata.Dir(t)
}

// realEngine serves the tiny llama reference model through the real engine.
func realEngine(t *testing.T, metrics *Metrics) (*engine.Engine, []refCase) {
	t.Helper()
	models := filepath.Join(testdataDir(t), "models")
	f, err := gguf.Open(filepath.Join(models, "tiny-llama-f16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	lm, err := loader.Load(f, withTestDevice(loader.Options{Name: "tiny-llama", Threads: 2, Engine: engine.Config{
		PageSize: 16, KVPages: 96, MaxRunning: 8,
		Hooks: metrics.EngineHooks("tiny-llama"), Logger: quietLogger(),
	}}))
	if err != nil {
		t.Fatal(err)
	}
	checkTestDevice(t, lm)
	e := lm.Engine
	t.Cleanup(lm.Close)
	raw, err := os.ReadFile(filepath.Join(models, "tiny-llama-f16.ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases []refCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	return e, ref.Cases
}

// TestConformanceRealEngine runs the contract over TCP against the real
// engine on the tiny reference model, then checks that nothing leaked.
func TestConformanceRealEngine(t *testing.T) {
	baseline := runtime.NumGoroutine()
	metrics := NewMetrics()
	e, cases := realEngine(t, metrics)
	cfg := testConfig()
	cfg.Metrics = metrics
	h := startServer(t, cfg, NewModel(e, nil))
	ref := cases[0]
	greedy := func(r *pb.GenerateRequest, maxTokens uint32) *pb.GenerateRequest {
		r.Sampling = &pb.SamplingParams{Temperature: proto.Float64(0)}
		r.Stopping = &pb.StoppingOptions{MaxTokens: proto.Uint32(maxTokens), IgnoreEos: proto.Bool(true)}
		return r
	}
	outIDs := func(rs []*pb.GenerateResponse, output uint32) []uint32 {
		var ids []uint32
		for _, r := range rs {
			if tok := r.GetToken(); tok != nil && tok.GetOutputIndex() == output {
				for _, ti := range tok.GetTokens() {
					ids = append(ids, ti.GetTokenId())
				}
			}
		}
		return ids
	}

	t.Run("greedy token_ids reproduce the llama.cpp continuation", func(t *testing.T) {
		ctx := ctxT(t)
		rs, err := h.generate(ctx, greedy(tokens(ref.Tokens...), 5))
		if err != nil {
			t.Fatal(err)
		}
		checkStream(t, rs, 1)
		if got := outIDs(rs, 0); !slices.Equal(got, ref.Greedy[:5]) {
			t.Fatalf("greedy %v, want %v", got, ref.Greedy[:5])
		}
		u := rs[len(rs)-1].GetUsage()
		if u.GetPromptTokens() != uint32(len(ref.Tokens)) || u.GetCompletionTokens() != 5 {
			t.Fatalf("usage %v", u)
		}
		if fin := rs[len(rs)-1].GetFinished(); fin.GetReason() != pb.FinishReason_FINISH_REASON_LENGTH {
			t.Fatalf("finish %v", fin)
		}
	})
	t.Run("text prompt is tokenized with BOS like llama.cpp", func(t *testing.T) {
		ctx := ctxT(t)
		rs, err := h.generate(ctx, greedy(prompt(ref.Prompt), 2))
		if err != nil {
			t.Fatal(err)
		}
		if got := rs[len(rs)-1].GetUsage().GetPromptTokens(); got != uint32(len(ref.Tokens)) {
			t.Fatalf("prompt tokens %d, want %d", got, len(ref.Tokens))
		}
		if textOf(rs, 0) == "" {
			t.Fatal("no text")
		}
	})
	t.Run("second identical prompt reuses the prefix cache", func(t *testing.T) {
		ctx := ctxT(t)
		long := cases[len(cases)-1].Tokens[:40]
		if _, err := h.generate(ctx, greedy(tokens(long...), 1)); err != nil {
			t.Fatal(err)
		}
		rs, err := h.generate(ctx, greedy(tokens(long...), 1))
		if err != nil {
			t.Fatal(err)
		}
		u := rs[len(rs)-1].GetUsage()
		if u.GetCachedPromptTokens() == 0 || u.GetCachedPromptTokens() > u.GetPromptTokens() {
			t.Fatalf("usage %v", u)
		}
		// bypass_prefix_cache skips reuse.
		rs, err = h.generate(ctx, with(greedy(tokens(long...), 1), func(r *pb.GenerateRequest) {
			r.Kv = &pb.KvOptions{BypassPrefixCache: proto.Bool(true)}
		}))
		if err != nil {
			t.Fatal(err)
		}
		if u := rs[len(rs)-1].GetUsage(); u.GetCachedPromptTokens() != 0 {
			t.Fatalf("bypass usage %v", u)
		}
	})
	t.Run("prompt logprobs match llama.cpp", func(t *testing.T) {
		ctx := ctxT(t)
		rs, err := h.generate(ctx, with(greedy(tokens(ref.Tokens...), 1), func(r *pb.GenerateRequest) {
			r.Response = &pb.ResponseOptions{ReturnPromptLogprobs: proto.Bool(true),
				PromptCandidates: &pb.CandidateTokenSelection{Selection: &pb.CandidateTokenSelection_TopN{TopN: 3}}}
		}))
		if err != nil {
			t.Fatal(err)
		}
		po := rs[0].GetPrompt()
		if po == nil || len(po.GetTokens()) != len(ref.Tokens) {
			t.Fatalf("prompt output %v", rs[0])
		}
		if first := po.GetTokens()[0]; first.Logprob != nil || first.Rank != nil || len(first.GetCandidates()) != 0 {
			t.Fatalf("first prompt token %v", first)
		}
		compared := 0
		for i := 1; i < len(ref.Tokens); i++ {
			ti := po.GetTokens()[i]
			if len(ti.GetCandidates()) != 3 || ti.Logprob == nil {
				t.Fatalf("position %d: %v", i, ti)
			}
			// Candidates are the top 3: each that llama.cpp also lists
			// (with a logprob >= -8) must agree within 0.1.
			for _, c := range ti.GetCandidates() {
				for _, e := range ref.PromptTopK[i-1] {
					if uint32(e[0]) == c.GetTokenId() && e[2] >= -8 {
						compared++
						if d := math.Abs(c.GetLogprob() - e[2]); d > 0.1 {
							t.Fatalf("position %d token %d: logprob %.4f, llama.cpp %.4f", i, c.GetTokenId(), c.GetLogprob(), e[2])
						}
					}
				}
			}
		}
		if compared == 0 {
			t.Fatal("no prompt position comparable with the reference")
		}
	})
	t.Run("stop token id ends with STOP and its match", func(t *testing.T) {
		ctx := ctxT(t)
		stop := ref.Greedy[6] // the first token after a run of another one
		rs, err := h.generate(ctx, with(greedy(tokens(ref.Tokens...), 12), func(r *pb.GenerateRequest) {
			r.Stopping.Conditions = []*pb.StopCondition{{Condition: &pb.StopCondition_StopTokenId{StopTokenId: stop}}}
		}))
		if err != nil {
			t.Fatal(err)
		}
		fin := rs[len(rs)-1].GetFinished()
		if fin.GetReason() != pb.FinishReason_FINISH_REASON_STOP || fin.GetStopMatch().GetStopTokenId() != stop {
			t.Fatalf("finish %v", fin)
		}
	})
	t.Run("num_sequences with a seed", func(t *testing.T) {
		ctx := ctxT(t)
		rs, err := h.generate(ctx, with(prompt("Hello"), func(r *pb.GenerateRequest) {
			r.Sampling = &pb.SamplingParams{NumSequences: proto.Uint32(2), Seed: proto.Uint64(7)}
			r.Stopping = &pb.StoppingOptions{MaxTokens: proto.Uint32(4), IgnoreEos: proto.Bool(true)}
		}))
		if err != nil {
			t.Fatal(err)
		}
		checkStream(t, rs, 2)
		if u := rs[len(rs)-1].GetUsage(); u.GetCompletionTokens() != 8 {
			t.Fatalf("usage %v", u)
		}
	})
	t.Run("context length exceeded before acceptance", func(t *testing.T) {
		ctx := ctxT(t)
		_, err := h.generate(ctx, greedy(tokens(ref.Tokens...), 100000))
		wantStatus(t, err, codes.InvalidArgument, "CONTEXT_LENGTH_EXCEEDED")
	})
	t.Run("sampling parameter out of range", func(t *testing.T) {
		ctx := ctxT(t)
		_, err := h.generate(ctx, with(prompt("a"), func(r *pb.GenerateRequest) {
			r.Sampling = &pb.SamplingParams{TopP: proto.Float64(1.5)}
		}))
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("abort mid-generation", func(t *testing.T) {
		ctx := ctxT(t)
		st, err := h.inf.Generate(ctx, with(greedy(tokens(ref.Tokens...), 400), func(r *pb.GenerateRequest) { r.RequestId = "long" }))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		_, err = h.generate(ctx, with(prompt("a"), func(r *pb.GenerateRequest) { r.RequestId = "long" }))
		wantStatus(t, err, codes.AlreadyExists, "DUPLICATE_REQUEST")
		resp, err := h.ctl.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_RequestId{RequestId: "long"}})
		if err != nil || resp.GetStatus() != pb.AbortStatus_ABORT_STATUS_ABORTED {
			t.Fatalf("abort %v %v", resp, err)
		}
		var last *pb.GenerateResponse
		for {
			r, err := st.Recv()
			if err != nil {
				break
			}
			last = r
		}
		if last.GetFinished().GetReason() != pb.FinishReason_FINISH_REASON_CANCELLED || last.GetUsage() == nil {
			t.Fatalf("last %v", last)
		}
		resp, err = h.ctl.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_RequestId{RequestId: "long"}})
		if err != nil || resp.GetStatus() != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
			t.Fatalf("second abort %v %v", resp, err)
		}
	})
	t.Run("client cancel frees the sequence", func(t *testing.T) {
		ctx := ctxT(t)
		cctx, cancel := context.WithCancel(ctx)
		st, err := h.inf.Generate(cctx, greedy(tokens(ref.Tokens...), 400))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		cancel()
		eventually(t, "no running request", func() bool { l := e.Load(); return l.Running == 0 && l.Waiting == 0 })
	})
	t.Run("health with inference probe", func(t *testing.T) {
		ctx := ctxT(t)
		r, err := h.ctl.Health(ctx, &pb.HealthRequest{IncludeInferenceProbe: true})
		if err != nil || r.GetState() != pb.HealthState_HEALTH_STATE_READY {
			t.Fatalf("health %v, %v", r, err)
		}
	})
	t.Run("kv events follow generation", func(t *testing.T) {
		ctx := ctxT(t)
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st, err := h.ctl.SubscribeKvEvents(sctx, &pb.SubscribeKvEventsRequest{IncludeSnapshot: true})
		if err != nil {
			t.Fatal(err)
		}
		snap, err := st.Recv()
		if err != nil || snap.GetBatch() == nil {
			t.Fatalf("snapshot %v, %v", snap, err)
		}
		fresh := cases[2].Tokens
		if _, err := h.generate(ctx, greedy(tokens(fresh...), 1)); err != nil {
			t.Fatal(err)
		}
		for {
			r, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if r.GetBatch().GetSequenceNumber() <= snap.GetBatch().GetSequenceNumber() {
				t.Fatalf("sequence %d not after the snapshot's %d", r.GetBatch().GetSequenceNumber(), snap.GetBatch().GetSequenceNumber())
			}
			if bs := r.GetBatch().GetEvents()[0].GetBlockStored(); bs != nil && len(bs.GetTokenIds()) >= 16 &&
				slices.Equal(bs.GetTokenIds()[:16], fresh[:16]) && bs.GetBlockSize() == 16 {
				return
			}
		}
	})
	t.Run("server info capacity is the engine's", func(t *testing.T) {
		ctx := ctxT(t)
		si, err := h.ctl.GetServerInfo(ctx, &pb.GetServerInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if si.GetCapacity().GetTotalKvBlocks() != 96 || si.GetCapacity().GetKvBlockSize() != 16 || si.GetCapacity().GetMaxRunningRequests() != 8 {
			t.Fatalf("capacity %v", si.GetCapacity())
		}
		li, err := h.ctl.GetLoad(ctx, &pb.GetLoadRequest{})
		if err != nil || li.GetTotalKvBlocks() != 96 {
			t.Fatalf("load %v, %v", li, err)
		}
	})

	t.Run("leak check: pages free or cached, ledger sound, goroutines back", func(t *testing.T) {
		eventually(t, "engine idle", func() bool { l := e.Load(); return l.Running == 0 && l.Waiting == 0 })
		eventually(t, "pages released", func() bool { st := e.Cache().Stats(); return st.InUse == 0 && st.Pinned == 0 })
		if err := e.Cache().CheckIntegrity(); err != nil {
			t.Fatal(err)
		}
		h.conn.Close()
		if err := h.s.Shutdown(time.Second); err != nil {
			t.Fatal(err)
		}
		// The engine's loop and the model's worker pool stay until cleanup.
		eventually(t, "goroutines back to baseline", func() bool {
			return runtime.NumGoroutine() <= baseline+8
		})
	})
}
