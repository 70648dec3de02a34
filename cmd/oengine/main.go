// Command oengine is the one binary of the engine: serve, generate, tokenize,
// info, synth, verify, bench and version.
//
// Every command parses its arguments into a config value first (parseX in
// each file, with the conventions of flagSet in flags.go) and only then runs
// it, so cli_test.go checks the command line without loading a model.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// command is one subcommand of the binary.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string, stdout, stderr io.Writer) error) {
	commands[name] = command{summary: summary, run: run}
}

func main() {
	if err := dispatch(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "oengine:", err)
			os.Exit(1)
		}
	}
}

// usage lists the commands.
func usage() string {
	var b strings.Builder
	b.WriteString("oengine: an LLM inference engine (GGUF models, OpenEngine gRPC, SSE)\n\n")
	b.WriteString("usage: oengine <command> [arguments] [flags]\n\ncommands:\n")
	for _, n := range commandNames() {
		fmt.Fprintf(&b, "  %-10s %s\n", n, commands[n].summary)
	}
	b.WriteString("\n`oengine help <command>` or `oengine <command> --help` describes a command;\n")
	b.WriteString("`oengine version` (or --version) reports the build.\n")
	return b.String()
}

// dispatch runs the command named by args[0]. Help asked for is printed on
// stdout and is not an error; a missing or unknown command prints the list
// on stderr and is one.
func dispatch(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return errors.New("no command given")
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, usage())
		return nil
	case "help":
		if len(args) == 1 {
			fmt.Fprint(stdout, usage())
			return nil
		}
		return dispatch(append(append([]string(nil), args[1:]...), "--help"), stdout, stderr)
	case "-version", "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprint(stderr, usage())
		return fmt.Errorf("unknown command %q", args[0])
	}
	err := c.run(args[1:], stdout, stderr)
	var h *helpRequest
	if errors.As(err, &h) {
		fmt.Fprint(stdout, h.text)
		return nil
	}
	return err
}
