package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Bar draws a one-line progress bar on a terminal; on anything else it
// prints nothing. Safe for concurrent use.
type Bar struct {
	mu     sync.Mutex // protects the fields below and writes to w
	w      io.Writer
	active bool
	label  string
	start  time.Time
	last   time.Time
}

// NewBar returns a bar writing to w, active when w is a terminal.
func NewBar(w io.Writer) *Bar {
	b := &Bar{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			b.active = true
		}
	}
	return b
}

// Begin starts a new run's line.
func (b *Bar) Begin(scenario string, concurrency int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.label = fmt.Sprintf("%s c=%d", scenario, concurrency)
	b.start, b.last = time.Now(), time.Time{}
	if b.active {
		fmt.Fprintf(b.w, "\r\033[K%s ...", b.label)
	}
}

// Update draws done out of total (total 0: unknown).
func (b *Bar) Update(done, total int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.active {
		return
	}
	now := time.Now()
	if now.Sub(b.last) < 100*time.Millisecond && done != total {
		return
	}
	b.last = now
	el := now.Sub(b.start).Seconds()
	if total <= 0 {
		fmt.Fprintf(b.w, "\r\033[K%s %d done  %.0fs", b.label, done, el)
		return
	}
	const width = 30
	n := min(done*width/total, width)
	fmt.Fprintf(b.w, "\r\033[K%s [%s%s] %d/%d  %.0fs", b.label, strings.Repeat("=", n), strings.Repeat(" ", width-n), done, total, el)
}

// End clears the line.
func (b *Bar) End() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.active {
		fmt.Fprint(b.w, "\r\033[K")
	}
}

// Machine describes the computer a run was made on.
func Machine() map[string]any {
	m := map[string]any{"os": runtime.GOOS, "arch": runtime.GOARCH, "cpus": runtime.NumCPU(), "go": runtime.Version()}
	if h, err := os.Hostname(); err == nil {
		m["hostname"] = h
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			m["memory_bytes"] = kb << 10
		}
	}
	if llc := LastLevelCache(); llc > 0 {
		m["llc_bytes"] = llc
	}
	return m
}
