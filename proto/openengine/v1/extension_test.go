package openenginev1_test

import (
	"slices"
	"strconv"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	openenginev1 "oengine/proto/openengine/v1"
)

// additions lists what ours has beyond upstream: each element of a new file
// ("file F: X") and each field added to an upstream message ("M.f = N").
func additions(upstream, ours []*descriptorpb.FileDescriptorProto) []string {
	up := map[string]*descriptorpb.FileDescriptorProto{}
	for _, f := range upstream {
		up[f.GetName()] = f
	}
	var out []string
	for _, f := range ours {
		uf, ok := up[f.GetName()]
		if !ok {
			for _, e := range f.GetEnumType() {
				out = append(out, "file "+f.GetName()+": enum "+e.GetName())
			}
			for _, m := range f.GetMessageType() {
				out = append(out, "file "+f.GetName()+": message "+m.GetName())
			}
			for _, s := range f.GetService() {
				out = append(out, "file "+f.GetName()+": service "+s.GetName())
			}
			continue
		}
		for _, m := range f.GetMessageType() {
			i := slices.IndexFunc(uf.GetMessageType(), func(x *descriptorpb.DescriptorProto) bool { return x.GetName() == m.GetName() })
			if i < 0 {
				continue // reported by wireDiff
			}
			um := uf.GetMessageType()[i]
			for _, fld := range m.GetField() {
				if !slices.ContainsFunc(um.GetField(), func(x *descriptorpb.FieldDescriptorProto) bool { return x.GetName() == fld.GetName() }) {
					out = append(out, m.GetName()+"."+fld.GetName()+" = "+strconv.Itoa(int(fld.GetNumber())))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestAdditionsAreExactlyTheExtension pins every addition to upstream to the
// list in shared/openengine/extension.md, so that nothing unplanned slips
// onto the wire.
func TestAdditionsAreExactlyTheExtension(t *testing.T) {
	want := []string{
		"GenerateRequest.session = 1000",
		"GenerateResponse.input_ack = 1000",
		"ModelInfo.sessions = 1000",
		"ModelInfo.streaming_input = 1001",
		"file openengine/v1/extension_types.proto: enum ContinuationMode",
		"file openengine/v1/extension_types.proto: message GenerationSessionContinuation",
		"file openengine/v1/extension_types.proto: message GenerationSessionRef",
		"file openengine/v1/extension_types.proto: message InputAck",
		"file openengine/v1/extension_types.proto: message SessionCapabilities",
		"file openengine/v1/extension_types.proto: message StreamingInputCapabilities",
		"file openengine/v1/sessions.proto: enum CloseStatus",
		"file openengine/v1/sessions.proto: enum GenerationSessionState",
		"file openengine/v1/sessions.proto: message CloseGenerationSessionRequest",
		"file openengine/v1/sessions.proto: message CloseGenerationSessionResponse",
		"file openengine/v1/sessions.proto: message GenerationSession",
		"file openengine/v1/sessions.proto: message GetGenerationSessionRequest",
		"file openengine/v1/sessions.proto: message OpenGenerationSessionRequest",
		"file openengine/v1/sessions.proto: message RenewGenerationSessionRequest",
		"file openengine/v1/sessions.proto: service OpenEngineSessions",
		"file openengine/v1/streaming.proto: message EndOfInput",
		"file openengine/v1/streaming.proto: message GenerateStreamRequest",
		"file openengine/v1/streaming.proto: message InputChunk",
		"file openengine/v1/streaming.proto: message StreamStart",
		"file openengine/v1/streaming.proto: service OpenEngineStreaming",
	}
	got := additions(upstreamSet(t), oursSet(t))
	if !slices.Equal(got, want) {
		t.Fatalf("additions differ\n got: %q\nwant: %q", got, want)
	}
}

// TestExtensionShape checks the extension's field numbers, kinds and
// streaming flags against extension.md.
func TestExtensionShape(t *testing.T) {
	type fieldWant struct {
		msg, field string
		number     protoreflect.FieldNumber
		kind       protoreflect.Kind
		typeName   protoreflect.FullName // message or enum type, if any
		list       bool
		optional   bool   // proto3 optional
		oneof      string // real oneof name, if any
	}
	fields := []fieldWant{
		{"GenerateRequest", "session", 1000, protoreflect.MessageKind, "openengine.v1.GenerationSessionContinuation", false, false, ""},
		{"GenerateResponse", "input_ack", 1000, protoreflect.MessageKind, "openengine.v1.InputAck", false, false, "event"},
		{"ModelInfo", "sessions", 1000, protoreflect.MessageKind, "openengine.v1.SessionCapabilities", false, false, ""},
		{"ModelInfo", "streaming_input", 1001, protoreflect.MessageKind, "openengine.v1.StreamingInputCapabilities", false, false, ""},
		{"GenerationSessionRef", "owner_instance_id", 2, protoreflect.StringKind, "", false, false, ""},
		{"GenerationSessionContinuation", "mode", 2, protoreflect.EnumKind, "openengine.v1.ContinuationMode", false, false, ""},
		{"GenerationSessionContinuation", "from_token", 3, protoreflect.Uint32Kind, "", false, true, ""},
		{"InputAck", "prefilled_tokens", 2, protoreflect.Uint64Kind, "", false, false, ""},
		{"SessionCapabilities", "modes", 2, protoreflect.EnumKind, "openengine.v1.ContinuationMode", true, false, ""},
		{"SessionCapabilities", "max_pinned_kv_blocks", 7, protoreflect.Uint64Kind, "", false, true, ""},
		{"SessionCapabilities", "migration_supported", 9, protoreflect.BoolKind, "", false, true, ""},
		{"StreamingInputCapabilities", "modalities", 2, protoreflect.StringKind, "", true, false, ""},
		{"StreamingInputCapabilities", "input_idle_timeout_ms", 8, protoreflect.Uint64Kind, "", false, true, ""},
		{"OpenGenerationSessionRequest", "lease_ms", 4, protoreflect.Uint64Kind, "", false, true, ""},
		{"OpenGenerationSessionRequest", "prompt", 5, protoreflect.StringKind, "", false, false, "initial_input"},
		{"OpenGenerationSessionRequest", "token_ids", 6, protoreflect.MessageKind, "openengine.v1.TokenIds", false, false, "initial_input"},
		{"GenerationSession", "state", 4, protoreflect.EnumKind, "openengine.v1.GenerationSessionState", false, false, ""},
		{"GenerationSession", "resident_tokens", 10, protoreflect.Uint32Kind, "", false, false, ""},
		{"GenerationSession", "pinned_kv_blocks", 11, protoreflect.Uint64Kind, "", false, false, ""},
		{"GenerationSession", "turn_offsets", 14, protoreflect.Uint32Kind, "", true, false, ""},
		{"GetGenerationSessionRequest", "include_tokens", 2, protoreflect.BoolKind, "", false, false, ""},
		{"RenewGenerationSessionRequest", "lease_ms", 2, protoreflect.Uint64Kind, "", false, true, ""},
		{"CloseGenerationSessionResponse", "session", 2, protoreflect.MessageKind, "openengine.v1.GenerationSession", false, false, ""},
		{"GenerateStreamRequest", "end_of_input", 3, protoreflect.MessageKind, "openengine.v1.EndOfInput", false, false, "frame"},
		{"StreamStart", "request", 1, protoreflect.MessageKind, "openengine.v1.GenerateRequest", false, false, ""},
		{"StreamStart", "close_session_on_cancel", 3, protoreflect.BoolKind, "", false, false, ""},
		{"InputChunk", "seq", 1, protoreflect.Uint64Kind, "", false, false, ""},
		{"InputChunk", "token_ids", 3, protoreflect.MessageKind, "openengine.v1.TokenIds", false, false, "data"},
		{"EndOfInput", "final_seq", 1, protoreflect.Uint64Kind, "", false, true, ""},
	}
	for _, w := range fields {
		t.Run(w.msg+"."+w.field, func(t *testing.T) {
			d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName("openengine.v1." + w.msg))
			if err != nil {
				t.Fatal(err)
			}
			f := d.(protoreflect.MessageDescriptor).Fields().ByName(protoreflect.Name(w.field))
			if f == nil {
				t.Fatal("field missing")
			}
			if f.Number() != w.number || f.Kind() != w.kind || f.IsList() != w.list || f.HasOptionalKeyword() != w.optional {
				t.Fatalf("got number %d kind %v list %v optional %v", f.Number(), f.Kind(), f.IsList(), f.HasOptionalKeyword())
			}
			var tn protoreflect.FullName
			if f.Message() != nil {
				tn = f.Message().FullName()
			} else if f.Enum() != nil {
				tn = f.Enum().FullName()
			}
			if tn != w.typeName {
				t.Fatalf("type %q, want %q", tn, w.typeName)
			}
			var oneof string
			if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
				oneof = string(o.Name())
			}
			if oneof != w.oneof {
				t.Fatalf("oneof %q, want %q", oneof, w.oneof)
			}
		})
	}

	t.Run("extension_types imports nothing", func(t *testing.T) {
		if n := openenginev1.File_openengine_v1_extension_types_proto.Imports().Len(); n != 0 {
			t.Fatalf("extension_types.proto has %d imports", n)
		}
	})
	t.Run("sessions service", func(t *testing.T) {
		s := openenginev1.File_openengine_v1_sessions_proto.Services().ByName("OpenEngineSessions")
		if s == nil || s.Methods().Len() != 4 {
			t.Fatal("OpenEngineSessions missing or wrong method count")
		}
		for _, m := range []string{"OpenGenerationSession", "GetGenerationSession", "RenewGenerationSession"} {
			md := s.Methods().ByName(protoreflect.Name(m))
			if md == nil || md.Output().FullName() != "openengine.v1.GenerationSession" || md.IsStreamingClient() || md.IsStreamingServer() {
				t.Fatalf("%s: wrong shape", m)
			}
		}
	})
	t.Run("streaming service is bidirectional", func(t *testing.T) {
		s := openenginev1.File_openengine_v1_streaming_proto.Services().ByName("OpenEngineStreaming")
		m := s.Methods().ByName("GenerateStream")
		if !m.IsStreamingClient() || !m.IsStreamingServer() ||
			m.Input().FullName() != "openengine.v1.GenerateStreamRequest" || m.Output().FullName() != "openengine.v1.GenerateResponse" {
			t.Fatal("GenerateStream: wrong shape")
		}
	})
	t.Run("enum values", func(t *testing.T) {
		cases := map[protoreflect.FullName][]string{
			"openengine.v1.ContinuationMode":       {"CONTINUATION_MODE_UNSPECIFIED", "CONTINUATION_MODE_APPEND", "CONTINUATION_MODE_DROP_OUTPUT", "CONTINUATION_MODE_BRANCH", "CONTINUATION_MODE_REPLACE"},
			"openengine.v1.GenerationSessionState": {"GENERATION_SESSION_STATE_UNSPECIFIED", "GENERATION_SESSION_STATE_IDLE", "GENERATION_SESSION_STATE_RUNNING", "GENERATION_SESSION_STATE_EXPIRED", "GENERATION_SESSION_STATE_CLOSED", "GENERATION_SESSION_STATE_EVICTED"},
			"openengine.v1.CloseStatus":            {"CLOSE_STATUS_UNSPECIFIED", "CLOSE_STATUS_CLOSED", "CLOSE_STATUS_ALREADY_CLOSED", "CLOSE_STATUS_EXPIRED"},
		}
		for name, values := range cases {
			d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
			if err != nil {
				t.Fatal(err)
			}
			vs := d.(protoreflect.EnumDescriptor).Values()
			if vs.Len() != len(values) {
				t.Fatalf("%s: %d values, want %d", name, vs.Len(), len(values))
			}
			for i, v := range values {
				if got := vs.ByNumber(protoreflect.EnumNumber(i)); got == nil || string(got.Name()) != v {
					t.Fatalf("%s: value %d is not %s", name, i, v)
				}
			}
		}
	})
}
