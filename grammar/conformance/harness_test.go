// Package conformance holds the JSON Schema conformance tests of guided
// decoding (docs/api.md, "Structured outputs core"): public schemas from
// testdata/ are compiled, generated from on the tiny reference models at
// temperature 1 through the engine, and every completed output is checked
// by an independent validator. It has no code outside its tests.
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"oengine/engine"
	"oengine/grammar"
	"oengine/internal/refdata"
	"oengine/loader"
	"oengine/model/gguf"
)

// schemaFile is one schema of testdata/positive or testdata/negative.
type schemaFile struct {
	name string // file name without .json
	text []byte
}

func readSchemas(t testing.TB, dir string) []schemaFile {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []schemaFile
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, schemaFile{name: strings.TrimSuffix(filepath.Base(p), ".json"), text: b})
	}
	return out
}

// validator compiles a schema with santhosh-tekuri/jsonschema, a validator
// written outside this project.
func validator(t testing.TB, s schemaFile) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s.text))
	if err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	c := jsonschema.NewCompiler()
	url := "mem://" + s.name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("%s: validator: %v", s.name, err)
	}
	return sch
}

// validatorSchema is a compiled validator schema.
type validatorSchema interface{ Validate(any) error }

// validate parses out with encoding/json and checks it against sch.
func validate(sch validatorSchema, out string) error {
	if !json.Valid([]byte(out)) {
		return errors.New("not JSON (encoding/json)")
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// tinyModel is one reference model loaded with its engine, and the token
// vocabulary its constraints are built over.
type tinyModel struct {
	name  string
	m     *loader.Model
	vocab *grammar.Vocab
}

func loadTiny(t testing.TB, name string, cfg engine.Config) *tinyModel {
	t.Helper()
	path := filepath.Join(refdata.Dir(t, "models"), name+".gguf")
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := loader.Load(f, loader.Options{Threads: 2, Engine: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	pieces := make([][]byte, m.Tokenizer.VocabSize())
	for id := range pieces {
		pieces[id] = m.Tokenizer.Piece(int32(id))
	}
	return &tinyModel{name: name, m: m, vocab: grammar.NewVocab(pieces, m.Tokenizer.EOGTokens())}
}

// output is one generated output: its text and how it finished.
type output struct {
	text   string
	tokens []int32
	finish *engine.Finish
	err    *engine.Error
	// margins: top-1 minus top-2 logprob before each token, when the
	// request asked for two logprob candidates.
	margins []float64
}

// generate runs req and collects its outputs (N of them).
func generate(ctx context.Context, e *engine.Engine, req engine.Request) ([]output, error) {
	s, err := e.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	outs := make([]output, max(req.N, 1))
	for {
		ev, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			return outs, nil
		}
		if err != nil {
			return outs, err
		}
		switch ev.Kind {
		case engine.EventTokens:
			outs[ev.Output].text += ev.Text
			for _, tk := range ev.Tokens {
				o := &outs[ev.Output]
				o.tokens = append(o.tokens, tk.ID)
				if lp := tk.Logprobs; lp != nil && len(lp.Candidates) >= 2 {
					o.margins = append(o.margins, lp.Candidates[0].Logprob-lp.Candidates[1].Logprob)
				}
			}
		case engine.EventFinished:
			outs[ev.Output].finish = ev.Finish
		case engine.EventError:
			for i := range outs {
				outs[i].err = ev.Err
			}
		}
	}
}

// parallel runs f(0..n-1) on at most width goroutines.
func parallel(n, width int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(width, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

func ptr[T any](v T) *T { return &v }

func withTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
