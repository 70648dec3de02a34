// Command oengine is the one binary of the engine: serve, generate, tokenize,
// info, synth, verify and bench.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
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
		}
		os.Exit(1)
	}
}

func usage() string {
	var b strings.Builder
	b.WriteString("usage: oengine <command> [flags]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-10s %s\n", n, commands[n].summary)
	}
	return b.String()
}

func dispatch(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage())
		if len(args) == 0 {
			return errors.New("no command given")
		}
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprint(stderr, usage())
		return fmt.Errorf("unknown command %q", args[0])
	}
	return c.run(args[1:], stdout, stderr)
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("oengine "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}
