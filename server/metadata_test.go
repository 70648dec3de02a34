package server

import (
	"strconv"
	"testing"

	"google.golang.org/grpc/metadata"
)

func TestParseMeta(t *testing.T) {
	cases := []struct {
		name    string
		kv      []string
		wantErr bool
		want    callMeta
	}{
		{"empty", nil, false, callMeta{}},
		{"all keys", []string{mdRoutingKey, "r1", mdTargetDPRank, "0", mdPriority, "-7", mdTraceparent, "tp", mdTracestate, "ts"}, false,
			callMeta{RoutingKey: "r1", HasDPRank: true, Priority: -7, Traceparent: "tp", Tracestate: "ts"}},
		{"max uint32 rank", []string{mdTargetDPRank, "4294967295"}, false, callMeta{DPRank: 4294967295, HasDPRank: true}},
		{"min int32 priority", []string{mdPriority, "-2147483648"}, false, callMeta{Priority: -2147483648}},
		{"unknown openengine key ignored", []string{"openengine-next", "x"}, false, callMeta{}},
		{"repeated unknown openengine key", []string{"openengine-next", "x", "openengine-next", "y"}, true, callMeta{}},
		{"repeated traceparent is not an openengine key", []string{mdTraceparent, "a", mdTraceparent, "b"}, false, callMeta{Traceparent: "a"}},
		{"rank overflow", []string{mdTargetDPRank, "4294967296"}, true, callMeta{}},
		{"rank hex", []string{mdTargetDPRank, "0x1"}, true, callMeta{}},
		{"rank signed", []string{mdTargetDPRank, "+1"}, true, callMeta{}},
		{"rank empty", []string{mdTargetDPRank, ""}, true, callMeta{}},
		{"priority underscore", []string{mdPriority, "1_0"}, true, callMeta{}},
		{"priority spaces", []string{mdPriority, " 1"}, true, callMeta{}},
		{"priority only minus", []string{mdPriority, "-"}, true, callMeta{}},
		{"routing key empty", []string{mdRoutingKey, ""}, true, callMeta{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMeta(metadata.Pairs(tc.kv...))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if err != nil && reasonOf(err) != reasonInvalidArgument {
				t.Fatalf("reason %s", reasonOf(err))
			}
		})
	}
}

// FuzzParseMeta: any metadata either parses to values that print back to
// the input or is refused as INVALID_ARGUMENT; nothing panics.
func FuzzParseMeta(f *testing.F) {
	for _, s := range []string{"0", "-1", "2147483647", "x", "", "+5", "007", "99999999999"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, prio, rank string) {
		m, err := parseMeta(metadata.Pairs(mdPriority, prio, mdTargetDPRank, rank))
		if err != nil {
			if reasonOf(err) != reasonInvalidArgument {
				t.Fatalf("reason %s", reasonOf(err))
			}
			return
		}
		p, _ := strconv.ParseInt(prio, 10, 32)
		r, _ := strconv.ParseUint(rank, 10, 32)
		if int64(m.Priority) != p || uint64(m.DPRank) != r || !m.HasDPRank {
			t.Fatalf("parsed %+v from %q, %q", m, prio, rank)
		}
	})
}
