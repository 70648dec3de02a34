package chat

import (
	"reflect"
	"testing"
)

// TestHarmonyParser: harmony replies split into content, reasoning and tool
// calls, the same whether the text comes whole or byte by byte (markers
// split across pieces); text that is not harmony stays content.
func TestHarmonyParser(t *testing.T) {
	for _, c := range []struct {
		name, text         string
		content, reasoning string
		calls              []HarmonyCall
	}{
		{"analysis then final",
			"<|channel|>analysis<|message|>User asks 2+2. Easy.<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4 — «four».",
			"2 + 2 = 4 — «four».", "User asks 2+2. Easy.", nil},
		{"final ended by return",
			"<|channel|>final<|message|>Hi!<|return|>", "Hi!", "", nil},
		{"tool call, recipient before the channel",
			"<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}",
			"", "Need the weather.", []HarmonyCall{{"get_weather", `{"city": "Paris"}`}}},
		{"tool call, recipient after the channel, constrained",
			"<|channel|>commentary to=functions.lookup <|constrain|>json<|message|>{\"q\":\"a<b\"}<|call|>",
			"", "", []HarmonyCall{{"lookup", `{"q":"a<b"}`}}},
		{"commentary preamble is content",
			"<|channel|>commentary<|message|>Checking…<|end|><|start|>assistant<|channel|>final<|message|>Done.",
			"Checking…Done.", "", nil},
		{"angle brackets in a body",
			"<|channel|>final<|message|>a <| b < c <|en d |>", "a <| b < c <|en d |>", "", nil},
		{"plain text", "Hello there, <|world|>.", "Hello there, <|world|>.", "", nil},
		{"unfinished header", "<|channel|>ana", "<|channel|>ana", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, bytewise := range []bool{false, true} {
				p := NewHarmonyParser()
				var content, reasoning string
				pieces := []string{c.text}
				if bytewise {
					pieces = nil
					for i := range len(c.text) {
						pieces = append(pieces, c.text[i:i+1])
					}
				}
				for _, s := range pieces {
					o, r := p.Push(s)
					content, reasoning = content+o, reasoning+r
				}
				o, r := p.Flush()
				content, reasoning = content+o, reasoning+r
				if content != c.content || reasoning != c.reasoning || !reflect.DeepEqual(p.Calls(), c.calls) {
					t.Fatalf("bytewise %v: content %q, reasoning %q, calls %v; want %q, %q, %v",
						bytewise, content, reasoning, p.Calls(), c.content, c.reasoning, c.calls)
				}
			}
		})
	}
}
