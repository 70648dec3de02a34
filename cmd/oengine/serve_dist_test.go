package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestModelID: --model-id wins; else the GGUF file's absolute path (what
// a router's tokenizer loader can open); the synthetic model: its name.
func TestModelID(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("m.gguf", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs("m.gguf")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, flag string
		file       loadedFile
		want       string
	}{
		{"flag wins", "Qwen/Qwen2.5-0.5B-Instruct", loadedFile{Label: "m.gguf", Name: "qwen"}, "Qwen/Qwen2.5-0.5B-Instruct"},
		{"relative path made absolute", "", loadedFile{Label: "m.gguf", Name: "qwen"}, abs},
		{"synthetic model keeps its name", "", loadedFile{Label: "synthetic", Name: "synthetic-tiny"}, "synthetic-tiny"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := modelID(tc.flag, &tc.file)
			if err != nil || got != tc.want {
				t.Fatalf("modelID = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	c, err := parseServe([]string{"--model-id", "org/name"})
	if err != nil || c.modelID != "org/name" {
		t.Fatalf("parse --model-id: %+v, %v", c, err)
	}
}

func TestParseDistFlags(t *testing.T) {
	c, err := parseServe([]string{"--metrics-compat", "vllm"})
	if err != nil || c.dist.metricsCompat != "vllm" {
		t.Fatalf("--metrics-compat vllm: %+v, %v", c, err)
	}
	if _, err := parseServe([]string{"--metrics-compat", "sglang"}); err == nil || err.Error() != `serve: --metrics-compat must be vllm or empty, got "sglang"` {
		t.Fatalf("--metrics-compat sglang: %v", err)
	}
}

func TestParseZMQFlags(t *testing.T) {
	c, err := parseServe([]string{"--kv-events-zmq", "tcp://*:5556", "--kv-events-zmq-topic", "kv@x@m"})
	if err != nil || c.dist.zmqEndpoint != "tcp://*:5556" || c.dist.zmqTopic != "kv@x@m" {
		t.Fatalf("parsed %+v, %v", c, err)
	}
	for _, bad := range [][]string{
		{"--kv-events-zmq", "ipc:///tmp/x"},
		{"--kv-events-zmq", "tcp://host"},
		{"--kv-events-zmq-topic", "t"},
		{"--kv-events-zmq-connect"},
	} {
		if _, err := parseServe(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	cases := map[[3]string]string{
		{"10.1.2.3", "0.0.0.0:8080", "qwen"}: "kv@10.1.2.3:8080@qwen",
		{"fd00::1", "[::]:8080", "qwen"}:     "kv@[fd00::1]:8080@qwen",
		{"node-a", "", "tiny"}:               "kv@node-a@tiny",
	}
	for in, want := range cases {
		if got := defaultZMQTopic(in[0], in[1], in[2]); got != want {
			t.Errorf("defaultZMQTopic%q = %q, want %q", in, got, want)
		}
	}
}
