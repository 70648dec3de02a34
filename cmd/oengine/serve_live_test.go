package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "oengine/proto/openengine/v1"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeForRouters runs `oengine serve` in this process with the flags
// of docs/deploy.md ("Dynamo", "llm-d") on the tiny reference model and a
// --fast-model, and reads it the way Dynamo's sidecar and llm-d do: one
// supported model whose model_id opens as the GGUF file, a consumable ZMQ
// KV event source next to the gRPC one, vLLM-named metrics. It ends the
// server with SIGTERM, as an orchestrator would.
func TestServeForRouters(t *testing.T) {
	models := filepath.Join("..", "..", "..", "shared", "testdata", "models")
	modelFile := filepath.Join(models, "tiny-llama-f16.gguf")
	if _, err := os.Stat(modelFile); err != nil {
		t.Skipf("shared testdata missing: %v", err)
	}
	// Our own registration keeps SIGHUP/SIGTERM from ending the test
	// process; serve's handler receives them as well.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM)
	defer signal.Stop(sigs)

	outR, outW := io.Pipe()
	var logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runServe([]string{modelFile, "--served-model-name", "tiny", "--mmap",
			"--fast-model", filepath.Join(models, "tiny-llama-q4_0.gguf"),
			"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--advertise-host", "127.0.0.1",
			"--kv-pages", "64", "--metrics-compat", "vllm", "--kv-events-zmq", "tcp://*:0", "--kv-events-zmq-public"}, outW, &logs)
		outW.Close()
	}()
	var grpcAddr, httpAddr string
	lines := bufio.NewScanner(outR)
	addr := regexp.MustCompile(`^\s+(gRPC|HTTP)\s+(\S+)`)
	for lines.Scan() && (grpcAddr == "" || httpAddr == "") {
		if m := addr.FindStringSubmatch(lines.Text()); m != nil {
			if m[1] == "gRPC" {
				grpcAddr = m[2]
			} else {
				httpAddr = m[2]
			}
		}
	}
	go io.Copy(io.Discard, outR)
	if grpcAddr == "" || httpAddr == "" {
		t.Fatalf("serve did not start: %v\n%s", <-done, logs.String())
	}
	// Wait for serve's signal handler: a SIGHUP (reload) is logged by it.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "reloaded keys") {
		if time.Now().After(deadline) {
			t.Fatalf("serve's signal handler never answered SIGHUP:\n%s", logs.String())
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGHUP)
		time.Sleep(50 * time.Millisecond)
	}

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctl := pb.NewControlClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	si, err := ctl.GetServerInfo(ctx, &pb.GetServerInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(si.GetSupportedModels(), ",") != "tiny" {
		t.Fatalf("supported_models %q with a --fast-model: want only the primary", si.GetSupportedModels())
	}
	mi, err := ctl.GetModelInfo(ctx, &pb.GetModelInfoRequest{Model: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	got, err1 := os.Stat(mi.GetModelId())
	want, err2 := os.Stat(modelFile)
	if err1 != nil || err2 != nil || !os.SameFile(got, want) || !filepath.IsAbs(mi.GetModelId()) {
		t.Fatalf("model_id %q is not the model file's absolute path (%v, %v)", mi.GetModelId(), err1, err2)
	}
	srcs, err := ctl.GetKvEventSources(ctx, &pb.GetKvEventSourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var zmq *pb.KvEventSource
	for _, s := range srcs.GetSources() {
		if s.GetTransport() == "zmq" {
			zmq = s
		}
	}
	_, httpPort, _ := net.SplitHostPort(httpAddr)
	if zmq == nil || zmq.GetEncoding() != "msgpack" || zmq.GetEndpointAddr().GetHost() != "127.0.0.1" ||
		zmq.GetEndpointAddr().GetPort() == 0 || zmq.DataParallelRank == nil || zmq.GetTopic() != "kv@127.0.0.1:"+httpPort+"@tiny" {
		t.Fatalf("zmq source %v among %v", zmq, srcs.GetSources())
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(zmq.GetEndpointAddr().GetPort()))), 5*time.Second)
	if err != nil {
		t.Fatalf("zmq endpoint not connectable: %v", err)
	}
	c.Close()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `vllm:num_requests_waiting{model_name="tiny"} 0`) ||
		!strings.Contains(string(body), `vllm:cache_config_info{block_size="16",enable_prefix_caching="True",model_name="tiny",num_cpu_blocks="0",num_gpu_blocks="64"} 1`) {
		t.Fatalf("/metrics lacks the vLLM series:\n%s", body)
	}

	_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
}
