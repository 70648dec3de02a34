package server

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"oengine/engine"
	"oengine/loader"
	"oengine/model/gguf"
	"oengine/model/tokenizer"
	pb "oengine/proto/openengine/v1"
	"oengine/sessions"
	"oengine/streaming"
)

// extClock is a settable clock for lease tests.
type extClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *extClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *extClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// extHarness is a real server (the tiny llama reference model on the real
// engine) with sessions and streaming input enabled, and a gRPC client
// over TCP.
type extHarness struct {
	t     *testing.T
	s     *Server
	eng   *engine.Engine
	tok   *tokenizer.Tokenizer
	clock *extClock
	conn  *grpc.ClientConn
	inf   pb.InferenceClient
	ctl   pb.ControlClient
	sess  pb.OpenEngineSessionsClient
	strm  pb.OpenEngineStreamingClient
	owner string
	done  chan error
	once  sync.Once
	// closeEngine closes the engine and the model (idempotent).
	closeEngine func()
}

const extModel = "tiny"

// tinyEngine loads tiny-llama-f16 on the real engine (greedy by default,
// so outputs are deterministic).
func tinyEngine(t *testing.T) (*engine.Engine, *tokenizer.Tokenizer, func()) {
	t.Helper()
	f, err := gguf.Open(filepath.Join(testdataDir(t), "models", "tiny-llama-f16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	lm, err := loader.Load(f, withTestDevice(loader.Options{Name: extModel, Threads: 2, Engine: engine.Config{
		PageSize: 16, KVPages: 256, MaxRunning: 8, GreedyDefault: true, Logger: quietLogger(),
	}}))
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	checkTestDevice(t, lm)
	var once sync.Once
	closeAll := func() {
		once.Do(func() {
			lm.Close()
			f.Close()
		})
	}
	t.Cleanup(closeAll)
	return lm.Engine, lm.Tokenizer, closeAll
}

func startExt(t *testing.T, mutate func(*ExtensionConfig)) *extHarness {
	t.Helper()
	e, tok, closeEngine := tinyEngine(t)
	h := &extHarness{t: t, eng: e, tok: tok, closeEngine: closeEngine, clock: &extClock{now: time.Unix(1_800_000_000, 0)}, done: make(chan error, 1)}
	cfg := testConfig()
	cfg.HTTPAddr = ""
	s, err := New(cfg, NewModel(e, tok))
	if err != nil {
		t.Fatal(err)
	}
	xc := ExtensionConfig{
		Sessions:  sessions.Config{Clock: h.clock, ReapInterval: time.Hour},
		Streaming: streaming.Limits{IdleTimeout: 5 * time.Second},
	}
	if mutate != nil {
		mutate(&xc)
	}
	if _, err := s.EnableSessions(xc); err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	h.s, h.owner = s, s.InstanceID()
	go func() { h.done <- s.Serve(context.Background()) }()
	conn, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	h.conn = conn
	h.inf, h.ctl = pb.NewInferenceClient(conn), pb.NewControlClient(conn)
	h.sess, h.strm = pb.NewOpenEngineSessionsClient(conn), pb.NewOpenEngineStreamingClient(conn)
	t.Cleanup(h.stop)
	return h
}

// stop shuts the server down and checks the page ledger: no pins, no
// pages held by a sequence, integrity.
func (h *extHarness) stop() { h.once.Do(h.stopOnce) }

func (h *extHarness) stopOnce() {
	h.conn.Close()
	_ = h.s.Shutdown(time.Second)
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		h.t.Error("Serve did not return")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.eng.WaitIdle(ctx); err != nil {
		h.t.Errorf("engine not idle: %v", err)
	}
	// The manager closes right after shutdown.
	eventually(h.t, "pins released", func() bool { return h.eng.Cache().Stats().Pinned == 0 })
	if st := h.eng.Cache().Stats(); st.InUse != 0 || st.PinOwners != 0 {
		h.t.Errorf("pages held after shutdown: %+v", st)
	}
	if err := h.eng.Cache().CheckIntegrity(); err != nil {
		h.t.Error(err)
	}
}

func (h *extHarness) ref(id string) *pb.GenerationSessionRef {
	return &pb.GenerationSessionRef{SessionId: id, OwnerInstanceId: h.owner}
}

func (h *extHarness) open(ctx context.Context, id, prompt string) *pb.GenerationSession {
	h.t.Helper()
	req := &pb.OpenGenerationSessionRequest{SessionId: id, Model: extModel}
	if prompt != "" {
		req.InitialInput = &pb.OpenGenerationSessionRequest_Prompt{Prompt: prompt}
	}
	gs, err := h.sess.OpenGenerationSession(ctx, req)
	if err != nil {
		h.t.Fatalf("open %q: %v", id, err)
	}
	return gs
}

