package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"oengine/engine"
	"oengine/loader"
	"oengine/model/gguf"
	pb "oengine/proto/openengine/v1"
	"oengine/server/kvzmq"
)

// This file plays the rules Dynamo's OpenEngine sidecar enforces on a worker
// (docs/deploy.md, "Dynamo"; docs/api.md, "KV events for external routers")
// against the real engine over TCP.

// tinyModel loads one of the tiny reference models with cfg and returns the
// served model, its ID set the way `oengine serve` does (the file's
// absolute path).
func tinyModel(t *testing.T, file, name string, cfg engine.Config) Model {
	t.Helper()
	path, err := filepath.Abs(filepath.Join(testdataDir(t), "models", file))
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cfg.Logger = quietLogger()
	lm, err := loader.Load(f, loader.Options{Name: name, Threads: 2, Engine: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lm.Close)
	m := NewModel(lm.Engine, nil)
	m.ID = path
	return m
}

// sidecarDiscover checks GetServerInfo, GetModelInfo, Health and
// GetKvEventSources as the sidecar reads them and returns the model name.
func sidecarDiscover(t *testing.T, h *harness, modelFile string) string {
	t.Helper()
	ctx := ctxT(t)
	si, err := h.ctl.GetServerInfo(ctx, &pb.GetServerInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if si.GetSchemaRevision() < 1 || si.GetMinimumClientRevision() > 1 {
		t.Fatalf("schema revision %d, minimum client revision %d", si.GetSchemaRevision(), si.GetMinimumClientRevision())
	}
	if !regexp.MustCompile(`^([0-9a-f]{32}|[0-9a-f]{40})$`).MatchString(si.GetSchemaRelease()) {
		t.Fatalf("schema_release %q is not an immutable commit", si.GetSchemaRelease())
	}
	if len(si.GetSupportedModels()) != 1 {
		t.Fatalf("supported_models %q: the sidecar needs exactly one", si.GetSupportedModels())
	}
	name := si.GetSupportedModels()[0]
	cov := si.GetExtra().GetFields()
	if cov["kv_events_model"].GetStringValue() != name {
		t.Fatalf("extra %v does not say the KV events cover %q", si.GetExtra(), name)
	}

	mi, err := h.ctl.GetModelInfo(ctx, &pb.GetModelInfoRequest{Model: name})
	if err != nil {
		t.Fatal(err)
	}
	if mi.GetServedModelName() != name && mi.GetModelId() != name {
		t.Fatalf("model info %q/%q does not answer to %q", mi.GetModelId(), mi.GetServedModelName(), name)
	}
	// model_id is the tokenizer source: it must open as the model file.
	got, err := os.Stat(mi.GetModelId())
	if err != nil {
		t.Fatalf("model_id %q does not resolve: %v", mi.GetModelId(), err)
	}
	want, err := os.Stat(modelFile)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(got, want) {
		t.Fatalf("model_id %q is not the model file %s", mi.GetModelId(), modelFile)
	}

	hr, err := h.ctl.Health(ctx, &pb.HealthRequest{})
	if err != nil || hr.GetState() != pb.HealthState_HEALTH_STATE_READY {
		t.Fatalf("health %v, %v", hr, err)
	}

	srcs, err := h.ctl.GetKvEventSources(ctx, &pb.GetKvEventSourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs.GetSources()) == 0 {
		t.Fatal("no KV event source")
	}
	ranks := map[uint32]bool{}
	for _, s := range srcs.GetSources() {
		if s.DataParallelRank == nil {
			t.Fatalf("source without data_parallel_rank: %v", s)
		}
		ranks[s.GetDataParallelRank()] = true
		ok := s.GetTransport() == "grpc" && s.GetEncoding() == "protobuf" ||
			s.GetTransport() == "zmq" && s.GetEncoding() == "msgpack"
		if !ok {
			t.Fatalf("source %v: transport/encoding not consumable", s)
		}
		host := s.GetEndpointAddr().GetHost()
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) || s.GetEndpointAddr().GetPort() == 0 {
			t.Fatalf("source %v: endpoint not connectable", s)
		}
	}
	for r := uint32(0); r < si.GetParallelism().GetDataParallelSize(); r++ {
		if !ranks[si.GetParallelism().GetDataParallelStartRank()+r] {
			t.Fatalf("rank %d has no KV event source", r)
		}
	}
	return name
}

// sidecarFeed reads a SubscribeKvEvents stream opened the sidecar's way and
// checks every batch and event against its rules; it records the hashes.
type sidecarFeed struct {
	t       *testing.T
	mu      sync.Mutex
	lastSeq uint64
	batches int
	stored  map[string]bool // every hash ever announced stored
	live    map[string]bool // stored and not removed since
	removed int
	events  []*pb.BlockStored
	err     error
	done    chan struct{}
}

func subscribeLikeSidecar(t *testing.T, ctx context.Context, h *harness) *sidecarFeed {
	t.Helper()
	st, err := h.ctl.SubscribeKvEvents(ctx, &pb.SubscribeKvEventsRequest{
		DataParallelRanks: []uint32{0}, IncludeSnapshot: false, StartSequenceNumber: 0})
	if err != nil {
		t.Fatal(err)
	}
	f := &sidecarFeed{t: t, stored: map[string]bool{}, live: map[string]bool{}, done: make(chan struct{})}
	go f.run(st)
	return f
}

func (f *sidecarFeed) run(st grpc.ServerStreamingClient[pb.SubscribeKvEventsResponse]) {
	defer close(f.done)
	for {
		r, err := st.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) && st.Context().Err() == nil {
				f.fail(fmt.Errorf("stream: %w", err))
			}
			return
		}
		if e := r.GetError(); e != nil {
			f.fail(fmt.Errorf("terminal error event %v", e))
			return
		}
		if err := f.batch(r.GetBatch()); err != nil {
			f.fail(err)
			return
		}
	}
}

