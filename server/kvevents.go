package server

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"oengine/kvcache"
	pb "oengine/proto/openengine/v1"
)

// hashEncoding names how KvBlockHash.value is written: the canonical ASCII
// decimal of the cache's uint64 block hash read as a signed 64-bit integer
// (docs/design.md §9; what Dynamo's OpenEngine sidecar accepts).
const hashEncoding = "decimal_int64"

// kvTopic is the method that serves the KV event feed.
const kvTopic = "/openengine.v1.Control/SubscribeKvEvents"

// GetKvEventSources advertises this server's own gRPC feed for rank 0 with a
// connectable host (never a wildcard).
func (c *controlService) GetKvEventSources(ctx context.Context, req *pb.GetKvEventSourcesRequest) (*pb.GetKvEventSourcesResponse, error) {
	if r := req.GetDataParallelRanks(); len(r) > 0 && !slices.Contains(r, 0) {
		return &pb.GetKvEventSourcesResponse{}, nil
	}
	host, port := c.s.advertised()
	ep := &pb.KvEndpoint{Host: host, Port: port, Protocol: "grpc"}
	return &pb.GetKvEventSourcesResponse{Sources: append([]*pb.KvEventSource{{
		Transport:        "grpc",
		EndpointAddr:     ep,
		Topic:            kvTopic,
		ReplayEndpoint:   net.JoinHostPort(host, strconv.Itoa(int(port))),
		DataParallelRank: ptr[uint32](0),
		Encoding:         "protobuf",
		SchemaVersion:    ptr[uint32](pb.SchemaRevision),
	}}, c.s.extraKvSources(host)...)}, nil
}

// KvSource is another feed of the default model's KV events, advertised by
// GetKvEventSources next to the gRPC one (the ZMQ publisher, docs/api.md
// "KV events over ZMQ"). It covers data-parallel rank 0.
type KvSource struct {
	Transport string // "zmq"
	Encoding  string // "msgpack"
	Protocol  string // KvEndpoint.protocol, e.g. "tcp"
	// Host to connect to; "" or a wildcard: the server's advertised host.
	Host  string
	Port  uint32
	Topic string
	HWM   uint32 // publisher's high-water mark; 0: not reported
}

// AddKvEventSource advertises another KV event feed.
func (s *Server) AddKvEventSource(src KvSource) {
	for {
		old := s.kvSources.Load()
		var next []KvSource
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, src)
		if s.kvSources.CompareAndSwap(old, &next) {
			return
		}
	}
}

// extraKvSources renders the added sources; advertised replaces a
// wildcard or empty host.
func (s *Server) extraKvSources(advertised string) []*pb.KvEventSource {
	list := s.kvSources.Load()
	if list == nil {
		return nil
	}
	out := make([]*pb.KvEventSource, 0, len(*list))
	for _, src := range *list {
		host := src.Host
		if ip := net.ParseIP(host); host == "" || host == "*" || (ip != nil && ip.IsUnspecified()) {
			host = advertised
		}
		ks := &pb.KvEventSource{
			Transport:        src.Transport,
			EndpointAddr:     &pb.KvEndpoint{Host: host, Port: src.Port, Protocol: src.Protocol},
			Topic:            src.Topic,
			DataParallelRank: ptr[uint32](0),
			Encoding:         src.Encoding,
		}
		if src.HWM > 0 {
			ks.Hwm = ptr(src.HWM)
		}
		out = append(out, ks)
	}
	return out
}

// AdvertisedHost is the host GetKvEventSources announces (Config.AdvertiseHost,
// else the gRPC listener's host unless a wildcard, else the hostname).
func (s *Server) AdvertisedHost() string {
	h, _ := s.advertised()
	return h
}

// advertised is the host and port announced for this server: AdvertiseHost,
// else the listener's host unless it is a wildcard, else the hostname.
func (s *Server) advertised() (string, uint32) {
	addr := s.GRPCAddr()
	if addr == "" {
		addr = s.cfg.GRPCAddr
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		host, portStr = "", "0"
	}
	port, _ := strconv.ParseUint(portStr, 10, 16)
	if s.cfg.AdvertiseHost != "" {
		return s.cfg.AdvertiseHost, uint32(port)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "localhost"
		}
		host = h
	}
	return host, uint32(port)
}

