package sse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"oengine/server"
	"strconv"
	"unicode/utf8"
)

// sseError is an SSE route error: the HTTP status before the stream starts
// and the code of docs/design.md §1's HTTP column (also the `error` event's
// code after it started).
type sseError struct {
	status    int
	code      string
	msg       string
	retryable bool
}

func sseErrorf(status int, code, format string, args ...any) *sseError {
	return &sseError{status: status, code: code, msg: "server: " + fmt.Sprintf(format, args...),
		retryable: status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable}
}

// sseFrom converts a classified error.
func sseFrom(f server.Failure) *sseError {
	return &sseError{status: f.Status, code: f.Code, msg: f.Message, retryable: f.Retryable}
}

// errorBody is the JSON body of every error response.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// reject answers an error before the stream started.
func (rt *sseRoute) reject(w http.ResponseWriter, e *sseError) {
	if e.status == http.StatusTooManyRequests || e.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, e.status, errorBody{Error: errorDetail{Code: e.code, Message: e.msg}})
	rt.metrics.outcome(e.code)
}

// readPrompt reads the body (at most MaxBodyBytes; never past the cap)
// and returns the prompt of {"prompt": string}.
func readPrompt(w http.ResponseWriter, r *http.Request) (string, *sseError) {
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		return "", sseErrorf(http.StatusUnsupportedMediaType, "unsupported_media_type",
			"Content-Type %q: the body must be application/json", ct)
	}
	if r.ContentLength > MaxBodyBytes {
		return "", sseErrorf(http.StatusRequestEntityTooLarge, "payload_too_large",
			"request body of %d bytes exceeds %d bytes", r.ContentLength, MaxBodyBytes)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return "", sseErrorf(http.StatusRequestEntityTooLarge, "payload_too_large",
				"request body exceeds %d bytes", MaxBodyBytes)
		}
		return "", sseErrorf(http.StatusBadRequest, "invalid_request", "reading the body: %v", err)
	}
	prompt, serr := parsePrompt(body)
	if serr != nil {
		return "", serr
	}
	switch {
	case prompt == "":
		return "", sseErrorf(http.StatusBadRequest, "invalid_request", "prompt is empty")
	case len(prompt) > MaxPromptBytes:
		return "", sseErrorf(http.StatusRequestEntityTooLarge, "payload_too_large",
			"prompt is %d bytes, the limit is %d", len(prompt), MaxPromptBytes)
	}
	return prompt, nil
}

// parsePrompt accepts exactly one JSON object with one member "prompt"
// whose value is a string (names are case-sensitive; no other member, no
// duplicate, nothing after the object). The body must be valid UTF-8 and
// its \u escapes must not encode unpaired surrogates (encoding/json would
// silently turn both into U+FFFD).
func parsePrompt(body []byte) (string, *sseError) {
	bad := func(format string, args ...any) (string, *sseError) {
		return "", sseErrorf(http.StatusBadRequest, "invalid_request", format, args...)
	}
	if !utf8.Valid(body) {
		return bad("request body is not valid UTF-8")
	}
	if err := checkSurrogates(body); err != nil {
		return bad("%v", err)
	}
	const shape = `the body must be the JSON object {"prompt": string}`
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return bad("malformed JSON: %v", err)
	}
	if tok != json.Delim('{') {
		return bad("%s", shape)
	}
	var prompt *string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return bad("malformed JSON: %v", err)
		}
		key, _ := k.(string)
		if key != "prompt" {
			return bad("unknown field %q: %s (the model and generation settings are not client-selectable)", key, shape)
		}
		if prompt != nil {
			return bad("duplicate field \"prompt\"")
		}
		v, err := dec.Token()
		if err != nil {
			return bad("malformed JSON: %v", err)
		}
		s, ok := v.(string)
		if !ok {
			return bad("prompt must be a string")
		}
		prompt = &s
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return bad("malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("malformed JSON: data after the object")
	}
	if prompt == nil {
		return bad("prompt is required: %s", shape)
	}
	return *prompt, nil
}

// checkSurrogates rejects \u escapes that encode an unpaired UTF-16
// surrogate. A backslash occurs only inside strings in valid JSON, so the
// scan needs no string tracking (malformed JSON fails later anyway).
func checkSurrogates(b []byte) error {
	hex4 := func(i int) (int, bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
		return int(v), err == nil
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		v, ok := hex4(i)
		if !ok {
			i++ // skip the escaped character
			continue
		}
		switch {
		case v >= 0xD800 && v < 0xDC00:
			lo, ok := hex4(i + 6)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Errorf("unpaired surrogate \\u%04x in a JSON string", v)
			}
			i += 11
		case v >= 0xDC00 && v <= 0xDFFF:
			return fmt.Errorf("unpaired surrogate \\u%04x in a JSON string", v)
		default:
			i += 5
		}
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// isJSON reports a Content-Type of application/json (parameters such as
// charset=utf-8 allowed).
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}
