package kvzmq

import (
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"oengine/kvcache"
)

// TestEncodeShape decodes Encode's output generically and checks the
// array layout of docs/api.md, "KV events over ZMQ" (the Python round trip
// in publisher_test.go checks it with an independent decoder).
func TestEncodeShape(t *testing.T) {
	b := kvcache.Batch{Seq: 9, UnixNano: 1_500_000_000, Events: []kvcache.Event{
		{Kind: kvcache.BlockStored, Hashes: []uint64{1 << 63, 7}, Parent: 5, HasParent: true, Tokens: []int32{1, 2, 3, 4}, BlockSize: 2, Medium: kvcache.MediumGPU},
		{Kind: kvcache.BlockStored, Hashes: []uint64{3}, Tokens: []int32{9, 9}, BlockSize: 2, Adapter: 4},
		{Kind: kvcache.BlockRemoved, Hashes: []uint64{7}},
		{Kind: kvcache.AllBlocksCleared},
	}}
	raw, err := Encode(b, 2)
	if err != nil {
		t.Fatal(err)
	}
	var got []any
	if err := msgpack.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := []any{1.5, []any{
		[]any{"BlockStored", []any{uint64(1 << 63), int8(7)}, int8(5), []any{int8(1), int8(2), int8(3), int8(4)}, int8(2), nil, "GPU", nil},
		[]any{"BlockStored", []any{int8(3)}, nil, []any{int8(9), int8(9)}, int8(2), int8(4), nil, nil},
		[]any{"BlockRemoved", []any{int8(7)}, nil},
		[]any{"AllBlocksCleared"},
	}, int8(2)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n %#v\nwant\n %#v", got, want)
	}
}

func TestParseEndpoint(t *testing.T) {
	cases := []struct {
		ep, host string
		port     int
		bad      bool
	}{
		{ep: "tcp://*:5556", host: "*", port: 5556},
		{ep: "tcp://10.0.0.1:5557", host: "10.0.0.1", port: 5557},
		{ep: "tcp://[::1]:0", host: "::1", port: 0},
		{ep: "ipc:///tmp/x", bad: true},
		{ep: "tcp://host", bad: true},
		{ep: "tcp://host:99999", bad: true},
		{ep: "host:1", bad: true},
	}
	for _, tc := range cases {
		h, p, err := ParseEndpoint(tc.ep)
		if (err != nil) != tc.bad || (!tc.bad && (h != tc.host || p != tc.port)) {
			t.Errorf("ParseEndpoint(%q) = %q, %d, %v", tc.ep, h, p, err)
		}
	}
}
