// Command protoc-gen-corral-json is a protoc plugin that generates the
// per-message code of the corral.v1.json codec from proto/corral/v1: for
// every message reachable from ClientFrame and ServerFrame, a Go function
// that appends it and a Go method that decodes it (package protocol, which
// holds the hand-written runtime they call: string and number scanning,
// validation, the append helpers), and the same field tables for the
// browser SDK in TypeScript.
//
// The field options in proto/corral/v1/options.proto mark where the format
// departs from protojson: (corral.v1.inline_json) bytes are inline JSON
// values, (corral.v1.json_last) fields are written after the others.
//
// Parameters (buf.gen.yaml opt): lang=go (default) writes
// client_json.pb.go; lang=ts writes corral/v1/client_json.ts.
// `make generate` runs both (protocol/buf.gen.yaml, clients/js/buf.gen.yaml).
package main

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// The frames whose reachable messages the codec covers.
var roots = []protoreflect.FullName{"corral.v1.ClientFrame", "corral.v1.ServerFrame"}

func main() {
	var lang string
	opts := protogen.Options{ParamFunc: func(name, value string) error {
		if name != "lang" || (value != "go" && value != "ts") {
			return fmt.Errorf("unknown parameter %s=%s (want lang=go or lang=ts)", name, value)
		}
		lang = value
		return nil
	}}
	opts.Run(func(gen *protogen.Plugin) error {
		gen.SupportedFeatures = uint64(pluginpb.CodeGeneratorResponse_FEATURE_PROTO3_OPTIONAL)
		for _, f := range gen.Files {
			if !f.Generate || f.Desc.Path() != "corral/v1/client.proto" {
				continue
			}
			msgs, err := reachable(f)
			if err != nil {
				return err
			}
			if lang == "ts" {
				return generateTS(gen, f, msgs)
			}
			return generateGo(gen, f, msgs)
		}
		return nil
	})
}

// reachable lists the messages reachable from the roots, roots first, in
// the order they are met.
func reachable(f *protogen.File) ([]*protogen.Message, error) {
	byName := map[protoreflect.FullName]*protogen.Message{}
	for _, m := range f.Messages {
		byName[m.Desc.FullName()] = m
	}
	var out []*protogen.Message
	seen := map[*protogen.Message]bool{}
	var visit func(m *protogen.Message) error
	visit = func(m *protogen.Message) error {
		if seen[m] {
			return nil
		}
		seen[m] = true
		out = append(out, m)
		for _, fd := range m.Fields {
			if err := checkField(m, fd); err != nil {
				return err
			}
			if fd.Message != nil {
				if err := visit(fd.Message); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, name := range roots {
		m := byName[name]
		if m == nil {
			return nil, fmt.Errorf("%s not in %s", name, f.Desc.Path())
		}
		if err := visit(m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkField rejects what the runtime has no helper for, so that a proto
// change the codec cannot follow fails generation instead of the wire.
func checkField(m *protogen.Message, fd *protogen.Field) error {
	bad := func(why string) error {
		return fmt.Errorf("%s.%s: %s: not supported by the corral.v1.json codec", m.Desc.Name(), fd.Desc.Name(), why)
	}
	if isFrame(m) != (fd.Oneof != nil) {
		return bad("a frame is one oneof of messages; other messages have no oneof")
	}
	if fd.Desc.IsMap() || fd.Desc.HasPresence() && fd.Desc.Message() == nil && fd.Oneof == nil {
		return bad("maps and optional scalars")
	}
	switch fd.Desc.Kind() {
	case protoreflect.StringKind, protoreflect.BoolKind, protoreflect.Uint32Kind,
		protoreflect.Uint64Kind, protoreflect.Int64Kind:
		if fd.Desc.IsList() && fd.Desc.Kind() != protoreflect.StringKind {
			return bad("lists of scalars other than strings")
		}
	case protoreflect.BytesKind:
		if !inlineJSON(fd) || fd.Desc.IsList() {
			return bad("bytes without (corral.v1.inline_json)")
		}
	case protoreflect.EnumKind:
		if fd.Desc.Enum().FullName() != "corral.v1.Code" || fd.Desc.IsList() {
			return bad("enums other than Code")
		}
	case protoreflect.MessageKind:
		if isFrame(m) && fd.Desc.IsList() {
			return bad("a list in a frame's oneof")
		}
	default:
		return bad(fd.Desc.Kind().String())
	}
	return nil
}

// isFrame reports whether m is a frame: one oneof, the kind.
func isFrame(m *protogen.Message) bool {
	return len(m.Oneofs) == 1 && len(m.Oneofs[0].Fields) == len(m.Fields)
}

func inlineJSON(fd *protogen.Field) bool {
	return proto.GetExtension(fd.Desc.Options(), corralv1.E_InlineJson).(bool)
}

// writeOrder is the order fields are written in: field numbers, then the
// (corral.v1.json_last) fields.
func writeOrder(m *protogen.Message) []*protogen.Field {
	var first, last []*protogen.Field
	for _, fd := range m.Fields {
		if proto.GetExtension(fd.Desc.Options(), corralv1.E_JsonLast).(bool) {
			last = append(last, fd)
		} else {
			first = append(first, fd)
		}
	}
	sortByNumber(first)
	sortByNumber(last)
	return append(first, last...)
}

func sortByNumber(fs []*protogen.Field) {
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].Desc.Number() < fs[j-1].Desc.Number(); j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
}

// keys are the member names a decoder accepts for fd: its JSON name, and
// its proto name when that differs.
func keys(fd *protogen.Field, suffixJSON, suffixProto string) []string {
	k := []string{fd.Desc.JSONName() + suffixJSON}
	if p := string(fd.Desc.Name()) + suffixProto; p != k[0] {
		k = append(k, p)
	}
	return k
}

func quoteKeys(ks []string) string {
	q := make([]string, len(ks))
	for i, k := range ks {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}
