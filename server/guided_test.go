package server

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "oengine/proto/openengine/v1"
)

// guidedReq is a seeded temperature-1 request of n outputs under g.
func guidedReq(g *pb.GuidedDecoding, seed uint64, n uint32, maxTokens uint32) *pb.GenerateRequest {
	return &pb.GenerateRequest{
		Model:    extModel,
		Input:    &pb.GenerateRequest_Prompt{Prompt: "The answer is"},
		Guided:   g,
		Sampling: &pb.SamplingParams{Temperature: proto.Float64(1), Seed: proto.Uint64(seed), NumSequences: proto.Uint32(n)},
		Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(maxTokens)},
	}
}

// finished returns each output's GenerationFinished.
func finished(rs []*pb.GenerateResponse) map[uint32]*pb.GenerationFinished {
	out := map[uint32]*pb.GenerationFinished{}
	for _, r := range rs {
		if f := r.GetFinished(); f != nil {
			out[f.GetOutputIndex()] = f
		}
	}
	return out
}

const guidedTestSchema = `{"type":"object","properties":{
	"name":{"type":"string","minLength":1,"maxLength":6},
	"age":{"type":"integer","minimum":0,"maximum":120},
	"tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3},
	"ok":{"type":"boolean"}},
	"required":["name","age"],"additionalProperties":false}`