func (f *sidecarFeed) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

// canonicalHash checks a KvBlockHash is decimal_int64 in canonical form.
func canonicalHash(h *pb.KvBlockHash) (string, error) {
	if h.GetEncoding() != "decimal_int64" {
		return "", fmt.Errorf("hash encoding %q", h.GetEncoding())
	}
	v := string(h.GetValue())
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != v {
		return "", fmt.Errorf("hash %q is not a canonical signed 64-bit decimal", v)
	}
	return v, nil
}

func (f *sidecarFeed) batch(b *pb.KvEventBatch) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b.GetDataParallelRank() != 0 {
		return fmt.Errorf("batch of rank %d on a rank-0 subscription", b.GetDataParallelRank())
	}
	if f.batches > 0 && b.GetSequenceNumber() != f.lastSeq+1 {
		return fmt.Errorf("sequence %d after %d: a gap or repeat", b.GetSequenceNumber(), f.lastSeq)
	}
	f.lastSeq = b.GetSequenceNumber()
	f.batches++
	for _, ev := range b.GetEvents() {
		switch e := ev.GetEvent().(type) {
		case *pb.KvEvent_BlockStored:
			bs := e.BlockStored
			if bs.GetBlockSize() == 0 || len(bs.GetTokenIds()) != int(bs.GetBlockSize())*len(bs.GetBlockHashes()) || len(bs.GetBlockHashes()) == 0 {
				return fmt.Errorf("BlockStored shape: block_size %d, %d tokens, %d hashes", bs.GetBlockSize(), len(bs.GetTokenIds()), len(bs.GetBlockHashes()))
			}
			if bs.GetKvCacheSpecKind() != "" || bs.GetLoraId() != 0 {
				return fmt.Errorf("BlockStored spec kind %q, lora %d %q", bs.GetKvCacheSpecKind(), bs.GetLoraId(), bs.GetLoraName())
			}
			if m := bs.GetMedium(); m != pb.StorageMedium_STORAGE_MEDIUM_UNSPECIFIED && m != pb.StorageMedium_STORAGE_MEDIUM_GPU {
				return fmt.Errorf("BlockStored medium %v is dropped by the sidecar", m)
			}
			if p := bs.GetParentBlockHash(); p != nil {
				if _, err := canonicalHash(p); err != nil {
					return fmt.Errorf("parent: %w", err)
				}
			}
			for _, h := range bs.GetBlockHashes() {
				v, err := canonicalHash(h)
				if err != nil {
					return err
				}
				f.stored[v], f.live[v] = true, true
			}
			f.events = append(f.events, bs)
		case *pb.KvEvent_BlockRemoved:
			br := e.BlockRemoved
			if m := br.GetMedium(); m != pb.StorageMedium_STORAGE_MEDIUM_UNSPECIFIED && m != pb.StorageMedium_STORAGE_MEDIUM_GPU {
				return fmt.Errorf("BlockRemoved medium %v", m)
			}
			for _, h := range br.GetBlockHashes() {
				v, err := canonicalHash(h)
				if err != nil {
					return err
				}
				if !f.live[v] {
					return fmt.Errorf("BlockRemoved %s was never announced stored (or removed twice)", v)
				}
				delete(f.live, v)
				f.removed++
			}
		case *pb.KvEvent_AllBlocksCleared:
			clear(f.live)
		default:
			return fmt.Errorf("event without a kind: %v", ev)
		}
	}
	return nil
}

