package kvcache

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// drain reads every batch buffered on sub without blocking.
func drain(sub *Subscription) []Batch {
	var out []Batch
	for {
		select {
		case b, ok := <-sub.C():
			if !ok {
				return out
			}
			out = append(out, b)
		default:
			return out
		}
	}
}

func TestEventsStoredRemovedCleared(t *testing.T) {
	now := time.Unix(1700000000, 0)
	s := newSim(t, Config{NumPages: 4, PageSize: 2, Medium: MediumCPU, Now: func() time.Time { return now }})
	sub, err := s.c.Subscribe(0, false)
	if err != nil {
		t.Fatal(err)
	}
	ns := Namespace{Salt: "x", Adapter: 7}
	P := seq(1, 5) // 2 full pages + 1 partial
	a, _ := s.run(P, ns)
	h0 := BlockHash(ns, 0, false, P[:2])
	h1 := BlockHash(ns, h0, true, P[2:4])
	s.c.Release(a)
	z := s.c.NewTable(Namespace{})
	if err := s.extend(z, seq(50, 8)); err != nil { // evicts both cached blocks
		t.Fatal(err)
	}
	s.c.Clear()
	got := drain(sub)
	want := []Batch{
		{Seq: 1, UnixNano: now.UnixNano(), Events: []Event{{
			Kind: BlockStored, Hashes: []uint64{h0, h1}, Tokens: P[:4],
			BlockSize: 2, Adapter: 7, Medium: MediumCPU,
		}}},
		{Seq: 2, UnixNano: now.UnixNano(), Events: []Event{{Kind: BlockRemoved, Hashes: []uint64{h1, h0}, Medium: MediumCPU}}},
		{Seq: 3, UnixNano: now.UnixNano(), Events: []Event{{Kind: AllBlocksCleared, Medium: MediumCPU}}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d batches %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if !batchEqual(got[i], want[i]) {
			t.Fatalf("batch %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	s.c.Release(z)
	s.check()
}

func batchEqual(a, b Batch) bool {
	return a.Seq == b.Seq && a.UnixNano == b.UnixNano &&
		slices.EqualFunc(a.Events, b.Events, func(x, y Event) bool {
			return x.Kind == y.Kind && slices.Equal(x.Hashes, y.Hashes) && x.Parent == y.Parent &&
				x.HasParent == y.HasParent && slices.Equal(x.Tokens, y.Tokens) &&
				x.BlockSize == y.BlockSize && x.Adapter == y.Adapter && x.Medium == y.Medium
		})
}

func TestEventsChainBreaksAtDuplicate(t *testing.T) {
	// The second table stores only its last block, whose parent is the
	// deduplicated block's hash.
	s := newSim(t, Config{NumPages: 16, PageSize: 2})
	P := seq(1, 4)
	a := s.c.NewTable(Namespace{})
	b := s.c.NewTable(Namespace{})
	_ = s.extend(a, P)
	_ = s.extend(b, append(slices.Clone(P), 9, 9))
	sub, _ := s.c.Subscribe(0, false)
	if err := s.c.Commit(a, P); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Commit(b, append(slices.Clone(P), 9, 9)); err != nil {
		t.Fatal(err)
	}
	got := drain(sub)
	if len(got) != 2 || len(got[1].Events) != 1 {
		t.Fatalf("batches %+v", got)
	}
	h1 := BlockHash(Namespace{}, BlockHash(Namespace{}, 0, false, P[:2]), true, P[2:])
	e := got[1].Events[0]
	if !e.HasParent || e.Parent != h1 || len(e.Hashes) != 1 || !slices.Equal(e.Tokens, []int32{9, 9}) {
		t.Fatalf("event %+v, want one block under parent %x", e, h1)
	}
	s.c.Release(a)
	s.c.Release(b)
	s.check()
}

func TestSubscribeResumeAndSnapshot(t *testing.T) {
	s := newSim(t, Config{NumPages: 64, PageSize: 2, EventWindow: 3})
	// 5 batches: commits of 5 distinct 2-page prompts (seq 1..5).
	var tables []*Table
	for i := range 5 {
		tb, _ := s.run(seq(100*i, 5), Namespace{})
		tables = append(tables, tb)
	}
	tests := []struct {
		name     string
		from     uint64
		snapshot bool
		wantErr  error
		wantSeqs []uint64
	}{
		{"live only", 0, false, nil, nil},
		{"resume in window", 4, false, nil, []uint64{4, 5}},
		{"resume oldest retained", 3, false, nil, []uint64{3, 4, 5}},
		{"resume at next", 6, false, nil, nil},
		{"older than window", 2, false, ErrEventWindow, nil},
		{"ahead of last", 7, false, ErrEventWindow, nil},
		{"snapshot", 0, true, nil, nil},
		{"snapshot and resume", 5, true, nil, []uint64{5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sub, err := s.c.Subscribe(tc.from, tc.snapshot)
			if tc.wantErr != nil {
				mustErr(t, err, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			if sub.AsOf != 5 {
				t.Fatalf("AsOf %d, want 5", sub.AsOf)
			}
			var seqs []uint64
			for _, b := range sub.Backlog {
				seqs = append(seqs, b.Seq)
			}
			if !slices.Equal(seqs, tc.wantSeqs) {
				t.Fatalf("backlog seqs %v, want %v", seqs, tc.wantSeqs)
			}
			if !tc.snapshot {
				if sub.Snapshot != nil {
					t.Fatal("snapshot not asked for")
				}
				return
			}
			if len(sub.Snapshot) != 10 {
				t.Fatalf("snapshot has %d blocks, want 10", len(sub.Snapshot))
			}
			stored := map[uint64]bool{}
			for _, e := range sub.Snapshot {
				if e.Kind != BlockStored || len(e.Hashes) != 1 || len(e.Tokens) != 2 {
					t.Fatalf("snapshot event %+v", e)
				}
				if e.HasParent && !stored[e.Parent] {
					t.Fatalf("block %x listed before its parent %x", e.Hashes[0], e.Parent)
				}
				var parent uint64
				if e.HasParent {
					parent = e.Parent
				}
				if BlockHash(Namespace{}, parent, e.HasParent, e.Tokens) != e.Hashes[0] {
					t.Fatalf("snapshot block %x does not hash from its tokens", e.Hashes[0])
				}
				stored[e.Hashes[0]] = true
			}
		})
	}
	// Live delivery continues after AsOf.
	sub, _ := s.c.Subscribe(0, false)
	tb, _ := s.run(seq(9000, 4), Namespace{})
	if got := drain(sub); len(got) != 1 || got[0].Seq != 6 {
		t.Fatalf("live batches %+v, want seq 6", got)
	}
	sub.Close()
	sub.Close()
	if _, ok := <-sub.C(); ok || sub.Err() != nil {
		t.Fatalf("closed subscription: err %v", sub.Err())
	}
	for _, t := range append(tables, tb) {
		s.c.Release(t)
	}
	if st := s.c.Stats(); st.Subscribed != 0 {
		t.Fatalf("%d subscriptions left", st.Subscribed)
	}
	s.check()
}

func TestSlowSubscriberDropped(t *testing.T) {
	s := newSim(t, Config{NumPages: 64, PageSize: 2, SubscriberBuffer: 2})
	slow, _ := s.c.Subscribe(0, false)
	fast, _ := s.c.Subscribe(0, false)
	var got []uint64
	for i := range 5 {
		tb, _ := s.run(seq(100*i, 3), Namespace{}) // one batch each, never blocks
		s.c.Release(tb)
		for _, b := range drain(fast) {
			got = append(got, b.Seq)
		}
	}
	if !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("fast subscriber saw %v", got)
	}
	if b := drain(slow); len(b) != 2 {
		t.Fatalf("slow subscriber kept %d batches, want its buffer of 2", len(b))
	}
	if _, ok := <-slow.C(); ok {
		t.Fatal("slow subscriber's channel still open")
	}
	mustErr(t, slow.Err(), ErrSlowSubscriber)
	s.c.Close()
	if _, ok := <-fast.C(); ok {
		t.Fatal("Close left a subscription open")
	}
	mustErr(t, fast.Err(), ErrClosed)
	if _, err := s.c.Subscribe(0, false); !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
	s.check()
}
