package openenginev1_test

import (
	"oengine/internal/refdata"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	openenginev1 "oengine/proto/openengine/v1"
)

// upstreamSet loads shared/openengine/openengine-v1.binpb, the upstream
// FileDescriptorSet at the pinned commit. The test is skipped only when the
// shared directory is absent.
func upstreamSet(t *testing.T) []*descriptorpb.FileDescriptorProto {
	t.Helper()
	shared := refdata.Shared(t, "openengine")
	raw, err := os.ReadFile(filepath.Join(shared, "openengine-v1.binpb"))
	if err != nil {
		t.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &set); err != nil {
		t.Fatalf("decode upstream descriptor set: %v", err)
	}
	if len(set.GetFile()) == 0 {
		t.Fatal("upstream descriptor set is empty")
	}
	return set.GetFile()
}

// oursSet returns the descriptors compiled into this package (and the
// well-known files they import), as FileDescriptorProtos.
func oursSet(t *testing.T) []*descriptorpb.FileDescriptorProto {
	t.Helper()
	var out []*descriptorpb.FileDescriptorProto
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := range imports.Len() {
			add(imports.Get(i).FileDescriptor)
		}
		out = append(out, protodesc.ToFileDescriptorProto(fd))
	}
	// Referencing the package makes sure its init registered the files.
	add(openenginev1.File_openengine_v1_openengine_proto)
	protoregistry.GlobalFiles.RangeFilesByPackage("openengine.v1", func(fd protoreflect.FileDescriptor) bool {
		add(fd)
		return true
	})
	return out
}

func TestWireIdenticalToUpstream(t *testing.T) {
	up, ours := upstreamSet(t), oursSet(t)
	for _, p := range wireDiff(up, ours) {
		t.Error(p)
	}
	// Guard against a vacuous pass: the upstream set has real content.
	var fields, methods int
	for _, f := range up {
		for _, m := range f.GetMessageType() {
			fields += len(m.GetField())
		}
		for _, s := range f.GetService() {
			methods += len(s.GetMethod())
		}
	}
	if fields < 100 || methods != 11 {
		t.Fatalf("upstream set looks wrong: %d fields, %d methods", fields, methods)
	}
}

