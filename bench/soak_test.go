package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"oengine/engine"
	pb "oengine/proto/openengine/v1"
)

func soakServer(t *testing.T, consumerTimeout time.Duration) *testServer {
	return startServerCfg(t, false, func(c *engine.Config) { c.ConsumerTimeout = consumerTimeout })
}

// TestSoakShort runs a few seconds of soak against the in-process server
// with a short consumer timeout: every check passes, the stalled readers
// were cancelled by the server (its consumer-timeout counter agrees) and
// the cancels ended at the client.
func TestSoakShort(t *testing.T) {
	ts := soakServer(t, 300*time.Millisecond)
	cfg := SoakConfig{Duration: 3 * time.Second, Concurrency: 4, CancelFraction: 0.2, StallFraction: 0.15,
		StallFor: time.Second, StallOutput: 200, Workload: fixedWorkload(8, 16), MetricsURL: ts.httpBase + "/metrics",
		SampleEvery: 200 * time.Millisecond, RSSTolerance: 0.5, GoroutineSlack: 8, Settle: 10 * time.Second, Seed: 7}
	rep, err := RunSoak(testCtx(t), ts.grpcAddr, "", cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	WriteSoak(&sb, rep)
	t.Log("\n" + sb.String())
	if !rep.Passed {
		t.Fatalf("soak failed:\n%s", sb.String())
	}
	if rep.Violations != 0 || rep.Accepted != rep.Requests || rep.Normal == 0 {
		t.Errorf("violations %d, accepted %d of %d, normal %d", rep.Violations, rep.Accepted, rep.Requests, rep.Normal)
	}
	if rep.Stalls == 0 || rep.StallsEnforced != rep.Stalls {
		t.Errorf("stalls %d, enforced %d", rep.Stalls, rep.StallsEnforced)
	}
	if got := figure(rep.Server, "oengine:consumer_timeouts_total"); got != fmt.Sprint(rep.Stalls) {
		t.Errorf("server consumer timeouts %s, client saw %d stalled readers", got, rep.Stalls)
	}
	if rep.Cancels == 0 || rep.Ends["cancel:client-cancel"] == 0 {
		t.Errorf("cancels %d, ends %v", rep.Cancels, rep.Ends)
	}
	if rep.Ends["normal:FINISH_REASON_LENGTH"] != rep.Normal {
		t.Errorf("ends %v: every normal request should finish by length (%d)", rep.Ends, rep.Normal)
	}
	if rep.UsedKVBlocks != 0 || rep.PagesInUseAfter != 0 || rep.PagesPinnedAfter != 0 {
		t.Errorf("pages after: used %d in_use %v pinned %v", rep.UsedKVBlocks, rep.PagesInUseAfter, rep.PagesPinnedAfter)
	}
	if len(rep.Samples) < 5 || rep.RSSReference <= 0 || rep.RSSAfter <= 0 || rep.GoroutinesBefore <= 0 {
		t.Errorf("%d samples, rss ref %v after %v, goroutines before %v", len(rep.Samples), rep.RSSReference, rep.RSSAfter, rep.GoroutinesBefore)
	}
	if c := rep.Config.RSSAt; c != cfg.Duration/2 {
		t.Errorf("RSS reference at %v, want half the duration", c)
	}
}

// TestSoakStallShorterThanTimeout: a stall shorter than the server's
// consumer timeout is not enforced, and the soak fails that check.
func TestSoakStallShorterThanTimeout(t *testing.T) {
	ts := soakServer(t, 5*time.Second)
	cfg := SoakConfig{Duration: time.Second, Concurrency: 2, StallFraction: 1, StallFor: 200 * time.Millisecond,
		StallOutput: 100, Workload: fixedWorkload(4, 8), MetricsURL: ts.httpBase + "/metrics",
		SampleEvery: 200 * time.Millisecond, RSSTolerance: 1, GoroutineSlack: 8, Settle: 5 * time.Second}
	rep, err := RunSoak(testCtx(t), ts.grpcAddr, "", cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed || rep.Stalls == 0 || rep.StallsEnforced != 0 || rep.Violations != 0 {
		t.Fatalf("passed %v, stalls %d enforced %d violations %d; want a failed stall check only", rep.Passed, rep.Stalls, rep.StallsEnforced, rep.Violations)
	}
	for _, c := range rep.Checks {
		if c.OK == (c.Name == "stalled readers cancelled by the server") {
			t.Errorf("check %q ok=%v: %s", c.Name, c.OK, c.Detail)
		}
	}
}

// scripted is a Generate stream that plays back events, then an end.
type scripted struct {
	grpc.ClientStream
	evs []*pb.GenerateResponse
	end error // nil: io.EOF
}

func (s *scripted) Recv() (*pb.GenerateResponse, error) {
	if len(s.evs) == 0 {
		if s.end != nil {
			return nil, s.end
		}
		return nil, io.EOF
	}
	ev := s.evs[0]
	s.evs = s.evs[1:]
	return ev, nil
}

type scriptedInf struct {
	pb.InferenceClient
	st *scripted
}

func (f scriptedInf) Generate(context.Context, *pb.GenerateRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[pb.GenerateResponse], error) {
	return f.st, nil
}

// TestSoakCallRules checks the per-request rule of exactly one terminal
// event on scripted streams.
func TestSoakCallRules(t *testing.T) {
	tok := &pb.GenerateResponse{Event: &pb.GenerateResponse_Token{Token: &pb.TokenOutput{Tokens: []*pb.TokenInfo{{TokenId: 1}}}}}
	fin := &pb.GenerateResponse{Event: &pb.GenerateResponse_Finished{Finished: &pb.GenerationFinished{Reason: pb.FinishReason_FINISH_REASON_LENGTH}},
		Usage: &pb.Usage{CompletionTokens: 1}}
	eerr := &pb.GenerateResponse{Event: &pb.GenerateResponse_Error{Error: &pb.EngineError{Code: pb.ErrorCode_ERROR_CODE_CANCELLED}}}
	for _, c := range []struct {
		name      string
		evs       []*pb.GenerateResponse
		end       error
		violation bool
		rejected  bool
		label     string
	}{
		{name: "finished", evs: []*pb.GenerateResponse{tok, fin}, label: "normal:FINISH_REASON_LENGTH"},
		{name: "engine error", evs: []*pb.GenerateResponse{eerr}, label: "normal:error:ERROR_CODE_CANCELLED"},
		{name: "no terminal", evs: []*pb.GenerateResponse{tok}, violation: true, label: "normal:no-terminal"},
		{name: "two terminals", evs: []*pb.GenerateResponse{tok, fin, eerr}, violation: true},
		{name: "event after terminal", evs: []*pb.GenerateResponse{fin, tok}, violation: true},
		{name: "status after tokens", evs: []*pb.GenerateResponse{tok}, end: status.Error(codes.Internal, "x"), violation: true, label: "normal:status-Internal"},
		{name: "rejected", end: status.Error(codes.ResourceExhausted, "full"), rejected: true, label: "normal:rejected"},
		{name: "unavailable after events", evs: []*pb.GenerateResponse{tok}, end: status.Error(codes.Unavailable, "gone"), violation: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			inf := scriptedInf{st: &scripted{evs: c.evs, end: c.end}}
			e := soakCall(context.Background(), inf, &pb.GenerateRequest{}, soakNormal, 0, 0, rand.New(rand.NewPCG(1, 2)))
			if (e.violation != "") != c.violation || (e.rejected != "") != c.rejected {
				t.Errorf("violation %q rejected %q; want violation %v rejected %v", e.violation, e.rejected, c.violation, c.rejected)
			}
			if c.label != "" && e.end != c.label {
				t.Errorf("end %q, want %q", e.end, c.label)
			}
		})
	}
}
