package openai

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"oengine/model/tokenizer"
)

// TestOpenAISDK drives a live server over TCP with the official OpenAI Go
// SDK (github.com/openai/openai-go/v3).
func TestOpenAISDK(t *testing.T) {
	h := startHarness(t, harnessOpts{template: llama2Template, maxRunning: 2, maxWaiting: 1, maxBody: 64 << 10})
	c := h.client()

	t.Run("models list", func(t *testing.T) {
		page, err := c.Models.List(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
			if m.OwnedBy != "oengine" || m.Created == 0 || m.Object != "model" {
				t.Fatalf("model %+v", m)
			}
		}
		if !slices.Equal(ids, []string{"tiny", "tiny-alias"}) {
			t.Fatalf("models %v", ids)
		}
		m, err := c.Models.Get(ctxT(t), "tiny-alias")
		if err != nil || m.ID != "tiny-alias" {
			t.Fatalf("get %v %v", m, err)
		}
	})

	completion := func(t *testing.T, p oa.CompletionNewParams, opts ...option.RequestOption) *oa.Completion {
		t.Helper()
		r, err := c.Completions.New(ctxT(t), p, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	prompt := "Once upon a time, in a land far away, there lived a small dragon who"

	var greedyText string
	t.Run("completions greedy, not streamed", func(t *testing.T) {
		var resp *http.Response
		r := completion(t, oa.CompletionNewParams{Model: "tiny", Prompt: oa.CompletionNewParamsPromptUnion{OfString: oa.String(prompt)},
			MaxTokens: oa.Int(12), Temperature: oa.Float(0)}, option.WithJSONSet("ignore_eos", true), option.WithResponseInto(&resp))
		if len(r.Choices) != 1 || r.Choices[0].Text == "" || r.Choices[0].FinishReason != "length" {
			t.Fatalf("choices %+v", r.Choices)
		}
		if r.Usage.CompletionTokens != 12 || r.Usage.PromptTokens == 0 || r.Usage.TotalTokens != r.Usage.PromptTokens+12 {
			t.Fatalf("usage %+v", r.Usage)
		}
		if r.Object != "text_completion" || r.SystemFingerprint == "" || !strings.HasPrefix(r.ID, "cmpl-") {
			t.Fatalf("envelope %+v", r)
		}
		if got := resp.Header.Get("X-Request-Id"); got != r.ID {
			t.Fatalf("X-Request-Id %q, id %q", got, r.ID)
		}
		greedyText = r.Choices[0].Text
	})

	t.Run("completions streamed equal the whole response", func(t *testing.T) {
		st := c.Completions.NewStreaming(ctxT(t), oa.CompletionNewParams{Model: "tiny", Prompt: oa.CompletionNewParamsPromptUnion{OfString: oa.String(prompt)},
			MaxTokens: oa.Int(12), Temperature: oa.Float(0), StreamOptions: oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)}},
			option.WithJSONSet("ignore_eos", true))
		var text strings.Builder
		finish, usageSeen := "", false
		for st.Next() {
			ch := st.Current()
			for _, c := range ch.Choices {
				text.WriteString(c.Text)
				if c.FinishReason != "" {
					finish = string(c.FinishReason)
				}
			}
			if ch.Usage.CompletionTokens > 0 {
				usageSeen = ch.Usage.CompletionTokens == 12
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if text.String() != greedyText || finish != "length" || !usageSeen {
			t.Fatalf("streamed %q (finish %q, usage %v), whole %q", text.String(), finish, usageSeen, greedyText)
		}
	})

	t.Run("usage counts cached tokens on a repeated prefix", func(t *testing.T) {
		long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 8)
		p := oa.CompletionNewParams{Model: "tiny", Prompt: oa.CompletionNewParamsPromptUnion{OfString: oa.String(long)}, MaxTokens: oa.Int(2), Temperature: oa.Float(0)}
		first := completion(t, p)
		second := completion(t, p)
		if first.Usage.PromptTokens < 64 {
			t.Fatalf("prompt of %d tokens is too short to fill pages", first.Usage.PromptTokens)
		}
		if got := second.Usage.PromptTokensDetails.CachedTokens; got < 48 || got >= second.Usage.PromptTokens {
			t.Fatalf("cached tokens %d of %d on the repeat (first run %d)", got, second.Usage.PromptTokens, first.Usage.PromptTokensDetails.CachedTokens)
		}
	})

	t.Run("stop string ends the text before it", func(t *testing.T) {
		if len(greedyText) < 8 {
			t.Skip("greedy text too short")
		}
		stop := greedyText[len(greedyText)/2 : len(greedyText)/2+3]
		r := completion(t, oa.CompletionNewParams{Model: "tiny", Prompt: oa.CompletionNewParamsPromptUnion{OfString: oa.String(prompt)},
			MaxTokens: oa.Int(12), Temperature: oa.Float(0), Stop: oa.CompletionNewParamsStopUnion{OfString: oa.String(stop)}},
			option.WithJSONSet("ignore_eos", true))
		want := greedyText[:strings.Index(greedyText, stop)]
		if r.Choices[0].Text != want || r.Choices[0].FinishReason != "stop" {
			t.Fatalf("text %q finish %q, want %q before stop %q", r.Choices[0].Text, r.Choices[0].FinishReason, want, stop)
		}
	})

	t.Run("completions logprobs", func(t *testing.T) {
		r := completion(t, oa.CompletionNewParams{Model: "tiny", Prompt: oa.CompletionNewParamsPromptUnion{OfString: oa.String(prompt)},
			MaxTokens: oa.Int(5), Temperature: oa.Float(0), Logprobs: oa.Int(2)}, option.WithJSONSet("ignore_eos", true))
		lp := r.Choices[0].Logprobs
		if len(lp.Tokens) != 5 || len(lp.TokenLogprobs) != 5 || len(lp.TopLogprobs) != 5 || len(lp.TextOffset) != 5 {
			t.Fatalf("logprobs %+v", lp)
		}
		if strings.Join(lp.Tokens, "") != r.Choices[0].Text || lp.TextOffset[0] != 0 {
			t.Fatalf("tokens %q do not spell %q", lp.Tokens, r.Choices[0].Text)
		}
		for i, top := range lp.TopLogprobs {
			best := -1e9
			for _, v := range top {
				best = max(best, v)
			}
			if len(top) == 0 || len(top) > 2 || lp.TokenLogprobs[i] > 0 || best < lp.TokenLogprobs[i]-1e-9 {
				t.Fatalf("position %d: chosen %v, top %v (greedy picks the best)", i, lp.TokenLogprobs[i], top)
			}
		}
	})

	chatParams := func(content string, maxTokens int64) oa.ChatCompletionNewParams {
		return oa.ChatCompletionNewParams{Model: "tiny", MaxCompletionTokens: oa.Int(maxTokens),
			Messages: []oa.ChatCompletionMessageParamUnion{oa.SystemMessage("Be brief."), oa.UserMessage(content)}}
	}

	var chatGreedy string
	t.Run("chat completion, not streamed", func(t *testing.T) {
		p := chatParams("Tell me a story.", 10)
		p.Temperature = oa.Float(0)
		r, err := c.Chat.Completions.New(ctxT(t), p, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Choices) != 1 || r.Choices[0].Message.Role != "assistant" || r.Choices[0].Message.Content == "" || r.Choices[0].FinishReason != "length" {
			t.Fatalf("choices %+v", r.Choices)
		}
		// The prompt is the template's rendering: BOS once, then the text.
		want := len(h.tok.Encode("<<SYS>>Be brief.<</SYS>>[INST] Tell me a story. [/INST]", tokEncodeBOS)) // BOS from the template
		if int(r.Usage.PromptTokens) != want {
			t.Fatalf("prompt tokens %d, want %d (template rendering with one BOS)", r.Usage.PromptTokens, want)
		}
		if r.Object != "chat.completion" || !strings.HasPrefix(r.ID, "chatcmpl-") {
			t.Fatalf("envelope %+v", r)
		}
		chatGreedy = r.Choices[0].Message.Content
	})

	t.Run("chat streamed equals not streamed", func(t *testing.T) {
		p := chatParams("Tell me a story.", 10)
		p.Temperature = oa.Float(0)
		p.StreamOptions = oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)}
		st := c.Chat.Completions.NewStreaming(ctxT(t), p, option.WithJSONSet("ignore_eos", true))
		var acc oa.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != chatGreedy || acc.Choices[0].FinishReason != "length" {
			t.Fatalf("accumulated %+v, want %q", acc.Choices, chatGreedy)
		}
		if acc.Usage.CompletionTokens != 10 {
			t.Fatalf("usage %+v", acc.Usage)
		}
	})

	t.Run("n=2 and seed reproducibility", func(t *testing.T) {
		run := func(seed int64) []string {
			p := chatParams("Say something.", 8)
			p.N, p.Seed, p.Temperature = oa.Int(2), oa.Int(seed), oa.Float(1)
			r, err := c.Chat.Completions.New(ctxT(t), p, option.WithJSONSet("ignore_eos", true))
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Choices) != 2 || r.Choices[0].Index != 0 || r.Choices[1].Index != 1 || r.Usage.CompletionTokens != 16 {
				t.Fatalf("n=2: %+v usage %+v", r.Choices, r.Usage)
			}
			return []string{r.Choices[0].Message.Content, r.Choices[1].Message.Content}
		}
		a, b := run(42), run(42)
		if !slices.Equal(a, b) {
			t.Fatalf("same seed, different outputs: %q vs %q", a, b)
		}
		differs := false
		for _, seed := range []int64{43, 44, 45} {
			if !slices.Equal(run(seed), a) {
				differs = true
			}
		}
		if !differs {
			t.Fatal("three other seeds all reproduced seed 42's outputs: the seed is not used")
		}
	})

	t.Run("chat logprobs", func(t *testing.T) {
		p := chatParams("Hi.", 4)
		p.Temperature, p.Logprobs, p.TopLogprobs = oa.Float(0), oa.Bool(true), oa.Int(3)
		r, err := c.Chat.Completions.New(ctxT(t), p, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatal(err)
		}
		lp := r.Choices[0].Logprobs.Content
		if len(lp) != 4 {
			t.Fatalf("%d logprob entries, want 4", len(lp))
		}
		var text strings.Builder
		for _, e := range lp {
			text.WriteString(e.Token)
			if len(e.TopLogprobs) != 3 || e.Logprob > 0 || e.TopLogprobs[0].Logprob < e.Logprob-1e-9 || len(e.Bytes) == 0 {
				t.Fatalf("entry %+v", e)
			}
		}
		if text.String() != r.Choices[0].Message.Content {
			t.Fatalf("logprob tokens spell %q, content %q", text.String(), r.Choices[0].Message.Content)
		}
	})

	status := func(t *testing.T, err error) *oa.Error {
		t.Helper()
		var ae *oa.Error
		if !errors.As(err, &ae) {
			t.Fatalf("error %v is not an API error", err)
		}
		return ae
	}
	t.Run("errors: 400 invalid, 400 unsupported, 404 model, 413 body", func(t *testing.T) {
		p := chatParams("x", 2)
		p.Temperature = oa.Float(-1)
		_, err := c.Chat.Completions.New(ctxT(t), p)
		if ae := status(t, err); ae.StatusCode != 400 || ae.Code != "invalid_request" || ae.Type != "invalid_request_error" {
			t.Fatalf("negative temperature: %d %q %q %q", ae.StatusCode, ae.Code, ae.Type, ae.Message)
		}
		p = chatParams("x", 2)
		p.Tools = []oa.ChatCompletionToolUnionParam{oa.ChatCompletionFunctionTool(oa.FunctionDefinitionParam{Name: "f"})}
		_, err = c.Chat.Completions.New(ctxT(t), p)
		if ae := status(t, err); ae.StatusCode != 400 || ae.Code != "unsupported_feature" || ae.Param != "tools" {
			t.Fatalf("tools: %d %q %q", ae.StatusCode, ae.Code, ae.Param)
		}
		p = chatParams("x", 2)
		p.Model = "no-such-model"
		_, err = c.Chat.Completions.New(ctxT(t), p)
		if ae := status(t, err); ae.StatusCode != 404 || ae.Code != "model_not_found" {
			t.Fatalf("unknown model: %d %q", ae.StatusCode, ae.Code)
		}
		_, err = c.Completions.New(ctxT(t), oa.CompletionNewParams{Model: "tiny",
			Prompt: oa.CompletionNewParamsPromptUnion{OfString: oa.String(strings.Repeat("a", 70<<10))}})
		if ae := status(t, err); ae.StatusCode != 413 || ae.Code != "payload_too_large" {
			t.Fatalf("big body: %d %q", ae.StatusCode, ae.Code)
		}
		_, err = c.Completions.New(ctxT(t), oa.CompletionNewParams{Model: "tiny", MaxTokens: oa.Int(4000),
			Prompt: oa.CompletionNewParamsPromptUnion{OfString: oa.String("hello")}})
		if ae := status(t, err); ae.StatusCode != 400 || ae.Code != "context_length_exceeded" {
			t.Fatalf("beyond the context: %d %q %q", ae.StatusCode, ae.Code, ae.Message)
		}
	})

	t.Run("429 overloaded with Retry-After", func(t *testing.T) {
		release := h.model.hold()
		defer release()
		ctx, cancel := context.WithCancel(ctxT(t))
		defer cancel()
		// One running (its step is held in Forward), one waiting (max_waiting
		// 1): the next is refused.
		p := oa.CompletionNewParams{Model: "tiny", Prompt: oa.CompletionNewParamsPromptUnion{OfString: oa.String("hold")}, MaxTokens: oa.Int(2)}
		before := h.e.Stats().Requests
		for i := range 2 {
			go func() { _, _ = c.Completions.New(ctx, p) }()
			eventually(t, "request admitted", func() bool { return h.e.Stats().Requests >= before+uint64(i)+1 })
		}
		var resp *http.Response
		_, err := c.Completions.New(ctxT(t), p, option.WithResponseInto(&resp))
		ae := status(t, err)
		if ae.StatusCode != 429 || ae.Code != "overloaded" || ae.Response.Header.Get("Retry-After") == "" {
			t.Fatalf("overloaded: %d %q Retry-After %q", ae.StatusCode, ae.Code, ae.Response.Header.Get("Retry-After"))
		}
		cancel()
		release()
		h.idle(t, false)
	})

	t.Run("client disconnect cancels the generation within a step", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctxT(t))
		defer cancel()
		p := chatParams("A long story, please.", 1000)
		st := c.Chat.Completions.NewStreaming(ctx, p, option.WithJSONSet("ignore_eos", true))
		got := 0
		for got < 3 && st.Next() {
			for _, ch := range st.Current().Choices {
				if ch.Delta.Content != "" {
					got++
				}
			}
		}
		if got < 3 {
			t.Fatalf("only %d deltas before the stream ended: %v", got, st.Err())
		}
		// Hold the model so the sequence cannot race to its end, leave,
		// then let the step loop run again.
		release := h.model.hold()
		held := h.e.Stats().GenerationTokens
		cancel()
		_ = st.Close()
		time.Sleep(50 * time.Millisecond) // the server notices the closed connection
		release()
		h.idle(t, false)
		if n := h.e.Stats().GenerationTokens - held; n > 2 {
			t.Fatalf("%d tokens generated after the client left (want at most the step in flight)", n)
		}
	})

	t.Run("request metrics carry the route", func(t *testing.T) {
		resp, err := http.Get(h.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(raw)
		for _, want := range []string{
			`oengine:request_success_total{finished_reason="length",model_name="tiny",route="/v1/completions"}`,
			`oengine:request_success_total{finished_reason="length",model_name="tiny",route="/v1/chat/completions"}`,
			`oengine:request_success_total{finished_reason="stop",model_name="tiny",route="/v1/completions"} 1`,
			`oengine:request_failure_total{code="CANCELLED",model_name="tiny",route="/v1/chat/completions"} 1`,
			`oengine:time_to_first_token_seconds_count{model_name="tiny",route="/v1/chat/completions"}`,
			`oengine:e2e_request_latency_seconds_count{model_name="tiny",route="/v1/completions"}`,
			`oengine:request_rejected_total{reason="MODEL_NOT_FOUND"} 1`,
			`oengine:request_rejected_total{reason="OVERLOADED"} 1`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
	})

	t.Run("503 while draining", func(t *testing.T) {
		h.s.Drain()
		_, err := c.Chat.Completions.New(ctxT(t), chatParams("x", 2))
		ae := status(t, err)
		if ae.StatusCode != 503 || ae.Code != "draining" || ae.Response.Header.Get("Retry-After") == "" {
			t.Fatalf("draining: %d %q", ae.StatusCode, ae.Code)
		}
	})
}

// tokEncodeBOS encodes with the vocabulary's BOS rule.
var tokEncodeBOS = tokenizer.EncodeOptions{AddSpecial: true}
