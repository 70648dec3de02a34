package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "oengine/proto/openengine/v1"
)

// harness is a server on 127.0.0.1:0 (gRPC and HTTP) with a real gRPC
// client connected over TCP.
type harness struct {
	s      *Server
	conn   *grpc.ClientConn
	inf    pb.InferenceClient
	ctl    pb.ControlClient
	http   string // base URL
	served chan error
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.DrainGrace = 2 * time.Second
	cfg.Logger = quietLogger()
	return cfg
}

func startServer(t testing.TB, cfg Config, models ...Model) *harness {
	t.Helper()
	s, err := New(cfg, models...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	h := &harness{s: s, served: make(chan error, 1), http: "http://" + s.HTTPAddr()}
	go func() { h.served <- s.Serve(context.Background()) }()
	conn, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	h.conn = conn
	h.inf = pb.NewInferenceClient(conn)
	h.ctl = pb.NewControlClient(conn)
	t.Cleanup(func() {
		conn.Close()
		_ = s.Shutdown(time.Second)
		select {
		case err := <-h.served:
			if err != nil {
				t.Errorf("Serve returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after Shutdown")
		}
	})
	return h
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// generate runs one Generate call to its end and returns every response
// and the final status error (nil for OK).
func (h *harness) generate(ctx context.Context, req *pb.GenerateRequest, md ...string) ([]*pb.GenerateResponse, error) {
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
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

// wantStatus checks a non-OK status with an oengine ErrorInfo reason.
func wantStatus(t *testing.T, err error, code codes.Code, reason string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || err == nil {
		t.Fatalf("want status %v/%s, got %v", code, reason, err)
	}
	if st.Code() != code {
		t.Fatalf("code %v, want %v (%s)", st.Code(), code, st.Message())
	}
	if reason == "" {
		return
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if info.GetDomain() != ErrorDomain || info.GetReason() != reason {
				t.Fatalf("ErrorInfo %s/%s, want %s/%s", info.GetDomain(), info.GetReason(), ErrorDomain, reason)
			}
			return
		}
	}
	t.Fatalf("no ErrorInfo detail in %v", st)
}

func textOf(rs []*pb.GenerateResponse, output uint32) string {
	var b strings.Builder
	for _, r := range rs {
		if tok := r.GetToken(); tok != nil && tok.GetOutputIndex() == output {
			b.WriteString(tok.GetText())
		}
	}
	return b.String()
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// eventually polls cond every 5 ms for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
