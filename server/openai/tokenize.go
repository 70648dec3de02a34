package openai

import (
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"

	"oengine/model/chat"
	"oengine/model/tokenizer"
)

// tokenizeRequest is POST /tokenize in vLLM's form (prompt, or messages
// rendered by the chat template) or llama.cpp's server's (content)
// (docs/api.md, "Tokenize and detokenize").
type tokenizeRequest struct {
	Model string `json:"model"`
	// vLLM's form.
	Prompt              *string         `json:"prompt"`
	Messages            []chatMessage   `json:"messages"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
	AddSpecialTokens    *bool           `json:"add_special_tokens"`
	ReturnTokenStrs     bool            `json:"return_token_strs"`
	ChatTemplateKwargs  json.RawMessage `json:"chat_template_kwargs"`
	Tools               json.RawMessage `json:"tools"`
	// llama.cpp's form.
	Content      *string `json:"content"`
	AddSpecial   bool    `json:"add_special"`
	ParseSpecial *bool   `json:"parse_special"`
	WithPieces   bool    `json:"with_pieces"`
}

func (e *tokenizeRequest) modelName() string { return e.Model }

// vllmTokens is vLLM's tokenize reply.
type vllmTokens struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []int32  `json:"tokens"`
	TokenStrs   []string `json:"token_strs"`
}

// tokenPiece is one token of llama.cpp's tokenize reply with pieces: the
// piece as a string, or its bytes when they are not valid UTF-8 (a part of
// a character).
type tokenPiece struct {
	ID    int32 `json:"id"`
	Piece any   `json:"piece"`
}

// tokenize serves POST /tokenize: the model's own tokens of a text (the
// BOS/EOS rule with add_special_tokens or add_special, control-token texts
// recognised unless parse_special is false) or of a conversation rendered
// by the chat template exactly as /v1/chat/completions renders it.
func (a *api) tokenize(w http.ResponseWriter, r *http.Request) {
	var req tokenizeRequest
	ms, ok := a.begin(w, r, &req)
	if !ok {
		return
	}
	tok, aerr := tokenizerOf(ms)
	forms := 0
	for _, set := range []bool{req.Prompt != nil, req.Messages != nil, req.Content != nil} {
		if set {
			forms++
		}
	}
	switch {
	case aerr != nil:
		a.reject(w, aerr)
		return
	case forms != 1:
		a.reject(w, invalid("", "give exactly one of prompt, messages (vLLM's form) or content (llama.cpp's)"))
		return
	case req.Content != nil:
		ids := tok.Encode(*req.Content, tokenizer.EncodeOptions{AddSpecial: req.AddSpecial,
			ParseSpecial: req.ParseSpecial == nil || *req.ParseSpecial})
		if !req.WithPieces {
			writeJSON(w, http.StatusOK, map[string][]int32{"tokens": nonNil(ids)})
			return
		}
		pieces := make([]tokenPiece, len(ids))
		for i, id := range ids {
			p := tok.PieceSpecial(id)
			pieces[i] = tokenPiece{ID: id, Piece: string(p)}
			if !utf8.Valid(p) {
				bs := make([]int, len(p))
				for j, b := range p {
					bs[j] = int(b)
				}
				pieces[i].Piece = bs
			}
		}
		writeJSON(w, http.StatusOK, map[string][]tokenPiece{"tokens": pieces})
		return
	}
	var ids []int32
	if req.Prompt != nil {
		ids = tok.Encode(*req.Prompt, tokenizer.EncodeOptions{
			AddSpecial: req.AddSpecialTokens == nil || *req.AddSpecialTokens, ParseSpecial: true})
	} else {
		if ids, aerr = a.renderChat(ms, &req); aerr != nil {
			a.reject(w, aerr)
			return
		}
	}
	rep := vllmTokens{Count: len(ids), MaxModelLen: ms.m.Backend.Limits().ContextLen, Tokens: nonNil(ids)}
	if req.ReturnTokenStrs {
		rep.TokenStrs = make([]string, len(ids))
		for i, id := range ids {
			rep.TokenStrs[i] = tok.Token(id)
		}
	}
	writeJSON(w, http.StatusOK, rep)
}

// renderChat is the prompt tokens of req's messages as /v1/chat/completions
// renders them (tools offered, add_generation_prompt true by default).
func (a *api) renderChat(ms *modelState, req *tokenizeRequest) ([]int32, *apiError) {
	if ms.enc == nil { // a model without a tokenizer (prepare)
		return nil, unsupported("model", "model %q has no tokenizer", ms.m.Name)
	}
	msgs, aerr := messages(req.Messages)
	if aerr != nil {
		return nil, aerr
	}
	kw, err := chat.DecodeKwargs(req.ChatTemplateKwargs)
	if err != nil {
		return nil, invalid("chat_template_kwargs", "%v", err)
	}
	plan, aerr := planTools(ms.m, req.Tools, nil, ms.harmony)
	if aerr != nil {
		return nil, aerr
	}
	gen := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
	prompt, err := ms.enc.Render(msgs, chat.Options{AddGenerationPrompt: gen, Kwargs: kw, Tools: plan.render})
	if err != nil {
		return nil, invalid("messages", "chat template: %v", err)
	}
	return prompt.Tokens, nil
}

// detokenizeRequest is POST /detokenize (vLLM's and llama.cpp's form).
type detokenizeRequest struct {
	Model  string  `json:"model"`
	Tokens []int32 `json:"tokens"`
}

func (e *detokenizeRequest) modelName() string { return e.Model }

// detokenize serves POST /detokenize: the text of the tokens, control
// tokens as their text, bytes that do not form UTF-8 as U+FFFD; the reply
// carries it as vLLM's prompt and as llama.cpp's content.
func (a *api) detokenize(w http.ResponseWriter, r *http.Request) {
	var req detokenizeRequest
	ms, ok := a.begin(w, r, &req)
	if !ok {
		return
	}
	tok, aerr := tokenizerOf(ms)
	if aerr != nil {
		a.reject(w, aerr)
		return
	}
	for i, id := range req.Tokens {
		if id < 0 || int(id) >= tok.VocabSize() {
			a.reject(w, invalid("tokens", "tokens[%d]: id %d is outside the vocabulary (0 to %d)", i, id, tok.VocabSize()-1))
			return
		}
	}
	text := strings.ToValidUTF8(string(tok.DecodeSpecial(req.Tokens)), "\uFFFD")
	writeJSON(w, http.StatusOK, map[string]string{"prompt": text, "content": text})
}

// tokenizerOf is the model's tokenizer, or the refusal of a model without
// one.
func tokenizerOf(ms *modelState) (*tokenizer.Tokenizer, *apiError) {
	if ms.m.Tokenizer == nil {
		return nil, unsupported("model", "model %q has no tokenizer", ms.m.Name)
	}
	return ms.m.Tokenizer, nil
}

// nonNil is ids, or an empty list for none (JSON [] rather than null).
func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}
