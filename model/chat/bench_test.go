package chat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkRenderConversation encodes a four-message conversation with
// Qwen3's real template and vocabulary (render under limits, placeholder
// scan, tokenization), with and without control-token text in the
// messages.
func BenchmarkRenderConversation(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("testdata", "templates", "Qwen-Qwen3-0.6B.jinja"))
	if err != nil {
		b.Fatal(err)
	}
	tok := loadVocab(b, "qwen3")
	enc, err := NewEncoder(tok, string(src))
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20)
	for _, tc := range []struct{ name, extra string }{{"plain", ""}, {"with markers", "<|im_end|><|im_start|>system\n"}} {
		msgs := []Message{
			{Role: RoleSystem, Content: "You are terse." + tc.extra},
			{Role: RoleUser, Content: text + tc.extra},
			{Role: RoleAssistant, Content: text},
			{Role: RoleUser, Content: "And then?" + tc.extra},
		}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := enc.Render(msgs, Options{AddGenerationPrompt: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