func (h *extHarness) get(ctx context.Context, id string) *pb.GenerationSession {
	h.t.Helper()
	gs, err := h.sess.GetGenerationSession(ctx, &pb.GetGenerationSessionRequest{Ref: h.ref(id), IncludeTokens: true})
	if err != nil {
		h.t.Fatalf("get %q: %v", id, err)
	}
	return gs
}

// cont builds a continuation request.
func (h *extHarness) cont(id string, mode pb.ContinuationMode, prompt string, maxTokens uint32) *pb.GenerateRequest {
	req := &pb.GenerateRequest{
		Model:    extModel,
		Session:  &pb.GenerationSessionContinuation{Ref: h.ref(id), Mode: mode},
		Stopping: &pb.StoppingOptions{MaxTokens: ptr(maxTokens), IgnoreEos: ptr(true)},
	}
	if prompt != "" {
		req.Input = &pb.GenerateRequest_Prompt{Prompt: prompt}
	}
	return req
}

// generate runs a Generate to its end (see harness.generate).
func (h *extHarness) generate(ctx context.Context, req *pb.GenerateRequest) ([]*pb.GenerateResponse, error) {
	st, err := h.inf.Generate(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []*pb.GenerateResponse
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

// outputIDs returns the generated token ids of output 0.
func outputIDs(rs []*pb.GenerateResponse) []uint32 {
	var ids []uint32
	for _, r := range rs {
		if tok := r.GetToken(); tok != nil && tok.GetOutputIndex() == 0 {
			for _, ti := range tok.GetTokens() {
				ids = append(ids, ti.GetTokenId())
			}
		}
	}
	return ids
}

func finalUsage(t *testing.T, rs []*pb.GenerateResponse) *pb.Usage {
	t.Helper()
	if len(rs) == 0 || rs[len(rs)-1].GetUsage() == nil {
		t.Fatalf("no final usage in %d responses", len(rs))
	}
	return rs[len(rs)-1].GetUsage()
}

// terminalError returns the EngineError of the last response, or nil.
func terminalError(rs []*pb.GenerateResponse) *pb.EngineError {
	if len(rs) == 0 {
		return nil
	}
	return rs[len(rs)-1].GetError()
}

func (h *extHarness) encode(text string, bos bool) []uint32 {
	ids := h.tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: bos, ParseSpecial: true})
	out := make([]uint32, len(ids))
	for i, id := range ids {
		out[i] = uint32(id)
	}
	return out
}

// Frames of GenerateStream.
func startFrame(req *pb.GenerateRequest) *pb.GenerateStreamRequest {
	return &pb.GenerateStreamRequest{Frame: &pb.GenerateStreamRequest_Start{Start: &pb.StreamStart{Request: req}}}
}

func textFrame(seq uint64, s string) *pb.GenerateStreamRequest {
	return &pb.GenerateStreamRequest{Frame: &pb.GenerateStreamRequest_Chunk{Chunk: &pb.InputChunk{Seq: seq, Data: &pb.InputChunk_Text{Text: s}}}}
}

func idsFrame(seq uint64, ids ...uint32) *pb.GenerateStreamRequest {
	return &pb.GenerateStreamRequest{Frame: &pb.GenerateStreamRequest_Chunk{Chunk: &pb.InputChunk{Seq: seq, Data: &pb.InputChunk_TokenIds{TokenIds: &pb.TokenIds{Ids: ids}}}}}
}

func endFrame(final ...uint64) *pb.GenerateStreamRequest {
	e := &pb.EndOfInput{}
	if len(final) > 0 {
		e.FinalSeq = &final[0]
	}
	return &pb.GenerateStreamRequest{Frame: &pb.GenerateStreamRequest_EndOfInput{EndOfInput: e}}
}

// stream sends frames in order (gap between them), half-closes when
// asked, and reads every response until the end of the RPC.
func (h *extHarness) stream(ctx context.Context, frames []*pb.GenerateStreamRequest, gap time.Duration, halfClose bool) ([]*pb.GenerateResponse, error) {
	st, err := h.strm.GenerateStream(ctx)
	if err != nil {
		return nil, err
	}
	go func() {
		for i, f := range frames {
			if i > 0 && gap > 0 {
				time.Sleep(gap)
			}
			if st.Send(f) != nil {
				return
			}
		}
		if halfClose {
			_ = st.CloseSend()
		}
	}()
	var out []*pb.GenerateResponse
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

func plainReq(maxTokens uint32) *pb.GenerateRequest {
	return &pb.GenerateRequest{Model: extModel, Stopping: &pb.StoppingOptions{MaxTokens: ptr(maxTokens), IgnoreEos: ptr(true)}}
}

func splitWords(s string) []string {
	var out []string
	for _, w := range strings.SplitAfter(s, " ") {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}