// TestWireDiffDetectsChanges mutates a copy of our descriptors and checks
// that the comparison reports each break (and accepts allowed additions).
func TestWireDiffDetectsChanges(t *testing.T) {
	up := upstreamSet(t)
	tests := []struct {
		name   string
		mutate func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto
		want   string // substring of a reported problem; "" = no problem
	}{
		{"unchanged", nil, ""},
		{"missing file", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			return slices.DeleteFunc(fs, func(f *descriptorpb.FileDescriptorProto) bool { return f.GetName() == "openengine/v1/lora.proto" })
		}, "file openengine/v1/lora.proto: missing"},
		{"file renamed package", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			file(t, fs, "openengine/v1/error.proto").Package = proto.String("openengine.v2")
			return fs
		}, "package"},
		{"missing import", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			f := file(t, fs, "openengine/v1/kv.proto")
			f.Dependency = slices.DeleteFunc(f.Dependency, func(s string) bool { return s == "openengine/v1/error.proto" })
			return fs
		}, "missing import openengine/v1/error.proto"},
		{"missing message", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			f := file(t, fs, "openengine/v1/generation.proto")
			f.MessageType = slices.DeleteFunc(f.MessageType, func(m *descriptorpb.DescriptorProto) bool { return m.GetName() == "StopMatch" })
			return fs
		}, "message StopMatch: missing"},
		{"message added to upstream file", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			f := file(t, fs, "openengine/v1/lora.proto")
			f.MessageType = append(f.MessageType, &descriptorpb.DescriptorProto{Name: proto.String("Extra")})
			return fs
		}, "message Extra: added"},
		{"missing field", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			m := message(t, fs, "openengine/v1/server.proto", "ServerInfo")
			m.Field = slices.DeleteFunc(m.Field, func(f *descriptorpb.FieldDescriptorProto) bool { return f.GetName() == "schema_release" })
			return fs
		}, "field schema_release missing"},
		{"field renumbered", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			field(t, fs, "openengine/v1/generation.proto", "Usage", "total_tokens").Number = proto.Int32(9)
			return fs
		}, "field total_tokens: number 9, want 3"},
		{"field retyped", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			field(t, fs, "openengine/v1/generation.proto", "Usage", "prompt_tokens").Type = descriptorpb.FieldDescriptorProto_TYPE_UINT64.Enum()
			return fs
		}, "field prompt_tokens: type"},
		{"field type_name changed", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			field(t, fs, "openengine/v1/kv.proto", "KvEvent", "kv_session").TypeName = proto.String(".openengine.v1.KvEndpoint")
			return fs
		}, "type_name"},
		{"field made repeated", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			field(t, fs, "openengine/v1/lora.proto", "LoraAdapter", "lora_name").Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
			return fs
		}, "label"},
		{"field lost proto3 optional", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			field(t, fs, "openengine/v1/generation.proto", "SamplingParams", "seed").Proto3Optional = nil
			return fs
		}, "field seed: proto3_optional false, want true"},
		{"field left its oneof", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			field(t, fs, "openengine/v1/generation.proto", "GenerateRequest", "prompt").OneofIndex = nil
			return fs
		}, "field prompt: not in oneof input"},
		{"field moved into a oneof", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			field(t, fs, "openengine/v1/generation.proto", "GenerateRequest", "model").OneofIndex = proto.Int32(0)
			return fs
		}, "field model: moved into oneof input"},
		{"oneof renamed", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			message(t, fs, "openengine/v1/lifecycle.proto", "AbortRequest").OneofDecl[0].Name = proto.String("what")
			return fs
		}, "in oneof what, want target"},
		{"field added below 1000", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			m := message(t, fs, "openengine/v1/model.proto", "ModelInfo")
			m.Field = append(m.Field, &descriptorpb.FieldDescriptorProto{
				Name: proto.String("bonus"), Number: proto.Int32(27),
				Type: descriptorpb.FieldDescriptorProto_TYPE_BOOL.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			})
			return fs
		}, "field bonus = 27 added below 1000"},
		{"field added at 1000 or above is allowed", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			m := message(t, fs, "openengine/v1/lora.proto", "LoraAdapter")
			m.Field = append(m.Field, &descriptorpb.FieldDescriptorProto{
				Name: proto.String("bonus"), Number: proto.Int32(1500),
				Type: descriptorpb.FieldDescriptorProto_TYPE_BOOL.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			})
			return fs
		}, ""},
		{"new file is allowed", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			return append(fs, &descriptorpb.FileDescriptorProto{Name: proto.String("openengine/v1/more.proto"), Package: proto.String("openengine.v1")})
		}, ""},
		{"missing enum value", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			e := enum(t, fs, "openengine/v1/error.proto", "ErrorCode")
			e.Value = e.Value[:len(e.Value)-1]
			return fs
		}, "value ERROR_CODE_INTERNAL missing"},
		{"enum value renumbered", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			e := enum(t, fs, "openengine/v1/generation.proto", "FinishReason")
			e.Value[1].Number = proto.Int32(7)
			return fs
		}, "value FINISH_REASON_STOP = 7, want 1"},
		{"enum value added", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			e := enum(t, fs, "openengine/v1/lifecycle.proto", "HealthState")
			e.Value = append(e.Value, &descriptorpb.EnumValueDescriptorProto{Name: proto.String("HEALTH_STATE_ODD"), Number: proto.Int32(9)})
			return fs
		}, "value HEALTH_STATE_ODD added"},
		{"missing enum", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			f := file(t, fs, "openengine/v1/kv.proto")
			f.EnumType = nil
			return fs
		}, "enum StorageMedium: missing"},
		{"nested map entry lost", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			m := message(t, fs, "google/protobuf/struct.proto", "Struct")
			m.NestedType = nil
			return fs
		}, "message FieldsEntry: missing"},
		{"missing service", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			f := file(t, fs, "openengine/v1/openengine.proto")
			f.Service = f.Service[1:]
			return fs
		}, "service Inference: missing"},
		{"missing method", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			s := service(t, fs, "Control")
			s.Method = slices.DeleteFunc(s.Method, func(m *descriptorpb.MethodDescriptorProto) bool { return m.GetName() == "Abort" })
			return fs
		}, "rpc Abort missing"},
		{"method added to upstream service", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			s := service(t, fs, "Control")
			m := proto.Clone(s.Method[0]).(*descriptorpb.MethodDescriptorProto)
			m.Name = proto.String("Extra")
			s.Method = append(s.Method, m)
			return fs
		}, "rpc Extra added"},
		{"method lost server streaming", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			service(t, fs, "Inference").Method[0].ServerStreaming = nil
			return fs
		}, "server_streaming false, want true"},
		{"method became client streaming", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			service(t, fs, "Control").Method[0].ClientStreaming = proto.Bool(true)
			return fs
		}, "client_streaming true, want false"},
		{"method input changed", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			service(t, fs, "Inference").Method[0].InputType = proto.String(".openengine.v1.GenerateStreamRequest")
			return fs
		}, "input .openengine.v1.GenerateStreamRequest"},
		{"method output changed", func(t *testing.T, fs []*descriptorpb.FileDescriptorProto) []*descriptorpb.FileDescriptorProto {
			service(t, fs, "Control").Method[0].OutputType = proto.String(".openengine.v1.ModelInfo")
			return fs
		}, "output .openengine.v1.ModelInfo"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := oursSet(t)
			for i, f := range fs {
				fs[i] = proto.Clone(f).(*descriptorpb.FileDescriptorProto)
			}
			if tc.mutate != nil {
				fs = tc.mutate(t, fs)
			}
			problems := wireDiff(up, fs)
			if tc.want == "" {
				if len(problems) != 0 {
					t.Fatalf("unexpected problems: %q", problems)
				}
				return
			}
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Fatalf("want a problem containing %q, got %q", tc.want, problems)
			}
		})
	}
}

