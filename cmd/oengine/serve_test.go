package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"oengine/model/chat"
)

// serve refuses a --chat-template that loops without bound, quickly and
// with the reason, instead of hanging at load or on the first request.
func TestServeRefusesHostileChatTemplate(t *testing.T) {
	dir, _ := os.Getwd()
	model := filepath.Join(dir, "..", "..", "..", "shared", "testdata", "models", "tiny-llama-f16.gguf")
	if _, err := os.Stat(model); err != nil {
		t.Skipf("shared testdata missing: %v", err)
	}
	cases := map[string]string{
		"range":     `{% for i in range(100000000) %}x{% endfor %}{% for m in messages %}{{ m.content }}{% endfor %}`,
		"recursion": `{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}{% for m in messages %}{{ m.content }}{% endfor %}`,
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			tmpl := filepath.Join(t.TempDir(), "hostile.jinja")
			if err := os.WriteFile(tmpl, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			start := time.Now()
			err := runServe([]string{"--model", model, "--chat-template", tmpl, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}, &out, &errOut)
			if !errors.Is(err, chat.ErrTemplate) || !strings.Contains(err.Error(), "--chat-template") {
				t.Fatalf("err %v, want a chat template error naming the flag", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
}
