package cuda

import (
	"fmt"

	"github.com/ebitengine/purego"
)

// dlopenNow is the production openFunc: RTLD_NOW so that a broken library
// fails here rather than at its first call; RTLD_GLOBAL so that cuBLAS finds
// the cuBLASLt loaded before it.
func dlopenNow(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

// symbol is one C function to bind: its exported name and a pointer to the
// Go function field that will call it.
type symbol struct {
	name string
	fptr any  // *func(...) ...
	opt  bool // missing is not an error (the field stays nil)
}

// symLookup resolves a symbol in a library (purego.Dlsym in production).
type symLookup func(handle uintptr, name string) (uintptr, error)

// bindSymbols resolves every symbol and binds it with purego.RegisterFunc.
// Unlike purego.RegisterLibFunc it returns an error naming the first
// required symbol that is missing instead of panicking.
func bindSymbols(handle uintptr, lookup symLookup, syms []symbol) error {
	for _, s := range syms {
		addr, err := lookup(handle, s.name)
		if err != nil || addr == 0 {
			if s.opt {
				continue
			}
			return fmt.Errorf("cuda: symbol %s: %v", s.name, err)
		}
		purego.RegisterFunc(s.fptr, addr)
	}
	return nil
}

func dlsym(handle uintptr, name string) (uintptr, error) { return purego.Dlsym(handle, name) }
