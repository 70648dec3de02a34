package server

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	pb "oengine/proto/openengine/v1"
)

func TestControlDiscovery(t *testing.T) {
	f, fast := newFake(t, "main"), newFake(t, "fast")
	f.lim.Device, fast.lim.Device = "cuda:0 Test GPU", "cpu"
	cfg := testConfig()
	cfg.EngineVersion = "1.2.3"
	h := startServer(t, cfg, Model{Backend: f, Aliases: []string{"main-alias"}}, Model{Backend: fast})
	ctx := ctxT(t)

	t.Run("server info schema identity", func(t *testing.T) {
		si, err := h.ctl.GetServerInfo(ctx, &pb.GetServerInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if si.GetSchemaRevision() != 1 || si.GetMinimumClientRevision() != 1 ||
			si.GetSchemaRelease() != "4def7c50b05e0674a0c3b26917399155535966e4" {
			t.Fatalf("schema %d %d %q", si.GetSchemaRevision(), si.GetMinimumClientRevision(), si.GetSchemaRelease())
		}
		if si.GetEngineRole() != pb.EngineRole_ENGINE_ROLE_AGGREGATED || si.GetEngineName() != "oengine" || si.GetEngineVersion() != "1.2.3" {
			t.Fatalf("identity %v", si)
		}
		if si.GetInstanceId() == "" || si.GetInstanceId() != h.s.InstanceID() {
			t.Fatalf("instance id %q", si.GetInstanceId())
		}
		if got := strings.Join(si.GetSupportedModels(), ","); got != "main,fast" {
			t.Fatalf("supported models %q", got)
		}
	})
	t.Run("server info capacity is the configured figures", func(t *testing.T) {
		si, err := h.ctl.GetServerInfo(ctx, &pb.GetServerInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		c := si.GetCapacity()
		if c.KvBlockSize == nil || c.GetKvBlockSize() != 4 || c.GetTotalKvBlocks() != 64 || c.GetMaxRunningRequests() != 8 ||
			c.GetMaxBatchedTokens() != 256 || c.MaxLoras == nil || c.GetMaxLoras() != 0 {
			t.Fatalf("capacity %v", c)
		}
		if si.GetKvConnector().Enabled == nil || si.GetKvConnector().GetEnabled() {
			t.Fatalf("kv connector %v", si.GetKvConnector())
		}
		if d := si.GetExtra().GetFields()["device"].GetStringValue(); d != "cuda:0 Test GPU" {
			t.Fatalf("server info device %q", d)
		}
	})
	t.Run("model info names the device", func(t *testing.T) {
		for name, want := range map[string]string{"main": "cuda:0 Test GPU", "fast": "cpu"} {
			mi, err := h.ctl.GetModelInfo(ctx, &pb.GetModelInfoRequest{Model: name})
			if err != nil {
				t.Fatal(err)
			}
			if d := mi.GetExtra().GetFields()["device"].GetStringValue(); d != want {
				t.Fatalf("%s: device %q, want %q", name, d, want)
			}
		}
	})
	t.Run("instance id differs per process", func(t *testing.T) {
		other, err := New(testConfig(), Model{Backend: newFake(t, "x")})
		if err != nil {
			t.Fatal(err)
		}
		if other.InstanceID() == h.s.InstanceID() {
			t.Fatal("two servers share an instance id")
		}
	})
	t.Run("model info requires a model", func(t *testing.T) {
		_, err := h.ctl.GetModelInfo(ctx, &pb.GetModelInfoRequest{})
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("model info unknown model", func(t *testing.T) {
		_, err := h.ctl.GetModelInfo(ctx, &pb.GetModelInfoRequest{Model: "nope"})
		wantStatus(t, err, codes.NotFound, "MODEL_NOT_FOUND")
	})
	t.Run("model info by alias", func(t *testing.T) {
		mi, err := h.ctl.GetModelInfo(ctx, &pb.GetModelInfoRequest{Model: "main-alias"})
		if err != nil {
			t.Fatal(err)
		}
		if mi.GetServedModelName() != "main" || len(mi.GetServedModelAliases()) != 1 {
			t.Fatalf("names %v", mi)
		}
	})
	t.Run("model info limits and capabilities", func(t *testing.T) {
		mi, err := h.ctl.GetModelInfo(ctx, &pb.GetModelInfoRequest{Model: "fast"})
		if err != nil {
			t.Fatal(err)
		}
		if mi.GetMaxContextLength() != 512 || mi.GetMaxOutputTokens() != 511 || !mi.GetSupportsTextInput() || !mi.GetSupportsTokenIdsInput() {
			t.Fatalf("limits %v", mi)
		}
		g := mi.GetGeneration()
		if !g.GetSupportsPriority() || !g.GetPromptLogprobs().GetSupported() || g.GetOutputLogprobs().GetMaxTopN() != 5 ||
			g.GetGuidedDecoding() == nil || g.GetGuidedDecoding().Supported == nil || g.GetGuidedDecoding().GetSupported() {
			t.Fatalf("generation capabilities %v", g)
		}
		if mi.SupportsLora == nil || mi.GetSupportsLora() || mi.SupportsMultimodal == nil || mi.GetSupportsMultimodal() {
			t.Fatalf("lora/multimodal %v", mi)
		}
		if mi.GetSessions().Supported == nil || mi.GetStreamingInput().Supported == nil {
			t.Fatalf("extension capabilities unreported: %v", mi)
		}
	})
	t.Run("load sums live figures", func(t *testing.T) {
		li, err := h.ctl.GetLoad(ctx, &pb.GetLoadRequest{IncludePerRank: true})
		if err != nil {
			t.Fatal(err)
		}
		if li.GetInstanceId() != h.s.InstanceID() || li.RunningRequests == nil || li.GetQueuedRequests() != 2 ||
			li.GetTotalKvBlocks() != 128 || li.GetRunningTokens() != 80 || li.TimestampUnixNanos == nil {
			t.Fatalf("load %v", li)
		}
		if len(li.GetRanks()) != 1 || li.GetRanks()[0].DataParallelRank == nil {
			t.Fatalf("ranks %v", li.GetRanks())
		}
	})
	t.Run("load without per rank", func(t *testing.T) {
		li, err := h.ctl.GetLoad(ctx, &pb.GetLoadRequest{})
		if err != nil || len(li.GetRanks()) != 0 {
			t.Fatalf("load %v, %v", li, err)
		}
	})
	t.Run("control calls validate metadata too", func(t *testing.T) {
		mctx := metadata.AppendToOutgoingContext(ctx, mdPriority, "x")
		_, err := h.ctl.GetServerInfo(mctx, &pb.GetServerInfoRequest{})
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("unknown openengine metadata key is ignored", func(t *testing.T) {
		mctx := metadata.AppendToOutgoingContext(ctx, "openengine-future", "1", mdRoutingKey, "r")
		if _, err := h.ctl.GetServerInfo(mctx, &pb.GetServerInfoRequest{}); err != nil {
			t.Fatal(err)
		}
	})
	for _, rpc := range []struct {
		name string
		call func(context.Context) error
	}{
		{"LoadLora", func(ctx context.Context) error {
			_, err := h.ctl.LoadLora(ctx, &pb.LoadLoraRequest{Adapter: &pb.LoraAdapter{LoraId: 1, LoraName: "a", SourcePath: "/a"}})
			return err
		}},
		{"UnloadLora", func(ctx context.Context) error {
			_, err := h.ctl.UnloadLora(ctx, &pb.UnloadLoraRequest{LoraName: "a"})
			return err
		}},
		{"ListLoras", func(ctx context.Context) error {
			_, err := h.ctl.ListLoras(ctx, &pb.ListLorasRequest{})
			return err
		}},
	} {
		t.Run("lora disabled: "+rpc.name, func(t *testing.T) {
			wantStatus(t, rpc.call(ctx), codes.FailedPrecondition, "UNSUPPORTED_FEATURE")
		})
	}
}

func TestHealth(t *testing.T) {
	f := newFake(t, "m")
	cfg := testConfig()
	cfg.ModelDegraded = "fast model failed to load"
	h := startServer(t, cfg, Model{Backend: f})
	ctx := ctxT(t)
	check := func(r *pb.HealthResponse, name string) *pb.HealthCheck {
		for _, c := range r.GetChecks() {
			if c.GetName() == name {
				return c
			}
		}
		return nil
	}
	t.Run("cheap answer has the named checks and no probe", func(t *testing.T) {
		r, err := h.ctl.Health(ctx, &pb.HealthRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"grpc", "scheduler", "model", "kv_connector", "role"} {
			if check(r, n) == nil {
				t.Fatalf("check %s missing", n)
			}
		}
		if check(r, "inference_probe") != nil {
			t.Fatal("probe ran without include_inference_probe")
		}
		if r.GetState() != pb.HealthState_HEALTH_STATE_DEGRADED || check(r, "model").GetState() != pb.HealthState_HEALTH_STATE_DEGRADED {
			t.Fatalf("state %v", r)
		}
	})
	t.Run("inference probe runs one real generation", func(t *testing.T) {
		before := len(f.requests())
		r, err := h.ctl.Health(ctx, &pb.HealthRequest{IncludeInferenceProbe: true})
		if err != nil {
			t.Fatal(err)
		}
		if c := check(r, "inference_probe"); c.GetState() != pb.HealthState_HEALTH_STATE_READY {
			t.Fatalf("probe %v", c)
		}
		reqs := f.requests()
		if len(reqs) != before+1 || reqs[len(reqs)-1].MaxTokens != 1 {
			t.Fatalf("probe requests %v", reqs[before:])
		}
	})
	t.Run("role mismatch is not ready", func(t *testing.T) {
		r, err := h.ctl.Health(ctx, &pb.HealthRequest{Role: pb.EngineRole_ENGINE_ROLE_PREFILL})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetState() != pb.HealthState_HEALTH_STATE_NOT_READY || check(r, "role").GetState() != pb.HealthState_HEALTH_STATE_NOT_READY {
			t.Fatalf("state %v", r)
		}
	})
	t.Run("unknown model", func(t *testing.T) {
		_, err := h.ctl.Health(ctx, &pb.HealthRequest{Model: "nope"})
		wantStatus(t, err, codes.NotFound, "MODEL_NOT_FOUND")
	})
	t.Run("failing probe is not ready", func(t *testing.T) {
		f.Drain() // the fake refuses new work, the server does not know
		defer func() { f.mu.Lock(); f.draining = false; f.mu.Unlock() }()
		r, err := h.ctl.Health(ctx, &pb.HealthRequest{IncludeInferenceProbe: true})
		if err != nil {
			t.Fatal(err)
		}
		if c := check(r, "inference_probe"); c.GetState() != pb.HealthState_HEALTH_STATE_NOT_READY || r.GetState() != pb.HealthState_HEALTH_STATE_NOT_READY {
			t.Fatalf("probe %v", r)
		}
	})
}

func TestAdvertisedHost(t *testing.T) {
	cases := []struct {
		name, addr, advertise string
		wantHost              string
	}{
		{"explicit advertise host", "0.0.0.0:50051", "gw.example", "gw.example"},
		{"loopback listener", "127.0.0.1:50051", "", "127.0.0.1"},
		{"wildcard listener uses the hostname", "0.0.0.0:50051", "", ""},
		{"empty host uses the hostname", ":50051", "", ""},
		{"ipv6 wildcard uses the hostname", "[::]:50051", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{cfg: Config{GRPCAddr: tc.addr, AdvertiseHost: tc.advertise}}
			host, port := s.advertised()
			if port != 50051 {
				t.Fatalf("port %d", port)
			}
			if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
				t.Fatalf("host %q is a wildcard", host)
			}
			if tc.wantHost != "" && host != tc.wantHost {
				t.Fatalf("host %q, want %q", host, tc.wantHost)
			}
		})
	}
}