// TestGuidedKinds: for every kind of the OpenEngine guided field, seeded
// temperature-1 generations on the real tiny model finish with STOP (no
// stop match: the constraint completed, or EOS where it allowed one) and
// their text is accepted by an independent checker (jsonschema, Go's
// regexp, the choice list, encoding/json).
func TestGuidedKinds(t *testing.T) {
	h := startExt(t, nil)
	ctx := ctxT(t)

	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(guidedTestSchema))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^(?:[A-Z][a-z]{1,5}-\d{2,4}|none)$`)
	choices := []string{"red", "green", "blue and yellow"}
	cases := []struct {
		name  string
		g     *pb.GuidedDecoding
		check func(string) error
	}{
		{"json_schema", &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_JsonSchema{JsonSchema: guidedTestSchema}}, func(s string) error {
			v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
			if err != nil {
				return err
			}
			return sch.Validate(v)
		}},
		{"regex", &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_Regex{Regex: `[A-Z][a-z]{1,5}-\d{2,4}|none`}}, func(s string) error {
			if !re.MatchString(s) {
				return fmt.Errorf("no match")
			}
			return nil
		}},
		{"choice", &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_Choice{Choice: &pb.ChoiceConstraint{Choices: choices}}, Backend: "oengine"}, func(s string) error {
			if !slices.Contains(choices, s) {
				return fmt.Errorf("not a choice")
			}
			return nil
		}},
		{"json_object", &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_JsonObject{JsonObject: &pb.JsonObjectConstraint{}}}, nil},
		{"ebnf_grammar", &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_EbnfGrammar{EbnfGrammar: `root ::= ("red" | "green") " " [0-9] [0-9]?`}}, func(s string) error {
			if !regexp.MustCompile(`^(red|green) [0-9][0-9]?$`).MatchString(s) {
				return fmt.Errorf("not in the grammar")
			}
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stops := 0
			for seed := uint64(1); seed <= 3; seed++ {
				rs, err := h.generate(ctx, guidedReq(tc.g, seed, 4, 96))
				if err != nil {
					t.Fatal(err)
				}
				wantStreamOK(t, rs, err)
				for i, f := range finished(rs) {
					text := textOf(rs, i)
					if tc.check == nil { // json_object: free strings may run to the limit
						if f.GetReason() == pb.FinishReason_FINISH_REASON_LENGTH {
							continue
						}
						var obj map[string]any
						if err := json.Unmarshal([]byte(text), &obj); err != nil {
							t.Fatalf("seed %d output %d %q: %v", seed, i, text, err)
						}
					} else if f.GetReason() != pb.FinishReason_FINISH_REASON_STOP {
						t.Fatalf("seed %d output %d finished %v after %q", seed, i, f, text)
					} else if err := tc.check(text); err != nil {
						t.Fatalf("seed %d output %d %q: %v", seed, i, text, err)
					}
					if f.GetReason() == pb.FinishReason_FINISH_REASON_STOP {
						stops++
						if sm := f.GetStopMatch(); sm != nil && sm.GetEosTokenId() == 0 {
							t.Fatalf("stop match %v: a grammar stop has none, an EOS stop names its token", sm)
						}
					}
				}
			}
			if stops == 0 {
				t.Fatal("no output completed")
			}
		})
	}

	t.Run("model info advertises the kinds", func(t *testing.T) {
		mi, err := h.ctl.GetModelInfo(ctx, &pb.GetModelInfoRequest{Model: extModel})
		if err != nil {
			t.Fatal(err)
		}
		gd := mi.GetGeneration().GetGuidedDecoding()
		for _, m := range []pb.GuidedDecodingMode{pb.GuidedDecodingMode_GUIDED_DECODING_MODE_JSON_SCHEMA, pb.GuidedDecodingMode_GUIDED_DECODING_MODE_REGEX,
			pb.GuidedDecodingMode_GUIDED_DECODING_MODE_CHOICE, pb.GuidedDecodingMode_GUIDED_DECODING_MODE_JSON_OBJECT,
			pb.GuidedDecodingMode_GUIDED_DECODING_MODE_EBNF_GRAMMAR} {
			if !gd.GetSupported() || !slices.Contains(gd.GetModes(), m) {
				t.Fatalf("guided capabilities %v lack %v", gd, m)
			}
		}
		if slices.Contains(gd.GetModes(), pb.GuidedDecodingMode_GUIDED_DECODING_MODE_STRUCTURAL_TAG) {
			t.Fatalf("guided capabilities %v", gd)
		}
	})
}

// TestGuidedRefused: constraints the compiler cannot take are refused
// before acceptance with the compiler's reason.
func TestGuidedRefused(t *testing.T) {
	h := startExt(t, nil)
	ctx := ctxT(t)
	cases := []struct {
		name   string
		g      *pb.GuidedDecoding
		code   codes.Code
		reason string
		msg    string
	}{
		{"bad regex", &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_Regex{Regex: "a("}}, codes.InvalidArgument, "INVALID_ARGUMENT", "syntax"},
		{"regex with a backreference", &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_Regex{Regex: `(a)\1`}}, codes.InvalidArgument, "INVALID_ARGUMENT", "guided"},
		{"schema keyword outside the subset", &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_JsonSchema{JsonSchema: `{"type":"string","format":"ipv6"}`}},
			codes.InvalidArgument, "INVALID_ARGUMENT", "format"},
		{"schema not JSON", &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_JsonSchema{JsonSchema: `{"type":`}}, codes.InvalidArgument, "INVALID_ARGUMENT", "guided"},
		{"automaton too large", &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_Regex{Regex: `([a-z]{1000}){17}`}}, codes.InvalidArgument, "INVALID_ARGUMENT", "too large"},
		{"source too large", &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_Regex{Regex: strings.Repeat("a", 70_000)}}, codes.InvalidArgument, "INVALID_ARGUMENT", "bytes"},
		{"structural tag", &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_StructuralTag{StructuralTag: "{}"}}, codes.Unimplemented, "UNSUPPORTED_FEATURE", "structural_tag"},
		{"gbnf without root", &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_EbnfGrammar{EbnfGrammar: `start ::= "a"`}}, codes.InvalidArgument, "INVALID_ARGUMENT", "root"},
		{"gbnf left recursion", &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_EbnfGrammar{EbnfGrammar: `root ::= root "a" | "b"`}}, codes.InvalidArgument, "INVALID_ARGUMENT", "recursion"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := h.generate(ctx, guidedReq(tc.g, 1, 1, 8))
			if len(rs) != 0 {
				t.Fatalf("accepted: %v", rs)
			}
			wantStatus(t, err, tc.code, tc.reason)
			if msg := status.Convert(err).Message(); !strings.Contains(msg, tc.msg) {
				t.Fatalf("message %q lacks %q", msg, tc.msg)
			}
		})
	}
}

// TestGuidedSessionAndStream: a session continuation and a streamed-input
// generation both honour the guided field.
func TestGuidedSessionAndStream(t *testing.T) {
	h := startExt(t, nil)
	ctx := ctxT(t)
	choices := []string{"yes", "no", "maybe not"}
	g := &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_Choice{Choice: &pb.ChoiceConstraint{Choices: choices}}}

	t.Run("session continuation", func(t *testing.T) {
		h.open(ctx, "gs", "Is the sky blue?")
		for turn := 0; turn < 2; turn++ {
			req := h.cont("gs", pb.ContinuationMode_CONTINUATION_MODE_APPEND, " Answer:", 32)
			req.Guided = g
			req.Stopping.IgnoreEos = proto.Bool(false)
			req.Sampling = &pb.SamplingParams{Temperature: proto.Float64(1), Seed: proto.Uint64(uint64(turn + 7))}
			rs, err := h.generate(ctx, req)
			wantStreamOK(t, rs, err)
			if got := textOf(rs, 0); !slices.Contains(choices, got) {
				t.Fatalf("turn %d: %q is not a choice", turn, got)
			}
			if f := finished(rs)[0]; f.GetReason() != pb.FinishReason_FINISH_REASON_STOP {
				t.Fatalf("turn %d finished %v", turn, f)
			}
		}
		// The session then continues unconstrained.
		rs, err := h.generate(ctx, h.cont("gs", pb.ContinuationMode_CONTINUATION_MODE_APPEND, " Why?", 4))
		wantStreamOK(t, rs, err)
		if n := len(outputIDs(rs)); n != 4 {
			t.Fatalf("free turn made %d tokens, want 4", n)
		}
	})

	t.Run("streamed input", func(t *testing.T) {
		start := &pb.GenerateRequest{Model: extModel, Guided: &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_Regex{Regex: `[0-9]{2,3}( apples)?`}},
			Sampling: &pb.SamplingParams{Temperature: proto.Float64(1), Seed: proto.Uint64(3)},
			Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(32)}}
		frames := []*pb.GenerateStreamRequest{startFrame(start), textFrame(1, "How many "), textFrame(2, "apples? "), endFrame(2)}
		rs, err := h.stream(ctx, frames, 0, true)
		wantStreamOK(t, rs, err)
		if got := textOf(rs, 0); !regexp.MustCompile(`^[0-9]{2,3}( apples)?$`).MatchString(got) {
			t.Fatalf("streamed-input output %q does not match", got)
		}
	})

	t.Run("streamed input refuses a bad constraint before acceptance", func(t *testing.T) {
		start := &pb.GenerateRequest{Model: extModel, Guided: &pb.GuidedDecoding{Guide: &pb.GuidedDecoding_Regex{Regex: "("}}}
		rs, err := h.stream(ctx, []*pb.GenerateStreamRequest{startFrame(start), endFrame(0)}, 0, true)
		if len(rs) != 0 {
			t.Fatalf("accepted: %v", rs)
		}
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	})
}

// TestToolParserName: ModelInfo.tool_call_parser is the parser the chat
// template shows, or the configured one; an unknown name is refused.
func TestToolParserName(t *testing.T) {
	_, tok, _ := tinyEngine(t)
	f := newFake(t, "m")
	cases := []struct {
		m    Model
		want string
	}{
		{Model{Backend: f, Tokenizer: tok, ChatTemplate: `{{ "<tool_call>" }}`}, "hermes"},
		{Model{Backend: f, Tokenizer: tok, ChatTemplate: `{{ "<tool_call>" }}`, ToolCallParser: "mistral"}, "mistral"},
		{Model{Backend: f, Tokenizer: tok, ChatTemplate: `{{ messages }}`}, ""},
		{Model{Backend: f, ChatTemplate: `{{ "<tool_call>" }}`}, ""}, // no tokenizer: no chat
	}
	for i, tc := range cases {
		m, err := tc.m.normalize(0)
		if err != nil {
			t.Fatal(err)
		}
		if got := toolParserName(m); got != tc.want {
			t.Errorf("case %d: %q, want %q", i, got, tc.want)
		}
	}
	if _, err := (Model{Backend: f, ToolCallParser: "nope"}).normalize(0); err == nil {
		t.Fatal("unknown parser accepted")
	}
}
