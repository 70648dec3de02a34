package openai

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// TestResponsesSDK: POST /v1/responses driven by the official Go SDK
// answers what the same conversation gets from /v1/chat/completions (the
// same text at temperature 0, the same token counts), whole and streamed
// as the Responses API's events, and refuses what it cannot honour.
func TestResponsesSDK(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	c := h.client()
	const instructions, prompt = "You tell short stories.", "Once upon a time"
	chat, err := c.Chat.Completions.New(ctxT(t), oa.ChatCompletionNewParams{Model: "tiny", MaxCompletionTokens: oa.Int(12), Temperature: oa.Float(0),
		Messages: []oa.ChatCompletionMessageParamUnion{oa.SystemMessage(instructions), oa.UserMessage(prompt)}})
	if err != nil {
		t.Fatal(err)
	}
	want, wantStatus := chat.Choices[0].Message.Content, responses.ResponseStatusCompleted
	if chat.Choices[0].FinishReason == "length" {
		wantStatus = responses.ResponseStatusIncomplete
	}
	params := responses.ResponseNewParams{Model: "tiny", Instructions: oa.String(instructions), MaxOutputTokens: oa.Int(12),
		Temperature: oa.Float(0), Input: responses.ResponseNewParamsInputUnion{OfString: oa.String(prompt)}}

	resp, err := c.Responses.New(ctxT(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() != want || resp.Status != wantStatus || !strings.HasPrefix(resp.ID, "resp_") || resp.Model != "tiny" ||
		resp.Usage.InputTokens != chat.Usage.PromptTokens || resp.Usage.OutputTokens != chat.Usage.CompletionTokens ||
		resp.Usage.TotalTokens != chat.Usage.TotalTokens || resp.Instructions.OfString != instructions || len(resp.Output) != 1 ||
		resp.Output[0].Type != "message" || resp.Output[0].Role != "assistant" {
		t.Fatalf("response %s\nchat completion: %q (%s), usage %+v", resp.RawJSON(), want, chat.Choices[0].FinishReason, chat.Usage)
	}
	if wantStatus == responses.ResponseStatusIncomplete && (resp.IncompleteDetails.Reason != "max_output_tokens" || resp.Output[0].Status != "incomplete") {
		t.Fatalf("incomplete without the reason: %s", resp.RawJSON())
	}

	// Streamed: the events in order, numbered from 0, the text in deltas.
	st := c.Responses.NewStreaming(ctxT(t), params)
	var types []string
	var deltas strings.Builder
	var final responses.Response
	for seq := int64(0); st.Next(); seq++ {
		ev := st.Current()
		if ev.SequenceNumber != seq {
			t.Fatalf("event %d (%s) numbered %d", seq, ev.Type, ev.SequenceNumber)
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.completed", "response.incomplete":
			final = ev.Response
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	wantTypes := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
	if len(types) < 9 || strings.Join(types[:4], " ") != strings.Join(wantTypes, " ") ||
		strings.Join(types[len(types)-4:], " ") != "response.output_text.done response.content_part.done response.output_item.done response."+string(wantStatus) {
		t.Fatalf("event types %v", types)
	}
	if deltas.String() != want || final.OutputText() != want || final.Status != wantStatus || final.Usage.OutputTokens != chat.Usage.CompletionTokens {
		t.Fatalf("streamed %q, final %s; want %q", deltas.String(), final.RawJSON(), want)
	}

	// An earlier turn's function call and its output are the chat's
	// assistant tool call and tool message.
	items := responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("What is the weather in Paris?", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfFunctionCall(`{"city":"Paris"}`, "call_1", "get_weather"),
		responses.ResponseInputItemParamOfFunctionCallOutput(`{"celsius":21}`),
	}
	items[2].OfFunctionCallOutput.CallID = oa.String("call_1")
	resp, err = c.Responses.New(ctxT(t), responses.ResponseNewParams{Model: "tiny", MaxOutputTokens: oa.Int(4), Temperature: oa.Float(0),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items}})
	if err != nil {
		t.Fatal(err)
	}
	chat, err = c.Chat.Completions.New(ctxT(t), oa.ChatCompletionNewParams{Model: "tiny", MaxCompletionTokens: oa.Int(4), Temperature: oa.Float(0),
		Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage("What is the weather in Paris?"),
			{OfAssistant: &oa.ChatCompletionAssistantMessageParam{ToolCalls: []oa.ChatCompletionMessageToolCallUnionParam{{
				OfFunction: &oa.ChatCompletionMessageFunctionToolCallParam{ID: "call_1",
					Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}}}},
			oa.ToolMessage(`{"celsius":21}`, "call_1")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.InputTokens != chat.Usage.PromptTokens || resp.OutputText() != chat.Choices[0].Message.Content {
		t.Fatalf("items: %d input tokens, %q; the chat form: %d, %q", resp.Usage.InputTokens, resp.OutputText(),
			chat.Usage.PromptTokens, chat.Choices[0].Message.Content)
	}

	for _, c := range []struct{ body, param string }{
		{`{"model":"tiny","input":"a","previous_response_id":"resp_1"}`, "previous_response_id"},
		{`{"model":"tiny","input":"a","background":true}`, "background"},
		{`{"model":"tiny","input":"a","tools":[{"type":"web_search"}]}`, "tools"},
		{`{"model":"tiny","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "input[0].content"},
		{`{"model":"tiny","input":[{"role":"robot","content":"a"}]}`, "input[0].role"},
		{`{"model":"tiny","input":[]}`, "input"},
		{`{"model":"tiny"}`, "input"},
		{`{"model":"tiny","input":"a","include":["message.output_text.logprobs"]}`, "include"},
	} {
		status, body := h.post(t, "/v1/responses", c.body)
		var e struct {
			Error struct {
				Param string `json:"param"`
			} `json:"error"`
		}
		if status != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error.Param != c.param {
			t.Fatalf("%s: status %d, %s (want 400 naming %s)", c.body, status, body, c.param)
		}
	}
	h.idle(t, false)
}

// TestResponsesToolCalls: function tools in the Responses API's form with
// tool_choice required give function_call output items whose arguments
// match the tool's schema, whole and streamed.
func TestResponsesToolCalls(t *testing.T) {
	h := startHarness(t, harnessOpts{template: familyTemplate(t, "Qwen-Qwen3-0.6B.jinja"), modelFile: "tiny-qwen3-q4_k_m.gguf"})
	c := h.client()
	v := compileSchema(t, weatherParams)
	params := responses.ResponseNewParams{Model: "tiny", MaxOutputTokens: oa.Int(120), Temperature: oa.Float(0),
		Input:      responses.ResponseNewParamsInputUnion{OfString: oa.String("What is the weather in Paris?")},
		Tools:      []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", weatherParams, true)},
		ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "get_weather"}}}
	resp, err := c.Responses.New(ctxT(t), params)
	if err != nil {
		t.Fatal(err)
	}
	var calls []responses.ResponseOutputItemUnion
	for _, it := range resp.Output {
		if it.Type == "function_call" {
			calls = append(calls, it)
		}
	}
	if len(calls) == 0 || resp.Status != responses.ResponseStatusCompleted {
		t.Fatalf("no function call: %s", resp.RawJSON())
	}
	for _, it := range calls {
		if it.Name != "get_weather" || !strings.HasPrefix(it.CallID, "call_") || !strings.HasPrefix(it.ID, "fc_") {
			t.Fatalf("call %s", it.RawJSON())
		}
		validateJSON(t, v, it.Arguments.OfString)
	}

	st := c.Responses.NewStreaming(ctxT(t), params)
	var args, done string
	for st.Next() {
		ev := st.Current()
		switch ev.Type {
		case "response.function_call_arguments.delta":
			args += ev.Delta
		case "response.function_call_arguments.done":
			done = ev.Arguments
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if args == "" || args != done || args != calls[0].Arguments.OfString {
		t.Fatalf("streamed arguments %q, done %q; whole %q", args, done, calls[0].Arguments.OfString)
	}
	validateJSON(t, v, args)

	// text.format json_schema is chat's response_format.
	format := responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
		Name: "weather", Schema: weatherParams, Strict: oa.Bool(true)}}
	resp, err = c.Responses.New(ctxT(t), responses.ResponseNewParams{Model: "tiny", MaxOutputTokens: oa.Int(120), Temperature: oa.Float(0),
		Input: responses.ResponseNewParamsInputUnion{OfString: oa.String("Weather in Paris as JSON")},
		Text:  responses.ResponseTextConfigParam{Format: format}})
	if err != nil {
		t.Fatal(err)
	}
	chat, err := c.Chat.Completions.New(ctxT(t), oa.ChatCompletionNewParams{Model: "tiny", MaxCompletionTokens: oa.Int(120), Temperature: oa.Float(0),
		Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage("Weather in Paris as JSON")},
		ResponseFormat: oa.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "weather", Schema: weatherParams, Strict: oa.Bool(true)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() != chat.Choices[0].Message.Content {
		t.Fatalf("json_schema output %q, the chat form's %q", resp.OutputText(), chat.Choices[0].Message.Content)
	}
	if resp.Status == responses.ResponseStatusCompleted {
		validateJSON(t, v, resp.OutputText())
	}
	h.idle(t, false)
}

// TestResponsesStreamFailure: a failure after the stream began ends it
// with one response.failed event carrying the error, and nothing after.
func TestResponsesStreamFailure(t *testing.T) {
	h := startHarness(t, harnessOpts{})
	boom := errors.New("injected device failure")
	h.model.fail.Store(&boom)
	defer h.model.fail.Store(nil)
	resp, err := http.Post(h.base+"/v1/responses", "application/json", strings.NewReader(`{"model":"tiny","input":"go","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	events := strings.Split(strings.TrimSpace(string(body)), "\n\n")
	last := events[len(events)-1]
	var ev struct {
		Type     string `json:"type"`
		Response struct {
			Status string `json:"status"`
			Error  struct {
				Code, Message string
			} `json:"error"`
		} `json:"response"`
	}
	data, _ := strings.CutPrefix(last[strings.Index(last, "\n")+1:], "data: ")
	if !strings.HasPrefix(last, "event: response.failed\n") || json.Unmarshal([]byte(data), &ev) != nil || ev.Type != "response.failed" ||
		ev.Response.Status != "failed" || !strings.Contains(ev.Response.Error.Message, "injected device failure") ||
		strings.Count(string(body), "response.failed") != 2 || strings.Contains(string(body), "response.completed") {
		t.Fatalf("stream:\n%s", body)
	}
	h.idle(t, false)
}
