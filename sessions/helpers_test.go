package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"oengine/engine"
	"oengine/model/tokenizer"
)

// toyModel is a deterministic model over a real paged K/V store: Forward
// writes (token, position) into the page slot of each position, and the
// logits at position p hash the tokens read back from slots 0..p. A wrong
// page table, a stale or unpinned-and-reused page changes the output.
type toyModel struct {
	vocab, ctx int
	mu         sync.Mutex    // protects gate
	gate       chan struct{} // when set, each Forward waits for a receive
}

type toyKV struct {
	mu    sync.Mutex
	ps    int
	slots [][]int64 // [page][slot] token<<32 | pos; -1 unwritten
}

func (m *toyModel) Info() engine.ModelInfo {
	return engine.ModelInfo{Vocab: m.vocab, ContextLen: m.ctx}
}
func (m *toyModel) KVBytesPerPage(ps int) int64 { return int64(ps) * 16 }
func (kv *toyKV) CopyPage(dst, src int32) {
	kv.mu.Lock()
	copy(kv.slots[dst], kv.slots[src])
	kv.mu.Unlock()
}
func (m *toyModel) setGate(g chan struct{}) { m.mu.Lock(); m.gate = g; m.mu.Unlock() }
func (m *toyModel) getGate() chan struct{}  { m.mu.Lock(); defer m.mu.Unlock(); return m.gate }
func (m *toyModel) NewKV(pages, ps int) (engine.KV, error) {
	kv := &toyKV{ps: ps, slots: make([][]int64, pages)}
	for i := range kv.slots {
		kv.slots[i] = make([]int64, ps)
		for j := range kv.slots[i] {
			kv.slots[i][j] = -1
		}
	}
	return kv, nil
}

func scramble(x uint64) uint64 {
	x ^= x >> 31
	x *= 0xD6E8FEB86659FD93
	x ^= x >> 29
	x *= 0xA5CB9243F18A2F0F
	return x ^ x>>32
}

func (m *toyModel) Forward(k engine.KV, b *engine.Batch, logits []float32) error {
	if g := m.getGate(); g != nil {
		<-g
	}
	kv := k.(*toyKV)
	kv.mu.Lock()
	defer kv.mu.Unlock()
	for i, tok := range b.Tokens {
		pages, p := b.Seqs[b.Seq[i]], int(b.Pos[i])
		if p/kv.ps >= len(pages) {
			return fmt.Errorf("toy: position %d beyond %d pages", p, len(pages))
		}
		kv.slots[pages[p/kv.ps]][p%kv.ps] = int64(tok)<<32 | int64(p)
	}
	for r, ti := range b.Logits {
		pages, pos := b.Seqs[b.Seq[ti]], int(b.Pos[ti])
		h := uint64(7)
		for q := 0; q <= pos; q++ {
			v := kv.slots[pages[q/kv.ps]][q%kv.ps]
			if v < 0 || int(v&0xffffffff) != q {
				return fmt.Errorf("toy: slot of position %d holds %x", q, v)
			}
			h = scramble(h ^ uint64(v>>32))
		}
		row := logits[r*m.vocab : (r+1)*m.vocab]
		for v := range row {
			row[v] = float32(scramble(h^uint64(v)<<20)>>40) / float32(1<<24) * 4
		}
		row[0] = -100 // EOS never wins: outputs run to max_tokens
	}
	return nil
}

// toyTok: 0 <eos>, 1..26 'a'..'z', 27 ' ', 28 BOS; the BOS rule adds 28.
type toyTok struct{}

func (toyTok) Encode(text string, o tokenizer.EncodeOptions) []int32 {
	var out []int32
	if o.AddSpecial {
		out = append(out, 28)
	}
	for _, c := range strings.ToLower(text) {
		if c >= 'a' && c <= 'z' {
			out = append(out, c-'a'+1)
		} else {
			out = append(out, 27)
		}
	}
	return out
}
func (toyTok) IsEOG(id int32) bool            { return id == 0 }
func (toyTok) NewDecoder(bool) engine.Decoder { return toyDec{} }

type toyDec struct{}

func (toyDec) Push(id int32) string {
	switch {
	case id >= 1 && id <= 26:
		return string(rune('a' + id - 1))
	case id == 27:
		return " "
	}
	return ""
}
func (toyDec) Flush() string { return "" }

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

