package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	pb "oengine/proto/openengine/v1"
)

// GRPC drives an OpenEngine v1 server: Inference.Generate, and for the
// session and streaming-input scenarios OpenEngineSessions and
// OpenEngineStreaming on the same connection.
type GRPC struct {
	Model string // model name sent with every request ("" = server default)

	modelOnce sync.Once
	model     string // Model, or the server's first model when Model is ""

	conn *grpc.ClientConn
	inf  pb.InferenceClient
	ctl  pb.ControlClient
	ses  pb.OpenEngineSessionsClient
	str  pb.OpenEngineStreamingClient
}

// DialGRPC connects (without TLS) to addr, host:port.
func DialGRPC(addr, model string) (*GRPC, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("bench: dial %s: %w", addr, err)
	}
	return &GRPC{Model: model, conn: conn, inf: pb.NewInferenceClient(conn), ctl: pb.NewControlClient(conn),
		ses: pb.NewOpenEngineSessionsClient(conn), str: pb.NewOpenEngineStreamingClient(conn)}, nil
}

func (g *GRPC) Name() string { return "grpc" }

// AcceptsTokenIDs: GenerateRequest.token_ids.
func (g *GRPC) AcceptsTokenIDs() bool { return true }

// AcceptsGuided: GenerateRequest.guided.json_schema.
func (g *GRPC) AcceptsGuided() bool { return true }

// modelName is the model to name where the server requires one (sessions):
// Model, else the first model the server lists.
func (g *GRPC) modelName(ctx context.Context) string {
	g.modelOnce.Do(func() {
		g.model = g.Model
		if g.model != "" {
			return
		}
		if si, err := g.ServerInfo(ctx); err == nil && len(si.GetSupportedModels()) > 0 {
			g.model = si.GetSupportedModels()[0]
		}
	})
	return g.model
}

func (g *GRPC) Close() error { return g.conn.Close() }

// ServerInfo returns the server's engine name, version and instance id.
func (g *GRPC) ServerInfo(ctx context.Context) (*pb.ServerInfo, error) {
	return g.ctl.GetServerInfo(ctx, &pb.GetServerInfoRequest{})
}

// request builds the GenerateRequest of req.
func (g *GRPC) request(req Request) *pb.GenerateRequest {
	gr := &pb.GenerateRequest{
		Model:    g.Model,
		Sampling: &pb.SamplingParams{Temperature: proto.Float64(req.Temp)},
		Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(uint32(req.MaxTokens)), IgnoreEos: proto.Bool(req.IgnoreEOS)},
	}
	setInput(gr, req.Prompt, req.TokenIDs)
	if req.GuidedJSONSchema != "" {
		gr.Guided = &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_JsonSchema{JsonSchema: req.GuidedJSONSchema}}
	}
	return gr
}

// setInput sets gr's input: ids when not nil, else text.
func setInput(gr *pb.GenerateRequest, text string, ids []uint32) {
	if ids != nil {
		gr.Input = &pb.GenerateRequest_TokenIds{TokenIds: &pb.TokenIds{Ids: ids}}
		return
	}
	gr.Input = &pb.GenerateRequest_Prompt{Prompt: text}
}

// Generate sends one Inference.Generate call.
func (g *GRPC) Generate(ctx context.Context, req Request) Result {
	return g.generate(ctx, req, g.request(req), nil)
}

// output collects what a request generated, for conversations that resend
// it: the text, and the token ids.
type output struct {
	text strings.Builder
	ids  []uint32
}

// generate runs gr and reads its events; out, when not nil, receives the
// output.
func (g *GRPC) generate(ctx context.Context, req Request, gr *pb.GenerateRequest, out *output) Result {
	ctx, m := startMeter(ctx, req)
	st, err := g.inf.Generate(ctx, gr)
	if err != nil {
		m.fail(err)
		return m.done()
	}
	m.fail(readEvents(m, st.Recv, out))
	return m.done()
}

