package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"testing"
)

// The tiny reference models have random weights and tied embeddings: they
// repeat the token they just saw (their greedy references are runs of one
// token). Inside an unbounded repetition of the grammar (a string without
// maxLength, digits of a number, items of an array without maxItems) such
// a model rarely leaves the loop, and nearly every output would end at
// max_tokens. So generation uses a capped copy of each schema: every
// unbounded repetition gets a bound. A capped schema accepts a subset of
// what the original accepts, so an output of the capped schema must still
// validate against the original, and that is what the test checks (with
// the untouched schema file). The caps:
//   - a string with no maxLength, pattern, enum or const: maxLength
//     max(minLength, capString);
//   - an integer with no upper (lower) bound: one capRange away from the
//     other bound, or from 0;
//   - "number": "integer" bounded as above (an integer is a number; the
//     number syntax itself is covered by the grammar package's random
//     walks);
//   - an array with no maxItems: maxItems max(minItems, capItems).
const (
	capString = 12
	capRange  = 9999
	capItems  = 3
)

// omap is a JSON object that keeps its key order (CompileSchema produces
// properties in schema order).
type omap struct {
	keys []string
	vals map[string]any
}

func (m *omap) get(k string) (any, bool) { v, ok := m.vals[k]; return v, ok }

func (m *omap) set(k string, v any) {
	if _, ok := m.vals[k]; !ok {
		m.keys = append(m.keys, k)
	}
	m.vals[k] = v
}

func decodeOrdered(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the schema")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		m := &omap{vals: map[string]any{}}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			m.set(k.(string), v)
		}
		_, err := dec.Token()
		return m, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return tok, nil
}

func encodeOrdered(buf *bytes.Buffer, v any) {
	switch v := v.(type) {
	case *omap:
		buf.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			buf.Write(kb)
			buf.WriteByte(':')
			encodeOrdered(buf, v.vals[k])
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			encodeOrdered(buf, x)
		}
		buf.WriteByte(']')
	default:
		b, _ := json.Marshal(v)
		buf.Write(b)
	}
}

// capSchema returns the capped copy of a schema (see the caps above).
func capSchema(schema []byte) ([]byte, error) {
	root, err := decodeOrdered(schema)
	if err != nil {
		return nil, err
	}
	capNode(root)
	var buf bytes.Buffer
	encodeOrdered(&buf, root)
	return buf.Bytes(), nil
}

// capNode caps one subschema and the subschemas below it. Values of
// enum, const, default and examples are data, not schemas: left alone.
func capNode(v any) {
	s, ok := v.(*omap)
	if !ok {
		return
	}
	types := typeNames(s)
	has := func(k string) bool { _, ok := s.get(k); return ok }
	if !has("enum") && !has("const") && !has("$ref") {
		if slices.Contains(types, "number") {
			repl := []any{}
			for _, t := range types {
				if t == "number" {
					t = "integer"
				}
				if !slices.Contains(repl, any(t)) {
					repl = append(repl, t)
				}
			}
			if len(repl) == 1 {
				s.set("type", repl[0])
			} else {
				s.set("type", repl)
			}
			types = typeNames(s)
		}
		if slices.Contains(types, "string") && !has("maxLength") && !has("pattern") {
			s.set("maxLength", json.Number(strconv.FormatInt(max(intKey(s, "minLength", 0), capString), 10)))
		}
		if slices.Contains(types, "integer") {
			lo, hasLo := bound(s, "minimum", "exclusiveMinimum", +1)
			hi, hasHi := bound(s, "maximum", "exclusiveMaximum", -1)
			switch {
			case !hasLo && !hasHi:
				s.set("minimum", json.Number(strconv.Itoa(-capRange)))
				s.set("maximum", json.Number(strconv.Itoa(capRange)))
			case !hasHi:
				s.set("maximum", json.Number(strconv.FormatInt(lo+capRange, 10)))
			case !hasLo:
				s.set("minimum", json.Number(strconv.FormatInt(hi-capRange, 10)))
			}
		}
		if slices.Contains(types, "array") && !has("maxItems") {
			s.set("maxItems", json.Number(strconv.FormatInt(max(intKey(s, "minItems", 0), capItems), 10)))
		}
	}
	for _, k := range []string{"properties", "$defs", "definitions"} {
		if m, ok := s.vals[k].(*omap); ok {
			for _, name := range m.keys {
				capNode(m.vals[name])
			}
		}
	}
	capNode(s.vals["items"])
	if subs, ok := s.vals["anyOf"].([]any); ok {
		for _, x := range subs {
			capNode(x)
		}
	}
}

func typeNames(s *omap) []string {
	switch t := s.vals["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if name, ok := x.(string); ok {
				out = append(out, name)
			}
		}
		return out
	}
	return nil
}

func intKey(s *omap, k string, def int64) int64 {
	if n, ok := s.vals[k].(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			return i
		}
	}
	return def
}

// bound is the tightest integer bound of an inclusive and an exclusive
// keyword (step +1 for lower bounds, -1 for upper ones).
func bound(s *omap, incl, excl string, step int64) (int64, bool) {
	var b int64
	found := false
	if n, ok := s.vals[incl].(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			b, found = i, true
		}
	}
	if n, ok := s.vals[excl].(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			i += step
			if !found || (step > 0 && i > b) || (step < 0 && i < b) {
				b = i
			}
			found = true
		}
	}
	return b, found
}

// TestCapSchema: the caps bound every unbounded repetition and leave
// bounded ones, data (enum, const) and key order alone.
func TestCapSchema(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"type":"string"}`, `{"type":"string","maxLength":12}`},
		{`{"type":"string","minLength":20}`, `{"type":"string","minLength":20,"maxLength":20}`},
		{`{"type":"string","maxLength":3}`, `{"type":"string","maxLength":3}`},
		{`{"type":"string","pattern":"^a$"}`, `{"type":"string","pattern":"^a$"}`},
		{`{"type":"integer","minimum":5}`, `{"type":"integer","minimum":5,"maximum":10004}`},
		{`{"type":"integer","exclusiveMaximum":0}`, `{"type":"integer","exclusiveMaximum":0,"minimum":-10000}`},
		{`{"type":["number","null"]}`, `{"type":["integer","null"],"minimum":-9999,"maximum":9999}`},
		{`{"type":"array","minItems":5,"items":{"type":"boolean"}}`, `{"type":"array","minItems":5,"items":{"type":"boolean"},"maxItems":5}`},
		{`{"z":{"enum":[{"type":"string"}]},"properties":{"b":{"type":"string"},"a":{"const":"x"}},"type":"object"}`,
			`{"z":{"enum":[{"type":"string"}]},"properties":{"b":{"type":"string","maxLength":12},"a":{"const":"x"}},"type":"object"}`},
		{`{"$defs":{"d":{"type":"array","items":{"anyOf":[{"type":"number"}]}}}}`,
			`{"$defs":{"d":{"type":"array","items":{"anyOf":[{"type":"integer","minimum":-9999,"maximum":9999}]},"maxItems":3}}}`},
	} {
		got, err := capSchema([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("capSchema(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
}
