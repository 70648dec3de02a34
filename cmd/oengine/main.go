// Command oengine is the one binary of the engine: serve, generate, tokenize,
// info, synth, verify and bench.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "oengine:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: oengine <serve|generate|tokenize|info|synth|verify|bench> [flags]")
	}
	return fmt.Errorf("unknown command %q", args[0])
}
