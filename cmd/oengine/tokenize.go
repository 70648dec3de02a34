package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"oengine/model/tokenizer"
)

func init() {
	register("tokenize", "tokenize text with a model's tokenizer", runTokenize)
	helpTable["tokenize"] = cmdHelp{synopsis: "[MODEL.gguf] (--text TEXT | --file FILE) [flags]", modelArg: true,
		examples: []string{
			`oengine tokenize m.gguf --text "Hello world" --json`,
			`oengine tokenize --model m.gguf --file prompt.txt --no-special`,
		}}
}

// tokenizeConfig is the parsed command line of tokenize.
type tokenizeConfig struct {
	model, text, file               string
	asJSON, noSpecial, parseSpecial bool
}

func parseTokenize(args []string) (*tokenizeConfig, error) {
	c := &tokenizeConfig{}
	fs := newFlags("tokenize", nil)
	fs.StringVar(&c.model, "model", "", "GGUF `file` (default: the built-in synthetic model)")
	fs.StringVar(&c.text, "text", "", "`text` to tokenize")
	fs.StringVar(&c.file, "file", "", "read the text from this `file` (bytes kept exactly)")
	fs.BoolVar(&c.asJSON, "json", false, "print a JSON array of token ids")
	fs.BoolVar(&c.noSpecial, "no-special", false, "add no BOS/EOS (as llama.cpp's tokenizer vectors are written)")
	fs.BoolVar(&c.parseSpecial, "parse-special", false, "recognise special-token texts in the input")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if (c.text == "") == (c.file == "") {
		return nil, errors.New("tokenize: give exactly one of --text or --file")
	}
	return c, nil
}

func runTokenize(args []string, stdout, stderr io.Writer) error {
	c, err := parseTokenize(args)
	if err != nil {
		return err
	}
	return c.run(stdout, stderr)
}

func (c *tokenizeConfig) run(stdout, stderr io.Writer) error {
	input := c.text
	if c.file != "" {
		b, err := os.ReadFile(c.file)
		if err != nil {
			return fmt.Errorf("tokenize: %w", err)
		}
		input = string(b)
	}
	lf, err := openModelFile(c.model, true, stderr)
	if err != nil {
		return err
	}
	defer lf.File.Close()
	tok, err := tokenizer.FromGGUF(lf.File)
	if err != nil {
		return err
	}
	ids := tok.Encode(input, tokenizer.EncodeOptions{AddSpecial: !c.noSpecial, ParseSpecial: c.parseSpecial})
	if c.asJSON {
		if ids == nil {
			ids = []int32{}
		}
		b, _ := json.Marshal(ids)
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	if lf.Label == "synthetic" {
		fmt.Fprintln(stdout, "# model: synthetic (built-in default)")
	}
	var sb strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&sb, "%6d  %q\n", id, string(tok.Piece(id)))
	}
	fmt.Fprint(stdout, sb.String())
	fmt.Fprintf(stdout, "%d tokens\n", len(ids))
	return nil
}
