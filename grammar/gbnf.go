package grammar

import "fmt"

// CompileGBNF compiles a context-free grammar in GBNF (docs/api.md,
// "Structured outputs") for a vocabulary. Not implemented yet.
func CompileGBNF(src string, v *Vocab) (Constraint, error) {
	return nil, fmt.Errorf("%w: GBNF grammars", ErrUnsupported)
}
