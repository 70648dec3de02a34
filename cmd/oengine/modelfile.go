package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"oengine/ggml"
	"oengine/model/gguf"
	"oengine/model/synth"
)

// DefaultSeed names the built-in synthetic default model.
const DefaultSeed = 42

// defaultModelOptions describes the built-in default model: the tiny preset
// with a byte-level vocabulary, generated in memory.
func defaultModelOptions() synth.Options {
	return synth.Options{Arch: "llama", Preset: "tiny", Type: ggml.TypeQ8_0, Seed: DefaultSeed, Name: "synthetic-tiny"}
}

// mmapUsage is the help of --mmap.
const mmapUsage = "map the GGUF file (shared page cache, 4 KiB pages) instead of reading it into huge-page memory (faster decode)"

// loadedFile is a GGUF file and how to call it in output.
type loadedFile struct {
	File  *gguf.File
	Label string // "synthetic" for the built-in default, else the path
	Name  string // served model name
}

// openModelFile opens path, or builds the default synthetic model when path
// is empty. With mmap the file is mapped and paged in with a progress bar on
// a terminal; without, it is read into huge-page memory (gguf.OpenCopy:
// faster decode, weights not shared with the page cache).
func openModelFile(path string, mmap bool, stderr io.Writer) (*loadedFile, error) {
	start := time.Now()
	if path == "" {
		data, err := synth.Build(defaultModelOptions())
		if err != nil {
			return nil, err
		}
		f, err := gguf.Parse(data)
		if err != nil {
			return nil, err
		}
		return &loadedFile{File: f, Label: "synthetic", Name: "synthetic-tiny"}, nil
	}
	var f *gguf.File
	var err error
	if mmap {
		if f, err = gguf.Open(path); err != nil {
			return nil, err
		}
		prefault(f, stderr)
	} else {
		var bar *progress
		f, err = gguf.OpenCopyProgress(path, func(done, total int64) {
			if bar == nil {
				bar = newProgress(stderr, "loading", total)
			}
			bar.set(done)
		})
		if bar != nil {
			bar.finish()
		}
		if err != nil {
			return nil, err
		}
	}
	name, _ := f.String("general.name")
	if name == "" {
		name = baseName(path)
	}
	fmt.Fprintf(stderr, "loaded %s (%s) in %.2fs\n", path, humanBytes(f.Size()), time.Since(start).Seconds())
	return &loadedFile{File: f, Label: path, Name: name}, nil
}

// prefault touches every page of the tensor data so the first token does not
// pay for page faults, drawing a progress bar when stderr is a terminal.
func prefault(f *gguf.File, stderr io.Writer) {
	var total int64
	for _, t := range f.Tensors {
		total += int64(len(t.Data))
	}
	bar := newProgress(stderr, "loading", total)
	var done int64
	var sink byte
	for _, t := range f.Tensors {
		d := t.Data
		for i := 0; i < len(d); i += 4096 {
			sink ^= d[i]
		}
		done += int64(len(d))
		bar.set(done)
	}
	bar.finish()
	_ = sink
}

func baseName(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			path = path[i+1:]
			break
		}
	}
	if len(path) > 5 && path[len(path)-5:] == ".gguf" {
		path = path[:len(path)-5]
	}
	return path
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// progress draws a one-line bar on a terminal and nothing elsewhere.
type progress struct {
	w      io.Writer
	label  string
	total  int64
	last   int
	active bool
}

func newProgress(w io.Writer, label string, total int64) *progress {
	p := &progress{w: w, label: label, total: total, last: -1}
	if f, ok := w.(*os.File); ok && total > 64<<20 {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.active = true
		}
	}
	return p
}

func (p *progress) set(done int64) {
	if !p.active || p.total <= 0 {
		return
	}
	pct := int(done * 100 / p.total)
	if pct == p.last {
		return
	}
	p.last = pct
	const width = 40
	n := pct * width / 100
	bar := make([]byte, width)
	for i := range bar {
		if i < n {
			bar[i] = '='
		} else {
			bar[i] = ' '
		}
	}
	fmt.Fprintf(p.w, "\r%s [%s] %3d%%", p.label, bar, pct)
}

func (p *progress) finish() {
	if p.active {
		fmt.Fprintln(p.w)
	}
}
