package server

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"oengine/engine"
	pb "oengine/proto/openengine/v1"
)

func TestHTTPAndMetrics(t *testing.T) {
	f := newFake(t, "m")
	f.lim.Device = "cuda:0 Test GPU"
	h := startServer(t, testConfig(), Model{Backend: f})
	if _, err := h.generate(ctxT(t), prompt("a b")); err != nil {
		t.Fatal(err)
	}
	_, _ = h.generate(ctxT(t), prompt("a"), mdPriority, "bad")

	t.Run("healthz", func(t *testing.T) {
		code, body := httpGet(t, h.http+"/healthz")
		if code != http.StatusOK || !strings.Contains(body, h.s.InstanceID()) {
			t.Fatalf("%d %s", code, body)
		}
	})
	t.Run("readyz", func(t *testing.T) {
		for _, path := range []string{"/readyz", "/health"} {
			code, body := httpGet(t, h.http+path)
			if code != http.StatusOK || !strings.Contains(body, `"status":"ready"`) {
				t.Fatalf("%s: %d %s", path, code, body)
			}
		}
	})
	t.Run("metrics", func(t *testing.T) {
		code, body := httpGet(t, h.http+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		for _, want := range []string{
			`oengine:num_requests_running{model_name="m"} 0`,
			`oengine:num_requests_waiting{model_name="m"} 1`,
			`oengine:kv_cache_usage_perc{model_name="m"} 0`,
			`oengine:kv_pages{model_name="m",state="free"} 64`,
			`oengine:prefix_cache_queries_total{model_name="m"} 3`,
			`oengine:prefix_cache_hits_total{model_name="m"} 1`,
			`oengine:prompt_tokens_total{model_name="m"} 7`,
			`oengine:generation_tokens_total{model_name="m"} 5`,
			`oengine:num_preemptions_total{model_name="m"} 2`,
			`oengine:model_info{device="cuda:0 Test GPU",model_name="m"} 1`,
			`oengine:request_pauses_total{model_name="m"} 4`,
			`oengine:consumer_timeouts_total{model_name="m"} 3`,
			`oengine:time_to_first_token_seconds_count{model_name="m",route="grpc"} 1`,
			`oengine:inter_token_latency_seconds_count{model_name="m",route="grpc"} 2`,
			`oengine:e2e_request_latency_seconds_count{model_name="m",route="grpc"} 1`,
			`oengine:request_success_total{finished_reason="length",model_name="m",route="grpc"} 1`,
			`oengine:request_rejected_total{reason="INVALID_ARGUMENT"} 1`,
			`go_goroutines`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
	})
	t.Run("engine hooks feed queue time", func(t *testing.T) {
		hooks := h.s.metrics.EngineHooks("m")
		hooks.OnRequestDone(engineStats(30 * time.Millisecond))
		_, body := httpGet(t, h.http+"/metrics")
		if !strings.Contains(body, `oengine:request_queue_time_seconds_count{model_name="m"} 1`) {
			t.Fatal("queue time not observed")
		}
	})
	t.Run("grpc health and reflection", func(t *testing.T) {
		ctx := ctxT(t)
		hr, err := healthpb.NewHealthClient(h.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "openengine.v1.Inference"})
		if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %v, %v", hr, err)
		}
		rc, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
			t.Fatal(err)
		}
		resp, err := rc.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range resp.GetListServicesResponse().GetService() {
			names = append(names, s.GetName())
		}
		for _, want := range []string{"openengine.v1.Inference", "openengine.v1.Control", "grpc.health.v1.Health"} {
			if !slices.Contains(names, want) {
				t.Fatalf("reflection lists %v, missing %s", names, want)
			}
		}
		_ = rc.CloseSend()
	})
}