// snapshot returns the feed's figures under its lock.
func (f *sidecarFeed) snapshot() (err error, seq uint64, stored []*pb.BlockStored, removed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err, f.lastSeq, append([]*pb.BlockStored(nil), f.events...), f.removed
}

// checkGenerate applies the sidecar's Generate rules: output_index on token
// and finished events, usage only on the finished event, nothing after it.
func checkGenerate(t *testing.T, rs []*pb.GenerateResponse) {
	t.Helper()
	finished := false
	for i, r := range rs {
		if finished {
			t.Fatalf("response %d after the finished event: %v", i, r)
		}
		switch {
		case r.GetToken() != nil:
			if r.GetToken().OutputIndex == nil {
				t.Fatalf("token event without output_index: %v", r)
			}
		case r.GetFinished() != nil:
			finished = true
			if r.GetFinished().OutputIndex == nil {
				t.Fatalf("finished event without output_index: %v", r)
			}
		}
		if (r.GetUsage() != nil) != finished {
			t.Fatalf("response %d: usage only on the finished event: %v", i, r)
		}
	}
	if !finished {
		t.Fatal("no finished event")
	}
}

// TestSidecarRules: discovery, then three token-id prompts sharing a
// 48-token prefix; every KV event passes the sidecar's checks and the
// shared blocks are announced once, parents chained.
func TestSidecarRules(t *testing.T) {
	main := tinyModel(t, "tiny-llama-f16.gguf", "tiny-llama", engine.Config{PageSize: 16, KVPages: 64, MaxRunning: 4})
	// A --fast-model: served by name, kept out of the sidecar's view.
	fast := tinyModel(t, "tiny-llama-q4_0.gguf", "tiny-fast", engine.Config{PageSize: 16, KVPages: 16, MaxRunning: 2})
	fast.Auxiliary = true
	h := startServer(t, testConfig(), main, fast)
	name := sidecarDiscover(t, h, main.ID)
	if name != "tiny-llama" {
		t.Fatalf("supported model %q", name)
	}
	ctx := ctxT(t)
	li, err := h.ctl.GetLoad(ctx, &pb.GetLoadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if li.GetTotalKvBlocks() != 64 || li.GetAttributes().GetFields()["models"].GetListValue().GetValues()[0].GetStringValue() != "tiny-llama" {
		t.Fatalf("GetLoad covers more than the listed model: %v", li)
	}
	// The auxiliary model still answers by name.
	if _, err := h.ctl.GetModelInfo(ctx, &pb.GetModelInfoRequest{Model: "tiny-fast"}); err != nil {
		t.Fatal(err)
	}

	subCtx, cancel := context.WithCancel(ctx)
	feed := subscribeLikeSidecar(t, subCtx, h)
	defer func() { cancel(); <-feed.done }()
	eventually(t, "subscribed", func() bool { return main.Engine.Cache().Stats().Subscribed == 1 })

	prefix := make([]uint32, 48)
	for i := range prefix {
		prefix[i] = uint32(100 + i)
	}
	for p := range 3 {
		ids := append([]uint32(nil), prefix...)
		for i := range 16 {
			ids = append(ids, uint32(1000+p*16+i))
		}
		req := tokens(ids...)
		req.Model = name
		req.Sampling = &pb.SamplingParams{Temperature: proto.Float64(0)}
		req.Stopping = &pb.StoppingOptions{MaxTokens: proto.Uint32(2), IgnoreEos: proto.Bool(true)}
		rs, err := h.generate(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		checkGenerate(t, rs)
	}
	// Prompt 1 stores 4 blocks (3 shared + its own); prompts 2 and 3 one
	// each, whose parent is the last shared block.
	var stored []*pb.BlockStored
	eventually(t, "6 blocks announced", func() bool {
		err, _, s, _ := feed.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, bs := range s {
			n += len(bs.GetBlockHashes())
		}
		stored = s
		return n >= 6
	})
	var hashes []string
	parents := map[string]int{}
	for _, bs := range stored {
		for _, h := range bs.GetBlockHashes() {
			hashes = append(hashes, string(h.GetValue()))
		}
		if p := bs.GetParentBlockHash(); p != nil {
			parents[string(p.GetValue())]++
		}
		if bs.GetBlockSize() != 16 {
			t.Fatalf("block size %d", bs.GetBlockSize())
		}
	}
	if len(hashes) != 6 {
		t.Fatalf("%d blocks announced, want 6 (3 shared once + 1 per prompt): %v", len(hashes), stored)
	}
	if got := stored[0].GetTokenIds()[:48]; !slicesEqualU32(got, prefix) {
		t.Fatalf("first BlockStored tokens %v", got)
	}
	if parents[hashes[2]] != 2 {
		t.Fatalf("the prompts' own blocks do not all chain to the shared prefix: parents %v, hashes %v", parents, hashes)
	}
}

func slicesEqualU32(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSidecarSequenceAcrossEvictions: 1000 token-id requests through a
// small KV pool on one subscription; sequence numbers stay consecutive and
// every BlockRemoved hash was announced by an earlier BlockStored.
func TestSidecarSequenceAcrossEvictions(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	// 24 pages of 4 tokens: a request holds at most 4, so the cached
	// prefixes of 40 families keep being evicted.
	main := tinyModel(t, "tiny-llama-f16.gguf", "tiny-llama", engine.Config{PageSize: 4, KVPages: 24, MaxRunning: 4, MaxBatchedTokens: 64})
	h := startServer(t, testConfig(), main)
	name := sidecarDiscover(t, h, main.ID)
	ctx := ctxT(t)
	subCtx, cancel := context.WithCancel(ctx)
	feed := subscribeLikeSidecar(t, subCtx, h)
	defer func() { cancel(); <-feed.done }()
	eventually(t, "subscribed", func() bool { return main.Engine.Cache().Stats().Subscribed == 1 })

	const clients = 4
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < n; i += clients {
				fam := uint32(i % 40)
				// 8 tokens of the family's prefix (2 blocks), 4 of the request.
				ids := []uint32{200 + fam, 300 + fam, 400 + fam, 500 + fam, 600 + fam, 700 + fam, 800 + fam, 900 + fam,
					2000 + uint32(i%7), 3000 + uint32(i%11), 4000 + uint32(i%13), 5000 + uint32(i%3)}
				req := tokens(ids...)
				req.Model = name
				req.Sampling = &pb.SamplingParams{Temperature: proto.Float64(0)}
				req.Stopping = &pb.StoppingOptions{MaxTokens: proto.Uint32(1), IgnoreEos: proto.Bool(true)}
				if _, err := h.generate(ctx, req); err != nil {
					errs <- fmt.Errorf("request %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	last := main.Engine.Cache().Stats().LastSeq
	eventually(t, "every batch delivered", func() bool {
		err, seq, _, _ := feed.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		return seq == last
	})
	err, seq, stored, removed := feed.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if removed == 0 {
		t.Fatalf("no BlockRemoved in %d requests: the pool never evicted", n)
	}
	t.Logf("%d requests: %d batches up to sequence %d, %d BlockStored events, %d blocks removed", n, feed.batches, seq, len(stored), removed)
}

// TestKvEventSourcesWithZMQ: with the ZMQ publisher on, GetKvEventSources
// lists it as zmq/msgpack with a connectable host (the wildcard bind host
// replaced by the advertised one) and the bound port, rank 0, next to the
// gRPC feed; the sidecar's discovery rules still pass.
func TestKvEventSourcesWithZMQ(t *testing.T) {
	main := tinyModel(t, "tiny-llama-f16.gguf", "tiny-llama", engine.Config{PageSize: 16, KVPages: 16, MaxRunning: 2})
	cfg := testConfig()
	cfg.AdvertiseHost = "node-a.example"
	h := startServer(t, cfg, main)
	p, err := kvzmq.Start(kvzmq.Config{Endpoint: "tcp://0.0.0.0:0", Topic: "kv@node-a.example@tiny-llama", Logger: quietLogger()},
		main.Engine.Cache().Subscribe)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h.s.AddKvEventSource(KvSource{Transport: "zmq", Encoding: "msgpack", Protocol: "tcp", Host: "0.0.0.0", Port: uint32(p.Port()), Topic: p.Topic()})
	sidecarDiscover(t, h, main.ID)

	srcs, err := h.ctl.GetKvEventSources(ctxT(t), &pb.GetKvEventSourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, s := range srcs.GetSources() {
		kinds = append(kinds, s.GetTransport()+"/"+s.GetEncoding())
		if s.GetTransport() == "zmq" {
			ep := s.GetEndpointAddr()
			if ep.GetHost() != "node-a.example" || int(ep.GetPort()) != p.Port() || s.GetTopic() != p.Topic() || s.GetDataParallelRank() != 0 {
				t.Fatalf("zmq source %v", s)
			}
		}
	}
	if fmt.Sprint(kinds) != "[grpc/protobuf zmq/msgpack]" {
		t.Fatalf("sources %v", kinds)
	}
}