func file(t *testing.T, fs []*descriptorpb.FileDescriptorProto, name string) *descriptorpb.FileDescriptorProto {
	t.Helper()
	for _, f := range fs {
		if f.GetName() == name {
			return f
		}
	}
	t.Fatalf("file %s not found", name)
	return nil
}

func message(t *testing.T, fs []*descriptorpb.FileDescriptorProto, fileName, name string) *descriptorpb.DescriptorProto {
	t.Helper()
	for _, m := range file(t, fs, fileName).GetMessageType() {
		if m.GetName() == name {
			return m
		}
	}
	t.Fatalf("message %s not found in %s", name, fileName)
	return nil
}

func field(t *testing.T, fs []*descriptorpb.FileDescriptorProto, fileName, msg, name string) *descriptorpb.FieldDescriptorProto {
	t.Helper()
	for _, f := range message(t, fs, fileName, msg).GetField() {
		if f.GetName() == name {
			return f
		}
	}
	t.Fatalf("field %s.%s not found", msg, name)
	return nil
}

func enum(t *testing.T, fs []*descriptorpb.FileDescriptorProto, fileName, name string) *descriptorpb.EnumDescriptorProto {
	t.Helper()
	for _, e := range file(t, fs, fileName).GetEnumType() {
		if e.GetName() == name {
			return e
		}
	}
	t.Fatalf("enum %s not found in %s", name, fileName)
	return nil
}

func service(t *testing.T, fs []*descriptorpb.FileDescriptorProto, name string) *descriptorpb.ServiceDescriptorProto {
	t.Helper()
	for _, s := range file(t, fs, "openengine/v1/openengine.proto").GetService() {
		if s.GetName() == name {
			return s
		}
	}
	t.Fatalf("service %s not found", name)
	return nil
}
