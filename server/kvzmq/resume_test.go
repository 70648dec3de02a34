package kvzmq

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"oengine/kvcache"
)

// TestResumeAfterFallingBehind: a publisher that falls behind the cache
// (its subscription dropped as slow) and finds the retained window gone
// sends one batch of AllBlocksCleared followed by every stored block, and
// its sequence numbers stay consecutive.
func TestResumeAfterFallingBehind(t *testing.T) {
	c, err := kvcache.New(kvcache.Config{PageSize: 4, NumPages: 32, SubscriberBuffer: 1, EventWindow: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	first := true
	p, err := start(Config{Endpoint: "tcp://127.0.0.1:0", Topic: "kv@t", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		c.Subscribe, func(kvcache.Batch) {
			if first { // stall on the first batch until the cache moved on
				first = false
				held <- struct{}{}
				<-hold
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub := zmq4.NewSub(ctx)
	defer sub.Close()
	if err := sub.Dial("tcp://127.0.0.1:" + itoa(p.Port())); err != nil {
		t.Fatal(err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, "kv@"); err != nil {
		t.Fatal(err)
	}
	for len(p.Subscribers()) == 0 {
		time.Sleep(5 * time.Millisecond)
	}

	store(t, c, 1, 2, 3, 4) // batch 1: the publisher stalls on it
	<-held
	for i := range int32(4) { // batches 2..5: the buffer of 1 overflows, the window of 1 forgets
		store(t, c, 10+i, 20+i, 30+i, 40+i)
	}
	close(hold)

	// Messages 0 and 1: batch 1 and batch 2 (still buffered when the
	// subscription was dropped at batch 3). Message 2: the resync,
	// AllBlocksCleared + the 5 stored blocks.
	var last []any
	for want := range uint64(3) {
		msg, err := sub.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if got := binary.BigEndian.Uint64(msg.Frames[1]); got != want {
			t.Fatalf("message %d has sequence %d", want, got)
		}
		last = nil
		if err := msgpack.Unmarshal(msg.Frames[2], &last); err != nil {
			t.Fatal(err)
		}
	}
	events := last[1].([]any)
	if len(events) != 6 || events[0].([]any)[0] != TagAllBlocksCleared {
		t.Fatalf("resync batch %v", events)
	}
	for _, ev := range events[1:] {
		if ev.([]any)[0] != TagBlockStored {
			t.Fatalf("resync event %v", ev)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
