package roomclass

import (
	"fmt"
	"reflect"
	"strings"
	"time"
)

// DurationPattern is the JSON Schema pattern of a duration (Go's
// time.ParseDuration: "16ms", "1h30m", "0").
const DurationPattern = `^(0|([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+)$`

// ClassSchema is the JSON Schema of one room class, generated from the
// Class type (its yaml and doc tags), so that it cannot drift from what
// the decoder accepts.
func ClassSchema() map[string]any {
	s := typeSchema(reflect.TypeFor[Class]())
	s["required"] = []string{"name", "match"}
	return s
}

// KeyDoc is one key of a class, for the key table of docs/CONFIG.md.
type KeyDoc struct {
	Path, Doc string
	Default   string // the built-in default class's value
}

// ClassKeys lists every key of a class, nested keys as "a.b", in
// declaration order, with the built-in default's value.
func ClassKeys() []KeyDoc {
	var out []KeyDoc
	var walk func(t reflect.Type, v reflect.Value, prefix string)
	walk = func(t reflect.Type, v reflect.Value, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			k := yamlKey(f)
			if k == "" {
				continue
			}
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Duration]() {
				out = append(out, KeyDoc{Path: prefix + k, Doc: f.Tag.Get("doc")})
				walk(f.Type, v.Field(i), prefix+k+".")
				continue
			}
			def := ""
			switch fv := v.Field(i).Interface().(type) {
			case time.Duration:
				def = fv.String()
			case Patterns:
			default:
				def = fmtValue(fv)
			}
			if k == "name" || k == "match" {
				def = ""
			}
			out = append(out, KeyDoc{Path: prefix + k, Doc: f.Tag.Get("doc"), Default: def})
		}
	}
	d := Default()
	walk(reflect.TypeFor[Class](), reflect.ValueOf(d), "")
	return out
}

func typeSchema(t reflect.Type) map[string]any {
	switch t {
	case reflect.TypeFor[time.Duration]():
		return map[string]any{"type": "string", "pattern": DurationPattern}
	case reflect.TypeFor[Access]():
		return map[string]any{"type": "string", "enum": []string{string(Clients), string(None)}}
	case reflect.TypeFor[Patterns]():
		return map[string]any{"anyOf": []any{
			map[string]any{"type": "string", "minLength": 1},
			map[string]any{"type": "array", "items": map[string]any{"type": "string", "minLength": 1}, "minItems": 1},
		}}
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Struct:
		props := map[string]any{}
		for i := range t.NumField() {
			f := t.Field(i)
			k := yamlKey(f)
			if k == "" {
				continue
			}
			p := typeSchema(f.Type)
			if d := f.Tag.Get("doc"); d != "" {
				p["description"] = d
			}
			if e := f.Tag.Get("enum"); e != "" {
				p["enum"] = strings.Split(e, ",")
			}
			props[k] = p
		}
		return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	}
	panic("roomclass: no schema for " + t.String())
}

func fmtValue(v any) string { return fmt.Sprint(v) }