// SubscribeKvEvents streams the default model's KV cache events: first the
// snapshot (include_snapshot) or the retained backlog
// (start_sequence_number), then live batches. A failure after acceptance
// is one terminal error event and then OK.
func (c *controlService) SubscribeKvEvents(req *pb.SubscribeKvEventsRequest, stream grpc.ServerStreamingServer[pb.SubscribeKvEventsResponse]) error {
	s := c.s
	if r := req.GetDataParallelRanks(); len(r) > 0 && !slices.Contains(r, 0) {
		return invalidf("data_parallel_ranks %v: this server has rank 0 only", r).err()
	}
	if s.draining.Load() {
		return draining().err()
	}
	sub, err := s.models[0].Backend.SubscribeKV(req.GetStartSequenceNumber(), req.GetIncludeSnapshot())
	if errors.Is(err, kvcache.ErrEventWindow) {
		// Accepted, but the asked-for window is gone: one terminal error.
		return stream.Send(kvError(invalidf("kv events: %v; resubscribe with include_snapshot", err)))
	}
	if err != nil {
		if errors.Is(err, kvcache.ErrClosed) {
			return draining().err()
		}
		return statusErr(err)
	}
	defer sub.Close()

	if req.GetIncludeSnapshot() {
		// The snapshot reflects everything up to AsOf, backlog included.
		if err := stream.Send(kvBatch(sub.AsOf, time.Now().UnixNano(), sub.Snapshot)); err != nil {
			return err
		}
	} else {
		for _, b := range sub.Backlog {
			if err := stream.Send(kvBatch(b.Seq, b.UnixNano, b.Events)); err != nil {
				return err
			}
		}
	}
	ctx := stream.Context()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.stop:
			return stream.Send(kvError(draining()))
		case b, ok := <-sub.C():
			if !ok {
				switch err := sub.Err(); {
				case errors.Is(err, kvcache.ErrSlowSubscriber):
					return stream.Send(kvError(newAPIError(codes.ResourceExhausted, "OVERLOADED", pb.ErrorCode_ERROR_CODE_OVERLOADED,
						"kv events: subscriber too slow, dropped; resubscribe with start_sequence_number")))
				case err != nil:
					return stream.Send(kvError(draining()))
				}
				return nil
			}
			if err := stream.Send(kvBatch(b.Seq, b.UnixNano, b.Events)); err != nil {
				return err
			}
		}
	}
}

func kvError(e *apiError) *pb.SubscribeKvEventsResponse {
	return &pb.SubscribeKvEventsResponse{Event: &pb.SubscribeKvEventsResponse_Error{Error: e.event()}}
}

func kvBatch(seq uint64, unixNano int64, events []kvcache.Event) *pb.SubscribeKvEventsResponse {
	b := &pb.KvEventBatch{SequenceNumber: seq, TimestampUnixNanos: uint64(max(unixNano, 0)), DataParallelRank: 0}
	for i := range events {
		b.Events = append(b.Events, kvEvent(&events[i]))
	}
	return &pb.SubscribeKvEventsResponse{Event: &pb.SubscribeKvEventsResponse_Batch{Batch: b}}
}

func kvEvent(e *kvcache.Event) *pb.KvEvent {
	switch e.Kind {
	case kvcache.BlockStored:
		bs := &pb.BlockStored{
			BlockHashes: hashes(e.Hashes),
			BlockSize:   clampU32(e.BlockSize),
			LoraId:      e.Adapter,
			Medium:      pb.StorageMedium(e.Medium),
		}
		if e.HasParent {
			bs.ParentBlockHash = blockHash(e.Parent)
		}
		for _, t := range e.Tokens {
			bs.TokenIds = append(bs.TokenIds, uint32(t))
		}
		return &pb.KvEvent{Event: &pb.KvEvent_BlockStored{BlockStored: bs}}
	case kvcache.BlockRemoved:
		return &pb.KvEvent{Event: &pb.KvEvent_BlockRemoved{BlockRemoved: &pb.BlockRemoved{
			BlockHashes: hashes(e.Hashes), Medium: pb.StorageMedium(e.Medium)}}}
	}
	return &pb.KvEvent{Event: &pb.KvEvent_AllBlocksCleared{AllBlocksCleared: &pb.AllBlocksCleared{}}}
}

func hashes(hs []uint64) []*pb.KvBlockHash {
	out := make([]*pb.KvBlockHash, len(hs))
	for i, h := range hs {
		out[i] = blockHash(h)
	}
	return out
}

func blockHash(h uint64) *pb.KvBlockHash {
	return &pb.KvBlockHash{Value: strconv.AppendInt(nil, int64(h), 10), Encoding: hashEncoding}
}
