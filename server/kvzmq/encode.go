// Package kvzmq publishes the KV cache's events on a ZeroMQ PUB socket in
// vLLM's KVEventBatch msgpack encoding, the feed llm-d's precise
// prefix-cache scorer subscribes to (docs/api.md, "KV events over ZMQ").
package kvzmq

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"oengine/kvcache"
)

// Event tags: the first element of each event array (vLLM's tagged
// msgspec structs are tagged with their class names).
const (
	TagBlockStored      = "BlockStored"
	TagBlockRemoved     = "BlockRemoved"
	TagAllBlocksCleared = "AllBlocksCleared"
)

// Encode writes one batch as a msgpack array (docs/api.md, "KV events over
// ZMQ"):
//
//	KVEventBatch     [ts float64 (Unix seconds), [event...], data_parallel_rank int]
//	BlockStored      ["BlockStored", [hash uint64...], parent uint64|nil, [token int...], block_size int, lora_id int|nil, medium str|nil, lora_name nil]
//	BlockRemoved     ["BlockRemoved", [hash uint64...], medium str|nil]
//	AllBlocksCleared ["AllBlocksCleared"]
//
// medium is "GPU" for device pages and nil for the CPU engine's host pages
// (vLLM's None: the primary tier); "CPU" for an offload tier.
func Encode(b kvcache.Batch, rank uint32) ([]byte, error) {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	err := firstErr(
		e.EncodeArrayLen(3),
		e.EncodeFloat64(float64(b.UnixNano)/1e9),
		e.EncodeArrayLen(len(b.Events)),
	)
	if err != nil {
		return nil, err
	}
	for i := range b.Events {
		if err := encodeEvent(e, &b.Events[i]); err != nil {
			return nil, err
		}
	}
	if err := e.EncodeUint(uint64(rank)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func encodeEvent(e *msgpack.Encoder, ev *kvcache.Event) error {
	switch ev.Kind {
	case kvcache.BlockStored:
		errs := []error{e.EncodeArrayLen(8), e.EncodeString(TagBlockStored), encodeHashes(e, ev.Hashes)}
		if ev.HasParent {
			errs = append(errs, e.EncodeUint(ev.Parent))
		} else {
			errs = append(errs, e.EncodeNil())
		}
		errs = append(errs, e.EncodeArrayLen(len(ev.Tokens)))
		for _, t := range ev.Tokens {
			errs = append(errs, e.EncodeInt(int64(t)))
		}
		errs = append(errs, e.EncodeInt(int64(ev.BlockSize)))
		if ev.Adapter != 0 {
			errs = append(errs, e.EncodeInt(ev.Adapter))
		} else {
			errs = append(errs, e.EncodeNil())
		}
		errs = append(errs, encodeMedium(e, ev.Medium), e.EncodeNil())
		return firstErr(errs...)
	case kvcache.BlockRemoved:
		return firstErr(e.EncodeArrayLen(3), e.EncodeString(TagBlockRemoved), encodeHashes(e, ev.Hashes), encodeMedium(e, ev.Medium))
	case kvcache.AllBlocksCleared:
		return firstErr(e.EncodeArrayLen(1), e.EncodeString(TagAllBlocksCleared))
	}
	return fmt.Errorf("kvzmq: unknown event kind %v", ev.Kind)
}

func encodeHashes(e *msgpack.Encoder, hs []uint64) error {
	if err := e.EncodeArrayLen(len(hs)); err != nil {
		return err
	}
	for _, h := range hs {
		if err := e.EncodeUint(h); err != nil {
			return err
		}
	}
	return nil
}

func encodeMedium(e *msgpack.Encoder, m kvcache.Medium) error {
	switch m {
	case kvcache.MediumGPU:
		return e.EncodeString("GPU")
	case kvcache.MediumCPU:
		return e.EncodeString("CPU")
	}
	return e.EncodeNil()
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// SeqFrame is the second frame of a message: the batch's sequence number,
// 8 bytes big-endian.
func SeqFrame(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, seq)
}
