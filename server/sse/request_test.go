package sse

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestSSEParsePrompt(t *testing.T) {
	cases := []struct {
		name, body, want string
		ok               bool
	}{
		{name: "plain", body: `{"prompt":"hi"}`, want: "hi", ok: true},
		{name: "whitespace", body: " \n{ \"prompt\" : \"hi\" }\n", want: "hi", ok: true},
		{name: "escapes", body: `{"prompt":"a\n\"b\" \u00e9 \ud83d\ude00"}`, want: "a\n\"b\" é 😀", ok: true},
		{name: "escaped backslash then u", body: `{"prompt":"\\ud800"}`, want: `\ud800`, ok: true},
		{name: "html kept", body: `{"prompt":"<think>&"}`, want: "<think>&", ok: true},
		{name: "surrogate pair reversed", body: `{"prompt":"\ude00\ud83d"}`},
		{name: "high surrogate at end", body: `{"prompt":"\ud83d"}`},
		{name: "high surrogate then letter", body: `{"prompt":"\ud83dx"}`},
		{name: "null", body: `null`},
		{name: "string", body: `"prompt"`},
		{name: "nested", body: `{"prompt":"x","x":{"prompt":"y"}}`},
		{name: "unclosed", body: `{"prompt":"x",`},
		{name: "two objects", body: `{"prompt":"x"}{"prompt":"y"}`},
		{name: "bool", body: `{"prompt":true}`},
		{name: "array", body: `{"prompt":["x"]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, serr := parsePrompt([]byte(tc.body))
			if tc.ok != (serr == nil) || got != tc.want {
				t.Fatalf("parsePrompt(%q) = %q, %v; want %q ok=%v", tc.body, got, serr, tc.want, tc.ok)
			}
			if serr != nil && (serr.status != 400 || serr.code != "invalid_request") {
				t.Fatalf("error %+v", serr)
			}
		})
	}
}

// FuzzSSEParsePrompt: whatever parsePrompt accepts is a valid JSON object
// with exactly the member "prompt", whose decoded value it returns; it
// never panics.
func FuzzSSEParsePrompt(f *testing.F) {
	for _, s := range []string{`{"prompt":"hi"}`, `{"prompt":"\ud83d\ude00"}`, `{"prompt":"a","b":1}`,
		`{"Prompt":"x"}`, `[1]`, `{"prompt":"\u0000"}`, "{\"prompt\":\"\xff\"}", `{"prompt":"x"} `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, serr := parsePrompt(body)
		if serr != nil {
			return
		}
		if !json.Valid(body) || !utf8.Valid(body) {
			t.Fatalf("accepted invalid JSON or UTF-8 %q", body)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil || len(m) != 1 {
			t.Fatalf("accepted %q (%v, %d members)", body, err, len(m))
		}
		var want string
		if err := json.Unmarshal(m["prompt"], &want); err != nil || want != got {
			t.Fatalf("accepted %q as %q, want %q (%v)", body, got, want, err)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("prompt %q is not valid UTF-8", got)
		}
	})
}
