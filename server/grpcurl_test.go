package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// grpcurlPath finds grpcurl on PATH or in GOPATH/bin. CI installs it
// (go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.3); with
// OENGINE_REQUIRE_GRPCURL=1 a missing binary fails instead of skipping.
func grpcurlPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "grpcurl")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("OENGINE_REQUIRE_GRPCURL") == "1" {
		t.Fatal("grpcurl not found and OENGINE_REQUIRE_GRPCURL=1")
	}
	t.Skip("grpcurl not installed")
	return ""
}

// TestGrpcurl drives the server the way a user would: grpcurl with no
// .proto files, through server reflection.
func TestGrpcurl(t *testing.T) {
	bin := grpcurlPath(t)
	h := startServer(t, testConfig(), Model{Backend: newFake(t, "m")})
	run := func(t *testing.T, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		all := append([]string{"-plaintext"}, args...)
		out, err := exec.CommandContext(ctx, bin, all...).CombinedOutput()
		return string(out), err
	}
	cases := []struct {
		name    string
		args    []string
		wantErr bool
		want    []string
	}{
		{"list services", []string{h.s.GRPCAddr(), "list"}, false,
			[]string{"openengine.v1.Inference", "openengine.v1.Control", "grpc.health.v1.Health"}},
		{"describe Generate", []string{h.s.GRPCAddr(), "describe", "openengine.v1.Inference.Generate"}, false,
			[]string{"stream .openengine.v1.GenerateResponse"}},
		{"server info", []string{"-d", "{}", h.s.GRPCAddr(), "openengine.v1.Control/GetServerInfo"}, false,
			[]string{`"schemaRelease": "4def7c50b05e0674a0c3b26917399155535966e4"`, `"engineRole": "ENGINE_ROLE_AGGREGATED"`}},
		{"generate", []string{"-d", `{"request_id":"g1","prompt":"hi","stopping":{"max_tokens":2}}`,
			h.s.GRPCAddr(), "openengine.v1.Inference/Generate"}, false,
			[]string{`"text": "t10 "`, `"reason": "FINISH_REASON_LENGTH"`, `"completionTokens": 2`}},
		{"generate with metadata", []string{"-H", "openengine-priority: 5", "-d", `{"prompt":"hi"}`,
			h.s.GRPCAddr(), "openengine.v1.Inference/Generate"}, false, []string{`"usage"`}},
		{"invalid request is a status", []string{"-d", `{}`, h.s.GRPCAddr(), "openengine.v1.Inference/Generate"}, true,
			[]string{"InvalidArgument", "INVALID_ARGUMENT"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, tc.args...)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v; output:\n%s", err, tc.wantErr, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Fatalf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
