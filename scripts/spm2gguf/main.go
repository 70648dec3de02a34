// Command spm2gguf writes a SentencePiece unigram model (a .model file) as
// a vocabulary-only GGUF file in the form llama.cpp's converter gives T5's
// and XLM-R's tokenizers (tokenizer.ggml.model "t5": pieces, scores, types,
// the normalizer's precompiled_charsmap and flags), so that llama.cpp and
// oengine can tokenize with it side by side. It also prints the model's
// self-test samples (SentencePiece's own encodings), one per line as
// "input<TAB>pieces", when the model has them.
//
// Usage: go run ./scripts/spm2gguf IN.model OUT.gguf [xlmr]
//
// With xlmr the vocabulary adds BOS as well as EOS to an input, as
// XLM-RoBERTa's GGUFs (bge-m3 and the like) say; without, EOS only, as T5.
package main

import (
	"errors"
	"fmt"
	"math"
	"os"

	"google.golang.org/protobuf/encoding/protowire"

	"oengine/model/gguf"
)

// piece is a ModelProto.SentencePiece.
type piece struct {
	text  string
	score float32
	typ   int32 // NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4, UNUSED 5, BYTE 6
}

// model is what the GGUF needs of a ModelProto.
type model struct {
	pieces                                      []piece
	modelType                                   int32 // TrainerSpec.model_type: UNIGRAM 1
	unk, bos, eos, pad                          int32
	charsmap                                    []byte
	addDummyPrefix, removeExtraWS, escapeSpaces bool
	samples                                     [][2]string
}

func main() {
	if len(os.Args) < 3 || len(os.Args) > 4 || len(os.Args) == 4 && os.Args[3] != "xlmr" {
		fmt.Fprintln(os.Stderr, "usage: spm2gguf IN.model OUT.gguf [xlmr]")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], len(os.Args) == 4); err != nil {
		fmt.Fprintln(os.Stderr, "spm2gguf:", err)
		os.Exit(1)
	}
}

func run(in, out string, xlmr bool) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	m := model{modelType: 1, unk: 0, bos: 1, eos: 2, pad: -1, addDummyPrefix: true, removeExtraWS: true, escapeSpaces: true}
	if err := m.parse(b); err != nil {
		return err
	}
	if m.modelType != 1 {
		return fmt.Errorf("model type %d: only unigram models (1) are tokenized by llama.cpp's UGM", m.modelType)
	}
	w := gguf.NewWriter()
	w.SetString("general.architecture", "t5")
	w.SetString("tokenizer.ggml.model", "t5")
	toks := make([]string, len(m.pieces))
	scores := make([]float32, len(m.pieces))
	types := make([]int32, len(m.pieces))
	for i, p := range m.pieces {
		toks[i], scores[i], types[i] = p.text, p.score, p.typ
	}
	w.SetStrings("tokenizer.ggml.tokens", toks)
	w.SetFloat32s("tokenizer.ggml.scores", scores)
	w.SetInt32s("tokenizer.ggml.token_type", types)
	if err := w.Set("tokenizer.ggml.precompiled_charsmap", gguf.BytesValue(m.charsmap)); err != nil {
		return err
	}
	w.SetBool("tokenizer.ggml.add_space_prefix", m.addDummyPrefix)
	w.SetBool("tokenizer.ggml.remove_extra_whitespaces", m.removeExtraWS)
	for _, id := range []struct {
		key string
		v   int32
	}{{"unknown_token_id", m.unk}, {"bos_token_id", m.bos}, {"eos_token_id", m.eos}, {"padding_token_id", m.pad}} {
		if id.v >= 0 {
			w.SetUint32("tokenizer.ggml."+id.key, uint32(id.v))
		}
	}
	w.SetBool("tokenizer.ggml.add_bos_token", xlmr)
	w.SetBool("tokenizer.ggml.add_eos_token", true)
	data, err := w.Bytes()
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		return err
	}
	for _, s := range m.samples {
		fmt.Printf("%s\t%s\n", s[0], s[1])
	}
	return nil
}

// fields calls fn for each field of a protobuf message.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var f uint32
			f, n = protowire.ConsumeFixed32(b)
			x = uint64(f)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			return fmt.Errorf("field %d: wire type %d", num, typ)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

func (m *model) parse(b []byte) error {
	err := fields(b, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 1: // pieces
			p := piece{typ: 1}
			err := fields(v, func(num protowire.Number, _ protowire.Type, v []byte, x uint64) error {
				switch num {
				case 1:
					p.text = string(v)
				case 2:
					p.score = math.Float32frombits(uint32(x))
				case 3:
					p.typ = int32(x)
				}
				return nil
			})
			m.pieces = append(m.pieces, p)
			return err
		case 2: // trainer_spec
			return fields(v, func(num protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				switch num {
				case 3:
					m.modelType = int32(x)
				case 40:
					m.unk = int32(x)
				case 41:
					m.bos = int32(x)
				case 42:
					m.eos = int32(x)
				case 43:
					m.pad = int32(x)
				}
				return nil
			})
		case 3: // normalizer_spec
			return fields(v, func(num protowire.Number, _ protowire.Type, v []byte, x uint64) error {
				switch num {
				case 2:
					m.charsmap = append([]byte(nil), v...)
				case 3:
					m.addDummyPrefix = x != 0
				case 4:
					m.removeExtraWS = x != 0
				case 5:
					m.escapeSpaces = x != 0
				}
				return nil
			})
		case 4: // self_test_data
			return fields(v, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
				if num != 1 {
					return nil
				}
				var s [2]string
				err := fields(v, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
					if num == 1 || num == 2 {
						s[num-1] = string(v)
					}
					return nil
				})
				m.samples = append(m.samples, s)
				return err
			})
		}
		return nil
	})
	if err == nil && len(m.pieces) == 0 {
		err = errors.New("no pieces")
	}
	return err
}