// readEvents reads GenerateResponse events until the stream ends, feeding
// the meter. The final usage sets the token counts (the server's count is
// the one reported).
func readEvents(m *meter, recv func() (*pb.GenerateResponse, error), out *output) error {
	// The usage comes on the last event, possibly with the last tokens: it
	// is applied after them.
	var usage *pb.Usage
	defer func() {
		if usage != nil {
			m.usage(int(usage.GetPromptTokens()), int(usage.GetCompletionTokens()), int(usage.GetCachedPromptTokens()))
		}
	}()
	for {
		ev, err := recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if u := ev.GetUsage(); u != nil {
			usage = u
		}
		switch e := ev.GetEvent().(type) {
		case *pb.GenerateResponse_Token:
			m.tokens(len(e.Token.GetTokens()))
			if out != nil {
				out.text.WriteString(e.Token.GetText())
				for _, t := range e.Token.GetTokens() {
					out.ids = append(out.ids, t.GetTokenId())
				}
			}
		case *pb.GenerateResponse_Error:
			code := strings.TrimPrefix(e.Error.GetCode().String(), "ERROR_CODE_")
			return &KindError{Kind: code, Msg: "engine error " + code + ": " + e.Error.GetMessage()}
		}
	}
}

// Describe returns what the server says of itself: engine name and
// version, instance id and model, for a run's JSON file.
func (g *GRPC) Describe(ctx context.Context) map[string]any {
	out := map[string]any{}
	model := g.Model
	if si, err := g.ServerInfo(ctx); err == nil {
		out["engine"], out["engine_version"], out["instance_id"] = si.GetEngineName(), si.GetEngineVersion(), si.GetInstanceId()
		if model == "" && len(si.GetSupportedModels()) > 0 {
			model = si.GetSupportedModels()[0]
		}
	}
	if mi, err := g.ctl.GetModelInfo(ctx, &pb.GetModelInfoRequest{Model: model}); err == nil {
		out["model"], out["model_id"] = mi.GetServedModelName(), mi.GetModelId()
		out["max_context_length"] = mi.GetMaxContextLength()
	}
	return out
}

// ContextLength is the model's max_context_length from ModelInfo (0 when
// the server does not say).
func (g *GRPC) ContextLength(ctx context.Context) (int, error) {
	mi, err := g.ctl.GetModelInfo(ctx, &pb.GetModelInfoRequest{Model: g.modelName(ctx)})
	if err != nil {
		return 0, fmt.Errorf("bench: GetModelInfo: %w", err)
	}
	return int(mi.GetMaxContextLength()), nil
}

// vocabProbe is the prompt whose second token's prompt logprobs list the
// vocabulary.
const vocabProbe = "The quick brown fox"

// FetchVocab asks the server for its vocabulary through the protocol's
// only way to read token texts: one short Generate call with prompt
// logprobs over all candidates, which lists every token id with its
// detokenized text (docs/bench.md: input methods). It fails when the
// server does not support all-candidate prompt logprobs.
func (g *GRPC) FetchVocab(ctx context.Context) (*Vocab, error) {
	gr := &pb.GenerateRequest{
		Model:    g.Model,
		Input:    &pb.GenerateRequest_Prompt{Prompt: vocabProbe},
		Sampling: &pb.SamplingParams{Temperature: proto.Float64(0)},
		Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(1)},
		Response: &pb.ResponseOptions{ReturnPromptLogprobs: proto.Bool(true),
			PromptCandidates: &pb.CandidateTokenSelection{Selection: &pb.CandidateTokenSelection_All{All: &pb.AllCandidates{}}}},
	}
	st, err := g.inf.Generate(ctx, gr, grpc.MaxCallRecvMsgSize(256<<20))
	if err != nil {
		return nil, fmt.Errorf("bench: vocabulary from the server: %w", err)
	}
	var texts []string
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("bench: vocabulary from the server: %w", err)
		}
		if e := ev.GetError(); e != nil {
			return nil, fmt.Errorf("bench: vocabulary from the server: %s: %s", e.GetCode(), e.GetMessage())
		}
		for _, ti := range ev.GetPrompt().GetTokens() {
			if len(ti.GetCandidates()) <= len(texts) {
				continue
			}
			texts = make([]string, 0, len(ti.GetCandidates()))
			for _, c := range ti.GetCandidates() {
				id := int(c.GetTokenId())
				for len(texts) <= id {
					texts = append(texts, "")
				}
				texts[id] = c.GetToken()
			}
		}
	}
	if len(texts) == 0 {
		return nil, errors.New("bench: vocabulary from the server: the answer lists no prompt candidates")
	}
	return vocabFromTexts(texts, "server")
}
