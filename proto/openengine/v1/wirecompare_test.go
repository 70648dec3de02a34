package openenginev1_test

// Element-by-element comparison of the upstream OpenEngine v1 descriptors
// with ours. The rule (docs/design.md §3): every upstream file, service,
// method, message, nested type, field, oneof, enum and enum value must exist
// unchanged; the only allowed additions are whole new files and fields with
// numbers >= 1000 on upstream messages.

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/types/descriptorpb"
)

// minExtensionField is the lowest field number an oengine addition to an
// upstream message may use.
const minExtensionField = 1000

// wireDiff lists every way ours breaks wire identity with upstream. It is
// empty when ours is a compatible superset.
func wireDiff(upstream, ours []*descriptorpb.FileDescriptorProto) []string {
	var d differ
	byName := make(map[string]*descriptorpb.FileDescriptorProto, len(ours))
	for _, f := range ours {
		byName[f.GetName()] = f
	}
	upstreamFiles := make(map[string]bool, len(upstream))
	for _, f := range upstream {
		upstreamFiles[f.GetName()] = true
	}
	for _, uf := range upstream {
		of, ok := byName[uf.GetName()]
		if !ok {
			d.addf("file %s: missing", uf.GetName())
			continue
		}
		d.file(uf, of, upstreamFiles)
	}
	return d.problems
}

type differ struct {
	problems []string
}

func (d *differ) addf(format string, args ...any) {
	d.problems = append(d.problems, fmt.Sprintf(format, args...))
}

func (d *differ) file(u, o *descriptorpb.FileDescriptorProto, upstreamFiles map[string]bool) {
	name := u.GetName()
	if u.GetPackage() != o.GetPackage() {
		d.addf("file %s: package %q, want %q", name, o.GetPackage(), u.GetPackage())
	}
	if u.GetSyntax() != o.GetSyntax() {
		d.addf("file %s: syntax %q, want %q", name, o.GetSyntax(), u.GetSyntax())
	}
	for _, dep := range u.GetDependency() {
		if !slices.Contains(o.GetDependency(), dep) {
			d.addf("file %s: missing import %s", name, dep)
		}
	}
	// An added import may only name a new (non-upstream) file.
	for _, dep := range o.GetDependency() {
		if !slices.Contains(u.GetDependency(), dep) && upstreamFiles[dep] {
			d.addf("file %s: adds import of upstream file %s", name, dep)
		}
	}
	scope := name + ": "
	d.enums(scope, u.GetEnumType(), o.GetEnumType())
	d.messages(scope, u.GetMessageType(), o.GetMessageType())
	d.services(scope, u.GetService(), o.GetService())
}

func (d *differ) enums(scope string, u, o []*descriptorpb.EnumDescriptorProto) {
	ours := make(map[string]*descriptorpb.EnumDescriptorProto, len(o))
	for _, e := range o {
		ours[e.GetName()] = e
	}
	for _, ue := range u {
		oe, ok := ours[ue.GetName()]
		if !ok {
			d.addf("%senum %s: missing", scope, ue.GetName())
			continue
		}
		delete(ours, ue.GetName())
		d.enumValues(scope+"enum "+ue.GetName(), ue, oe)
	}
	for n := range ours {
		d.addf("%senum %s: added to an upstream scope (new enums belong in new files)", scope, n)
	}
}

func (d *differ) enumValues(scope string, u, o *descriptorpb.EnumDescriptorProto) {
	ours := make(map[string]int32, len(o.GetValue()))
	for _, v := range o.GetValue() {
		ours[v.GetName()] = v.GetNumber()
	}
	for _, uv := range u.GetValue() {
		n, ok := ours[uv.GetName()]
		switch {
		case !ok:
			d.addf("%s: value %s missing", scope, uv.GetName())
		case n != uv.GetNumber():
			d.addf("%s: value %s = %d, want %d", scope, uv.GetName(), n, uv.GetNumber())
		}
		delete(ours, uv.GetName())
	}
	for n := range ours {
		d.addf("%s: value %s added to an upstream enum", scope, n)
	}
}

func (d *differ) messages(scope string, u, o []*descriptorpb.DescriptorProto) {
	ours := make(map[string]*descriptorpb.DescriptorProto, len(o))
	for _, m := range o {
		ours[m.GetName()] = m
	}
	for _, um := range u {
		om, ok := ours[um.GetName()]
		if !ok {
			d.addf("%smessage %s: missing", scope, um.GetName())
			continue
		}
		delete(ours, um.GetName())
		d.message(scope+"message "+um.GetName(), um, om)
	}
	for n := range ours {
		d.addf("%smessage %s: added to an upstream scope (new messages belong in new files)", scope, n)
	}
}

func (d *differ) message(scope string, u, o *descriptorpb.DescriptorProto) {
	if u.GetOptions().GetMapEntry() != o.GetOptions().GetMapEntry() {
		d.addf("%s: map_entry %v, want %v", scope, o.GetOptions().GetMapEntry(), u.GetOptions().GetMapEntry())
	}
	ours := make(map[string]*descriptorpb.FieldDescriptorProto, len(o.GetField()))
	for _, f := range o.GetField() {
		ours[f.GetName()] = f
	}
	for _, uf := range u.GetField() {
		of, ok := ours[uf.GetName()]
		if !ok {
			d.addf("%s: field %s missing", scope, uf.GetName())
			continue
		}
		delete(ours, uf.GetName())
		d.field(scope+": field "+uf.GetName(), u, o, uf, of)
	}
	for n, f := range ours {
		if f.GetNumber() < minExtensionField {
			d.addf("%s: field %s = %d added below %d", scope, n, f.GetNumber(), minExtensionField)
		}
	}
	d.oneofIndices(scope, u, o)
	for _, r := range u.GetReservedRange() {
		found := slices.ContainsFunc(o.GetReservedRange(), func(x *descriptorpb.DescriptorProto_ReservedRange) bool {
			return x.GetStart() == r.GetStart() && x.GetEnd() == r.GetEnd()
		})
		if !found {
			d.addf("%s: reserved range %d-%d missing", scope, r.GetStart(), r.GetEnd())
		}
	}
	for _, r := range u.GetReservedName() {
		if !slices.Contains(o.GetReservedName(), r) {
			d.addf("%s: reserved name %s missing", scope, r)
		}
	}
	d.enums(scope+" > ", u.GetEnumType(), o.GetEnumType())
	d.messages(scope+" > ", u.GetNestedType(), o.GetNestedType())
}

