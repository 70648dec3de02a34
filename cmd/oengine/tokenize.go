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
}

func runTokenize(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tokenize", stderr)
	model := fs.String("model", "", "GGUF file (default: the built-in synthetic model)")
	text := fs.String("text", "", "text to tokenize")
	file := fs.String("file", "", "read the text from this file (bytes kept exactly)")
	asJSON := fs.Bool("json", false, "print a JSON array of token ids")
	noSpecial := fs.Bool("no-special", false, "add no BOS/EOS (as llama.cpp's tokenizer vectors are written)")
	parseSpecial := fs.Bool("parse-special", false, "recognise special-token texts in the input")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*text == "") == (*file == "") {
		return errors.New("tokenize: give exactly one of --text or --file")
	}
	input := *text
	if *file != "" {
		b, err := os.ReadFile(*file)
		if err != nil {
			return err
		}
		input = string(b)
	}
	lf, err := openModelFile(*model, true, stderr)
	if err != nil {
		return err
	}
	defer lf.File.Close()
	tok, err := tokenizer.FromGGUF(lf.File)
	if err != nil {
		return err
	}
	ids := tok.Encode(input, tokenizer.EncodeOptions{AddSpecial: !*noSpecial, ParseSpecial: *parseSpecial})
	if *asJSON {
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
