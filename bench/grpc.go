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
	return &pb.GenerateRequest{
		Model:    g.Model,
		Input:    &pb.GenerateRequest_Prompt{Prompt: req.Prompt},
		Sampling: &pb.SamplingParams{Temperature: proto.Float64(req.Temp)},
		Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(uint32(req.MaxTokens)), IgnoreEos: proto.Bool(req.IgnoreEOS)},
	}
}

// Generate sends one Inference.Generate call.
func (g *GRPC) Generate(ctx context.Context, req Request) Result {
	return g.generate(ctx, req, g.request(req), nil)
}

// generate runs gr and reads its events; text, when not nil, receives the
// output text.
func (g *GRPC) generate(ctx context.Context, req Request, gr *pb.GenerateRequest, text *strings.Builder) Result {
	ctx, m := startMeter(ctx, req)
	st, err := g.inf.Generate(ctx, gr)
	if err != nil {
		m.fail(err)
		return m.done()
	}
	m.fail(readEvents(m, st.Recv, text))
	return m.done()
}

// readEvents reads GenerateResponse events until the stream ends, feeding
// the meter.
func readEvents(m *meter, recv func() (*pb.GenerateResponse, error), text *strings.Builder) error {
	for {
		ev, err := recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if u := ev.GetUsage(); u != nil {
			m.res.PromptTokens = int(u.GetPromptTokens())
			m.res.CachedTokens = int(u.GetCachedPromptTokens())
		}
		switch e := ev.GetEvent().(type) {
		case *pb.GenerateResponse_Token:
			m.tokens(len(e.Token.GetTokens()))
			if text != nil {
				text.WriteString(e.Token.GetText())
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