func (d *differ) field(scope string, um, om *descriptorpb.DescriptorProto, u, o *descriptorpb.FieldDescriptorProto) {
	if u.GetNumber() != o.GetNumber() {
		d.addf("%s: number %d, want %d", scope, o.GetNumber(), u.GetNumber())
	}
	if u.GetType() != o.GetType() {
		d.addf("%s: type %v, want %v", scope, o.GetType(), u.GetType())
	}
	if u.GetTypeName() != o.GetTypeName() {
		d.addf("%s: type_name %q, want %q", scope, o.GetTypeName(), u.GetTypeName())
	}
	if u.GetLabel() != o.GetLabel() {
		d.addf("%s: label %v, want %v", scope, o.GetLabel(), u.GetLabel())
	}
	if u.GetProto3Optional() != o.GetProto3Optional() {
		d.addf("%s: proto3_optional %v, want %v", scope, o.GetProto3Optional(), u.GetProto3Optional())
	}
	if u.GetExtendee() != o.GetExtendee() {
		d.addf("%s: extendee %q, want %q", scope, o.GetExtendee(), u.GetExtendee())
	}
	if u.GetOptions().GetPacked() != o.GetOptions().GetPacked() {
		d.addf("%s: packed %v, want %v", scope, o.GetOptions().GetPacked(), u.GetOptions().GetPacked())
	}
	uo, oo := oneofName(um, u), oneofName(om, o)
	switch {
	case u.OneofIndex == nil && o.OneofIndex != nil:
		d.addf("%s: moved into oneof %s", scope, oo)
	case u.OneofIndex != nil && o.OneofIndex == nil:
		d.addf("%s: not in oneof %s", scope, uo)
	case u.OneofIndex != nil:
		if uo != oo {
			d.addf("%s: in oneof %s, want %s", scope, oo, uo)
		}
		if u.GetOneofIndex() != o.GetOneofIndex() {
			d.addf("%s: oneof_index %d, want %d", scope, o.GetOneofIndex(), u.GetOneofIndex())
		}
	}
}

// oneofIndices checks that every upstream oneof keeps its position, so that
// synthetic (proto3 optional) oneofs are numbered as upstream numbers them.
func (d *differ) oneofIndices(scope string, u, o *descriptorpb.DescriptorProto) {
	for i, uo := range u.GetOneofDecl() {
		if i >= len(o.GetOneofDecl()) || o.GetOneofDecl()[i].GetName() != uo.GetName() {
			d.addf("%s: oneof #%d is not %s", scope, i, uo.GetName())
		}
	}
}

func oneofName(m *descriptorpb.DescriptorProto, f *descriptorpb.FieldDescriptorProto) string {
	if f.OneofIndex == nil {
		return ""
	}
	i := int(f.GetOneofIndex())
	if i < 0 || i >= len(m.GetOneofDecl()) {
		return fmt.Sprintf("#%d(out of range)", i)
	}
	return m.GetOneofDecl()[i].GetName()
}

func (d *differ) services(scope string, u, o []*descriptorpb.ServiceDescriptorProto) {
	ours := make(map[string]*descriptorpb.ServiceDescriptorProto, len(o))
	for _, s := range o {
		ours[s.GetName()] = s
	}
	for _, us := range u {
		os, ok := ours[us.GetName()]
		if !ok {
			d.addf("%sservice %s: missing", scope, us.GetName())
			continue
		}
		delete(ours, us.GetName())
		d.methods(scope+"service "+us.GetName(), us, os)
	}
	for n := range ours {
		d.addf("%sservice %s: added to an upstream file (new services belong in new files)", scope, n)
	}
}

func (d *differ) methods(scope string, u, o *descriptorpb.ServiceDescriptorProto) {
	ours := make(map[string]*descriptorpb.MethodDescriptorProto, len(o.GetMethod()))
	for _, m := range o.GetMethod() {
		ours[m.GetName()] = m
	}
	for _, um := range u.GetMethod() {
		om, ok := ours[um.GetName()]
		if !ok {
			d.addf("%s: rpc %s missing", scope, um.GetName())
			continue
		}
		delete(ours, um.GetName())
		s := scope + ": rpc " + um.GetName()
		if um.GetInputType() != om.GetInputType() {
			d.addf("%s: input %s, want %s", s, om.GetInputType(), um.GetInputType())
		}
		if um.GetOutputType() != om.GetOutputType() {
			d.addf("%s: output %s, want %s", s, om.GetOutputType(), um.GetOutputType())
		}
		if um.GetClientStreaming() != om.GetClientStreaming() {
			d.addf("%s: client_streaming %v, want %v", s, om.GetClientStreaming(), um.GetClientStreaming())
		}
		if um.GetServerStreaming() != om.GetServerStreaming() {
			d.addf("%s: server_streaming %v, want %v", s, om.GetServerStreaming(), um.GetServerStreaming())
		}
	}
	for n := range ours {
		d.addf("%s: rpc %s added to an upstream service", scope, n)
	}
}
