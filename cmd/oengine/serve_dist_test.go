package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
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
	c, err := parseServe([]string{"--kv-events-zmq", "tcp://*:5556", "--kv-events-zmq-public", "--kv-events-zmq-topic", "kv@x@m"})
	if err != nil || c.dist.zmqEndpoint != "tcp://*:5556" || c.dist.zmqTopic != "kv@x@m" {
		t.Fatalf("parsed %+v, %v", c, err)
	}
	for _, ok := range [][]string{
		{"--kv-events-zmq", "tcp://127.0.0.1:5556"},
		{"--kv-events-zmq", "tcp://[::1]:5556"},
		{"--kv-events-zmq", "tcp://10.0.0.5:5556", "--kv-events-zmq-connect"},
	} {
		if _, err := parseServe(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range [][]string{
		// The feed has no authentication: a reachable bind needs the
		// explicit --kv-events-zmq-public (it used to be accepted).
		{"--kv-events-zmq", "tcp://*:5556"},
		{"--kv-events-zmq", "tcp://0.0.0.0:5556"},
		{"--kv-events-zmq", "tcp://10.0.0.5:5556"},
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

// TestDeployManifestFlags: the oengine containers of deploy/kubernetes run
// `oengine serve` with flags this binary accepts (Kubernetes' $(VAR)
// references replaced by sample values).
func TestDeployManifestFlags(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "deploy", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	n := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			var d struct {
				Kind string `json:"kind"`
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct {
								Name string   `json:"name"`
								Args []string `json:"args"`
							} `json:"containers"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				if c.Name != "oengine" {
					continue
				}
				if len(c.Args) == 0 || c.Args[0] != "serve" {
					t.Fatalf("%s: oengine args %q", f, c.Args)
				}
				args := make([]string, len(c.Args)-1)
				for i, a := range c.Args[1:] {
					args[i] = strings.ReplaceAll(a, "$(POD_IP)", "10.1.2.3")
				}
				if _, err := parseServe(args); err != nil {
					t.Errorf("%s: oengine %q: %v", f, c.Args, err)
				}
				n++
			}
		}
	}
	if n < 3 {
		t.Fatalf("%d oengine containers found, want one per manifest", n)
	}
}

// TestSystemdUnitFlags: the systemd example's ExecStart is a serve command
// line this binary accepts, with the security flags.
func TestSystemdUnitFlags(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "systemd", "oengine.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := strings.ReplaceAll(string(raw), "\\\n", " ")
	var exec string
	for _, line := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			exec = v
		}
	}
	fields := strings.Fields(exec)
	if len(fields) < 3 || fields[0] != "/usr/local/bin/oengine" || fields[1] != "serve" {
		t.Fatalf("ExecStart %q", exec)
	}
	if _, err := parseServe(fields[2:]); err != nil {
		t.Fatalf("ExecStart %q: %v", exec, err)
	}
	for _, f := range []string{"--api-key-file=", "--admin-key-file=", "--tls-cert=", "--tls-key="} {
		if !strings.Contains(exec, f) {
			t.Errorf("ExecStart lacks %s", f)
		}
	}
}