func TestDrain(t *testing.T) {
	t.Run("running requests finish, new ones get DRAINING", func(t *testing.T) {
		f := newFake(t, "m")
		f.gate = make(chan struct{})
		h := startServer(t, testConfig(), Model{Backend: f})
		ctx := ctxT(t)
		st, err := h.inf.Generate(ctx, prompt("a"))
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "request live", func() bool { return f.liveCount() == 1 })
		kv, err := h.ctl.SubscribeKvEvents(ctx, &pb.SubscribeKvEventsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "subscribed", func() bool { return f.cache.Stats().Subscribed == 1 })

		shut := make(chan error, 1)
		go func() { shut <- h.s.Shutdown(10 * time.Second) }()
		eventually(t, "draining", h.s.Draining)

		_, err = h.generate(ctx, prompt("b"))
		wantStatus(t, err, codes.Unavailable, "DRAINING")
		hr, err := h.ctl.Health(ctx, &pb.HealthRequest{})
		if err != nil || hr.GetState() != pb.HealthState_HEALTH_STATE_DRAINING {
			t.Fatalf("health %v, %v", hr, err)
		}
		for _, path := range []string{"/readyz", "/health"} {
			if code, _ := httpGet(t, h.http+path); code != http.StatusServiceUnavailable {
				t.Fatalf("%s %d while draining", path, code)
			}
		}
		gh, err := healthpb.NewHealthClient(h.conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil || gh.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("grpc health %v, %v", gh, err)
		}

		for range fakeDefaultMax {
			f.gate <- struct{}{}
		}
		var last *pb.GenerateResponse
		for {
			r, err := st.Recv()
			if err != nil {
				if err.Error() != "EOF" {
					t.Fatalf("running request ended with %v", err)
				}
				break
			}
			last = r
		}
		if last.GetFinished().GetReason() != pb.FinishReason_FINISH_REASON_LENGTH {
			t.Fatalf("running request ended with %v", last)
		}
		rs, err := recvAll(t, kv)
		if err != nil || len(rs) != 1 || rs[0].GetError().GetCode() != pb.ErrorCode_ERROR_CODE_DRAINING {
			t.Fatalf("kv stream at shutdown: %v, %v", rs, err)
		}
		select {
		case <-shut:
		case <-time.After(10 * time.Second):
			t.Fatal("Shutdown did not return")
		}
	})
	t.Run("after the grace period the rest is cancelled", func(t *testing.T) {
		f := newFake(t, "m")
		f.gate = make(chan struct{})
		h := startServer(t, testConfig(), Model{Backend: f})
		st, err := h.inf.Generate(ctxT(t), prompt("a"))
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "request live", func() bool { return f.liveCount() == 1 })
		start := time.Now()
		if err := h.s.Shutdown(50 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) > 8*time.Second {
			t.Fatalf("shutdown took %v", time.Since(start))
		}
		r, err := st.Recv()
		if err != nil || r.GetError().GetCode() != pb.ErrorCode_ERROR_CODE_CANCELLED {
			t.Fatalf("got %v, %v", r, err)
		}
		if f.liveCount() != 0 {
			t.Fatal("engine request still live")
		}
	})
	t.Run("serve returns nil when its context ends", func(t *testing.T) {
		s, err := New(testConfig(), Model{Backend: newFake(t, "m")})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx) }()
		eventually(t, "listening", func() bool { return s.GRPCAddr() != "" })
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return")
		}
		if !s.Draining() {
			t.Fatal("not draining after shutdown")
		}
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	f := newFake(t, "m")
	cases := []struct {
		name   string
		cfg    func(*Config)
		models []Model
	}{
		{"no backend", func(*Config) {}, nil},
		{"no grpc address", func(c *Config) { c.GRPCAddr = "" }, []Model{{Backend: f}}},
		{"duplicate model names", func(*Config) {}, []Model{{Backend: f}, {Backend: newFake(t, "m")}}},
		{"alias collides", func(*Config) {}, []Model{{Backend: f, Aliases: []string{"other"}}, {Backend: newFake(t, "other")}}},
		{"negative grace", func(c *Config) { c.DrainGrace = -1 }, []Model{{Backend: f}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			tc.cfg(&cfg)
			if _, err := New(cfg, tc.models...); err == nil {
				t.Fatal("New accepted a bad configuration")
			}
		})
	}
}

func engineStats(queue time.Duration) engine.RequestStats {
	return engine.RequestStats{ID: "x", Queue: queue}
}

func TestShutdownBeforeServeClosesListeners(t *testing.T) {
	s, err := New(testConfig(), Model{Backend: newFake(t, "m")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	addr := s.GRPCAddr()
	if err := s.Shutdown(time.Second); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("gRPC listener still accepts after Shutdown")
	}
	if err := s.Listen(); err == nil {
		t.Fatal("Listen after Shutdown succeeded")
	}
}