type fixture struct {
	t     *testing.T
	model *toyModel
	eng   *engine.Engine
	m     *Manager
	clock *fakeClock
}

const instance = "inst-1"

// newFixture builds a real engine over the toy model (page size 4, 256
// pages, context 256) and a manager with a fake clock. Cleanup closes the
// manager and checks the page ledger: no pins, no pages in use.
func newFixture(t *testing.T, mutate func(*Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, model: &toyModel{vocab: 32, ctx: 256}, clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}}
	eng, err := engine.New(engine.Config{ModelName: "toy", PageSize: 4, KVPages: 256, GreedyDefault: true}, f.model, toyTok{})
	if err != nil {
		t.Fatal(err)
	}
	f.eng = eng
	cfg := Config{
		InstanceID: instance,
		Models: func(name string) (Engine, bool) {
			if name == "toy" {
				return eng, true
			}
			return nil, false
		},
		Clock:        f.clock,
		ReapInterval: time.Hour,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	t.Cleanup(func() {
		f.model.setGate(nil)
		m.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := eng.WaitIdle(ctx); err != nil {
			t.Errorf("engine not idle: %v", err)
		}
		if err := eng.Cache().CheckIntegrity(); err != nil {
			t.Error(err)
		}
		if st := eng.Cache().Stats(); st.Pinned != 0 || st.InUse != 0 || st.PinOwners != 0 {
			t.Errorf("pages still held after close: %+v", st)
		}
		eng.Close()
	})
	return f
}

func ref(id string) Ref { return Ref{SessionID: id, Owner: instance} }

func (f *fixture) open(id string, ids ...int32) Info {
	f.t.Helper()
	in, err := f.m.Open(context.Background(), OpenRequest{ID: id, Model: "toy", TokenIDs: ids})
	if err != nil {
		f.t.Fatalf("open %q: %v", id, err)
	}
	return in
}

func (f *fixture) get(id string) Info {
	f.t.Helper()
	in, err := f.m.Get(ref(id), true)
	if err != nil {
		f.t.Fatalf("get %q: %v", id, err)
	}
	return in
}

type turnResult struct {
	out    []int32
	prompt *engine.PromptInfo
	usage  *engine.Usage
	err    *engine.Error
}

// drain reads a turn to its end.
func drain(t testing.TB, tr *Turn) turnResult {
	var r turnResult
	for {
		ev, err := tr.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return r
		}
		if err != nil {
			t.Errorf("next: %v", err)
			return r
		}
		switch ev.Kind {
		case engine.EventPrompt:
			r.prompt = ev.Prompt
		case engine.EventTokens:
			for _, tk := range ev.Tokens {
				r.out = append(r.out, tk.ID)
			}
		case engine.EventDone:
			r.usage = ev.Usage
		case engine.EventError:
			r.usage, r.err = ev.Usage, ev.Err
		}
	}
}

func (f *fixture) turn(c Continuation, r engine.Request) turnResult {
	f.t.Helper()
	if c.Model == "" {
		c.Model = "toy"
	}
	tr, err := f.m.Begin(context.Background(), c, r)
	if err != nil {
		f.t.Fatalf("begin %+v: %v", c, err)
	}
	res := drain(f.t, tr)
	if res.err != nil {
		f.t.Fatalf("turn %+v: %v", c, res.err)
	}
	return res
}

// unary runs a plain request (no session) for reference outputs.
func (f *fixture) unary(ids []int32, maxTokens int) []int32 {
	f.t.Helper()
	st, err := f.eng.Submit(context.Background(), engine.Request{TokenIDs: ids, MaxTokens: maxTokens, BypassPrefixCache: true})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []int32
	for {
		ev, err := st.Next(context.Background())
		if err != nil {
			return out
		}
		if ev.Kind == engine.EventTokens {
			for _, tk := range ev.Tokens {
				out = append(out, tk.ID)
			}
		}
		if ev.Kind == engine.EventError {
			f.t.Fatal(ev.Err)
		}
	}
}

func codeIs(t *testing.T, err error, want Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", want)
	}
	if got := CodeOf(err); got != want {
		t.Fatalf("got %v (code %s), want %s", err, got, want)
	}
}

// waitGoroutines waits until the goroutine count is at most n.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, want <= %d\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func seq(from, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(1 + (from+i)%26)
	}
	return out
}
