package server

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"oengine/kvcache"
	pb "oengine/proto/openengine/v1"
)

// store commits tokens into a fresh table, producing one BlockStored batch
// for its full pages, and releases the table (pages stay cached).
func store(t *testing.T, c *kvcache.Cache, tokens []int32) {
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

func recvAll(t *testing.T, st grpc.ServerStreamingClient[pb.SubscribeKvEventsResponse]) ([]*pb.SubscribeKvEventsResponse, error) {
	t.Helper()
	var out []*pb.SubscribeKvEventsResponse
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

func TestKvEvents(t *testing.T) {
	f := newFake(t, "m")
	h := startServer(t, testConfig(), Model{Backend: f})
	// Each subtest's streams end with its context, so the cache's count
	// of subscriptions tells when a new one is registered.
	subCtx := func(t *testing.T) context.Context {
		ctx, cancel := context.WithCancel(ctxT(t))
		t.Cleanup(func() {
			cancel()
			eventually(t, "subscriptions closed", func() bool { return f.cache.Stats().Subscribed == 0 })
		})
		return ctx
	}
	ctx := ctxT(t)

	t.Run("live batches carry BlockStored with increasing sequence numbers", func(t *testing.T) {
		st, err := h.ctl.SubscribeKvEvents(subCtx(t), &pb.SubscribeKvEventsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "subscribed", func() bool { return f.cache.Stats().Subscribed == 1 })
		store(t, f.cache, []int32{1, 2, 3, 4, 5, 6, 7, 8})
		store(t, f.cache, []int32{9, 9, 9, 9})
		var last uint64
		for i := range 2 {
			r, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			b := r.GetBatch()
			if b == nil || b.GetSequenceNumber() <= last || b.GetTimestampUnixNanos() == 0 || b.GetDataParallelRank() != 0 {
				t.Fatalf("batch %d: %v", i, r)
			}
			last = b.GetSequenceNumber()
			bs := b.GetEvents()[0].GetBlockStored()
			if bs == nil || bs.GetBlockSize() != 4 {
				t.Fatalf("event %v", b.GetEvents()[0])
			}
			if i == 0 {
				if len(bs.GetBlockHashes()) != 2 || len(bs.GetTokenIds()) != 8 || bs.GetParentBlockHash() != nil {
					t.Fatalf("first BlockStored %v", bs)
				}
				want := kvcache.BlockHash(kvcache.Namespace{}, 0, false, []int32{1, 2, 3, 4})
				// docs/design.md §9: the canonical decimal of the hash as an int64
				// (before the fix: 8 raw bytes "u64be", fatal to Dynamo's sidecar).
				got := bs.GetBlockHashes()[0]
				v, err := strconv.ParseInt(string(got.GetValue()), 10, 64)
				if err != nil || uint64(v) != want || strconv.FormatInt(v, 10) != string(got.GetValue()) || got.GetEncoding() != "decimal_int64" {
					t.Fatalf("hash %q (%s), want the decimal of %d", got.GetValue(), got.GetEncoding(), int64(want))
				}
				if bs.GetMedium() != pb.StorageMedium_STORAGE_MEDIUM_UNSPECIFIED {
					t.Fatalf("medium %v on a host-memory cache, want UNSPECIFIED", bs.GetMedium())
				}
			}
		}
	})
	t.Run("snapshot replays the stored blocks first", func(t *testing.T) {
		st, err := h.ctl.SubscribeKvEvents(subCtx(t), &pb.SubscribeKvEventsRequest{IncludeSnapshot: true})
		if err != nil {
			t.Fatal(err)
		}
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if n := len(r.GetBatch().GetEvents()); n != 3 {
			t.Fatalf("snapshot has %d events, want 3 blocks", n)
		}
		if r.GetBatch().GetSequenceNumber() != f.cache.Stats().LastSeq {
			t.Fatalf("snapshot seq %d, last %d", r.GetBatch().GetSequenceNumber(), f.cache.Stats().LastSeq)
		}
	})
	t.Run("start_sequence_number resumes from the retained window", func(t *testing.T) {
		st, err := h.ctl.SubscribeKvEvents(subCtx(t), &pb.SubscribeKvEventsRequest{StartSequenceNumber: 1})
		if err != nil {
			t.Fatal(err)
		}
		for want := uint64(1); want <= 2; want++ {
			r, err := st.Recv()
			if err != nil || r.GetBatch().GetSequenceNumber() != want {
				t.Fatalf("resume: %v, %v (want seq %d)", r, err, want)
			}
		}
	})
	t.Run("a missed window is one terminal error then OK", func(t *testing.T) {
		for i := range 12 { // the fake retains 8 batches
			store(t, f.cache, []int32{int32(100 + i), 1, 1, 1})
		}
		st, err := h.ctl.SubscribeKvEvents(ctx, &pb.SubscribeKvEventsRequest{StartSequenceNumber: 1})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := recvAll(t, st)
		if err != nil {
			t.Fatalf("status %v, want OK", err)
		}
		if len(rs) != 1 || rs[0].GetError() == nil {
			t.Fatalf("responses %v", rs)
		}
	})
	t.Run("clear is AllBlocksCleared", func(t *testing.T) {
		st, err := h.ctl.SubscribeKvEvents(subCtx(t), &pb.SubscribeKvEventsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "subscribed", func() bool { return f.cache.Stats().Subscribed == 1 })
		f.cache.Clear()
		for {
			r, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range r.GetBatch().GetEvents() {
				if e.GetAllBlocksCleared() != nil {
					return
				}
			}
		}
	})
	t.Run("unknown rank refused", func(t *testing.T) {
		st, err := h.ctl.SubscribeKvEvents(ctx, &pb.SubscribeKvEventsRequest{DataParallelRanks: []uint32{3}})
		if err == nil {
			_, err = st.Recv()
		}
		wantStatus(t, err, codes.InvalidArgument, "INVALID_ARGUMENT")
	})
	t.Run("event sources advertise a connectable host", func(t *testing.T) {
		r, err := h.ctl.GetKvEventSources(ctx, &pb.GetKvEventSourcesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetSources()) != 1 {
			t.Fatalf("sources %v", r)
		}
		src := r.GetSources()[0]
		_, port, _ := net.SplitHostPort(h.s.GRPCAddr())
		if src.GetEndpointAddr().GetHost() != "127.0.0.1" || strconv.Itoa(int(src.GetEndpointAddr().GetPort())) != port ||
			src.GetTransport() != "grpc" || src.DataParallelRank == nil {
			t.Fatalf("source %v", src)
		}
	})
	t.Run("event sources filtered by rank", func(t *testing.T) {
		r, err := h.ctl.GetKvEventSources(ctx, &pb.GetKvEventSourcesRequest{DataParallelRanks: []uint32{5}})
		if err != nil || len(r.GetSources()) != 0 {
			t.Fatalf("sources %v, %v", r, err)
		}
	})
}

func TestBlockHashDecimal(t *testing.T) {
	for h, want := range map[uint64]string{0: "0", 42: "42", 1<<63 - 1: "9223372036854775807",
		1 << 63: "-9223372036854775808", 1<<64 - 1: "-1", 1<<63 + 5: "-9223372036854775803"} {
		if got := blockHash(h); string(got.GetValue()) != want || got.GetEncoding() != "decimal_int64" {
			t.Errorf("blockHash(%d) = %q %s, want %q", h, got.GetValue(), got.GetEncoding(), want)
		}
	}
}
