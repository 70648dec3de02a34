package kvzmq

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"oengine/kvcache"
)

// python finds a python3 with pyzmq and msgpack (Debian's python3-zmq and
// python3-msgpack). Without one the round trip is skipped, unless
// OENGINE_REQUIRE_PYZMQ=1 (CI, .ci/run) makes that a failure.
func python(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import zmq, msgpack").Run() == nil {
			return path
		}
	}
	if os.Getenv("OENGINE_REQUIRE_PYZMQ") == "1" {
		t.Fatal("no python3 with zmq and msgpack (apt-get install python3-zmq python3-msgpack)")
	}
	t.Skip("no python3 with zmq and msgpack; set OENGINE_REQUIRE_PYZMQ=1 to fail instead")
	return ""
}

// store commits tokens into a fresh table and releases it (pages stay
// cached, evictable).
func store(t *testing.T, c *kvcache.Cache, tokens ...int32) {
	t.Helper()
	tb := c.NewTable(kvcache.Namespace{})
	if _, err := c.PrepareAppend(tb, len(tokens)); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(tb, tokens); err != nil {
		t.Fatal(err)
	}
	c.Release(tb)
}

// decoded is one message as the Python decoder printed it.
type decoded struct {
	Topic string            `json:"topic"`
	Seq   uint64            `json:"seq"`
	Batch []json.RawMessage `json:"batch"`
}

// want renders an event the way msgpack-then-JSON shows it.
func want(ev kvcache.Event) string {
	hashes := func(hs []uint64) string {
		s := make([]string, len(hs))
		for i, h := range hs {
			s[i] = strconv.FormatUint(h, 10)
		}
		return "[" + strings.Join(s, ", ") + "]"
	}
	switch ev.Kind {
	case kvcache.BlockStored:
		parent := "null"
		if ev.HasParent {
			parent = strconv.FormatUint(ev.Parent, 10)
		}
		toks := make([]string, len(ev.Tokens))
		for i, tk := range ev.Tokens {
			toks[i] = strconv.Itoa(int(tk))
		}
		return fmt.Sprintf(`["BlockStored", %s, %s, [%s], %d, null, null, null]`, hashes(ev.Hashes), parent, strings.Join(toks, ", "), ev.BlockSize)
	case kvcache.BlockRemoved:
		return fmt.Sprintf(`["BlockRemoved", %s, null]`, hashes(ev.Hashes))
	}
	return `["AllBlocksCleared"]`
}

// exact decodes JSON keeping numbers as their decimal text.
func exact(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRoundTripPython: batches published by oengine are read back by an
// independent decoder (pyzmq + msgpack) with the topic, consecutive
// sequence numbers and every event field as the cache emitted them.
func TestRoundTripPython(t *testing.T) {
	py := python(t)
	c, err := kvcache.New(kvcache.Config{PageSize: 4, NumPages: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ref, err := c.Subscribe(0, false) // what the cache emitted, to compare
	if err != nil {
		t.Fatal(err)
	}
	const topic = "kv@10.0.0.7:8080@tiny"
	p, err := Start(Config{Endpoint: "tcp://127.0.0.1:0", Topic: topic, Rank: 0,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, c.Subscribe)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	const messages = 4
	cmd := exec.Command(py, "testdata/zmq_sub.py", fmt.Sprintf("tcp://127.0.0.1:%d", p.Port()), "kv@", strconv.Itoa(messages))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 1<<20)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("decoder did not start: %q %s", lines.Text(), stderr.String())
	}
	// A PUB socket drops messages until the subscription arrives.
	deadline := time.Now().Add(10 * time.Second)
	for len(p.Subscribers()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the subscription never reached the publisher")
		}
		time.Sleep(10 * time.Millisecond)
	}

	store(t, c, 1, 2, 3, 4, 5, 6, 7, 8) // BlockStored: two blocks, the second a child
	store(t, c, 1, 2, 3, 4, 9, 9, 9, 9) // BlockStored: one block under the first (evicts the LRU)
	store(t, c, 40, 41, 42, 43)         // evicts, stores a root block
	c.Clear()                           // AllBlocksCleared
	var emitted []kvcache.Batch
	for range messages {
		select {
		case b := <-ref.C():
			emitted = append(emitted, b)
		case <-time.After(5 * time.Second):
			t.Fatal("cache emitted fewer batches than expected")
		}
	}

	var evicted bool
	for i := range messages {
		if !lines.Scan() {
			t.Fatalf("decoder stopped after %d messages: %v %s", i, lines.Err(), stderr.String())
		}
		var d decoded
		dec := json.NewDecoder(strings.NewReader(lines.Text()))
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("message %d: %v: %s", i, err, lines.Text())
		}
		if d.Topic != topic || d.Seq != uint64(i) {
			t.Fatalf("message %d: topic %q seq %d", i, d.Topic, d.Seq)
		}
		if len(d.Batch) != 3 || string(d.Batch[2]) != "0" {
			t.Fatalf("message %d: batch is not [ts, events, rank 0]: %s", i, lines.Text())
		}
		var ts float64
		if err := json.Unmarshal(d.Batch[0], &ts); err != nil || ts != float64(emitted[i].UnixNano)/1e9 {
			t.Fatalf("message %d: ts %s, want %v", i, d.Batch[0], float64(emitted[i].UnixNano)/1e9)
		}
		var events []json.RawMessage
		if err := json.Unmarshal(d.Batch[1], &events); err != nil {
			t.Fatal(err)
		}
		if len(events) != len(emitted[i].Events) {
			t.Fatalf("message %d: %d events, cache emitted %d", i, len(events), len(emitted[i].Events))
		}
		for j, ev := range events {
			// Numbers compared as decimal text: 64-bit hashes exactly.
			got, exp := exact(t, ev), exact(t, []byte(want(emitted[i].Events[j])))
			if !reflect.DeepEqual(got, exp) {
				t.Fatalf("message %d event %d:\n got %s\nwant %s", i, j, ev, want(emitted[i].Events[j]))
			}
			evicted = evicted || emitted[i].Events[j].Kind == kvcache.BlockRemoved
		}
	}
	if !evicted {
		t.Fatal("no BlockRemoved was exercised")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("decoder: %v %s", err, stderr.String())
	}
}
