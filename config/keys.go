package config

import (
	"encoding"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Commands are the commands that take settings, in the order the docs
// list them.
var Commands = []string{"serve", "edge", "core"}

// Groups are the groups of keys, in the order --help lists them.
var Groups = []string{"general", "listeners", "auth", "store", "limits", "hooks", "rooms", "observability"}

// Key is one setting, read from its struct field's tags.
type Key struct {
	Name     string   // the file key and the flag name
	Env      string   // CORRAL_NAME
	Commands []string // the commands that have it
	Flag     bool     // a command-line flag of those commands
	Group    string
	Default  string // the text form of the default ("" for the zero value)
	// CoreDefault is corral core's default when it differs.
	CoreDefault string
	Unit        string // what a number counts; for other types, the type's
	Help        string
	Secret      bool
	// Enum, from the tag enum ("closed,allow-known"), is every value the
	// key takes; empty: any value of its type.
	Enum  []string
	Type  reflect.Type
	index []int // the field's index path in Settings
}

// Has reports whether cmd has the key.
func (k *Key) Has(cmd string) bool { return slices.Contains(k.Commands, cmd) }

// IsFlag reports whether the key is a flag of cmd.
func (k *Key) IsFlag(cmd string) bool { return k.Flag && k.Has(cmd) }

// DefaultFor is the default's text form for cmd.
func (k *Key) DefaultFor(cmd string) string {
	if cmd == "core" && k.CoreDefault != "" {
		return k.CoreDefault
	}
	return k.Default
}

// EnvName is the environment variable of a key name.
func EnvName(name string) string {
	return "CORRAL_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

var keys = mustKeys()

// Keys is every key, sorted by name. The slice is shared: do not modify.
func Keys() []*Key { return keys }

// Lookup is the key of that name, or nil.
func Lookup(name string) *Key {
	i, ok := slices.BinarySearchFunc(keys, name, func(k *Key, n string) int { return strings.Compare(k.Name, n) })
	if !ok {
		return nil
	}
	return keys[i]
}

func mustKeys() []*Key {
	var out []*Key
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			idx := append(slices.Clone(index), i)
			name := f.Tag.Get("key")
			if name == "" {
				if f.Type.Kind() != reflect.Struct {
					panic(fmt.Sprintf("config: field %s has no key", f.Name))
				}
				walk(f.Type, idx)
				continue
			}
			k := &Key{
				Name: name, Env: EnvName(name), Flag: f.Tag.Get("flag") == "true",
				Group: f.Tag.Get("group"), Default: f.Tag.Get("default"), CoreDefault: f.Tag.Get("coredefault"),
				Unit: f.Tag.Get("unit"), Help: f.Tag.Get("help"), Secret: f.Tag.Get("secret") == "true",
				Type: f.Type, index: idx,
			}
			if e := f.Tag.Get("enum"); e != "" {
				k.Enum = strings.Split(e, ",")
			}
			k.Commands = Commands
			if c := f.Tag.Get("cmd"); c != "" {
				k.Commands = strings.Split(c, ",")
			}
			switch {
			case len(k.Enum) > 0:
				k.Unit = "one of " + strings.Join(k.Enum, ", ")
			case k.Unit == "":
				k.Unit = typeUnit(f.Type)
			case f.Type == reflect.TypeFor[Limit]() || f.Type == reflect.TypeFor[Rate]():
				k.Unit += " or unlimited"
			}
			if k.Help == "" || !slices.Contains(Groups, k.Group) {
				panic(fmt.Sprintf("config: key %s: help and a group (%v) are required", name, Groups))
			}
			out = append(out, k)
		}
	}
	walk(reflect.TypeFor[Settings](), nil)
	slices.SortFunc(out, func(a, b *Key) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(out); i++ {
		if out[i].Name == out[i-1].Name {
			panic("config: key " + out[i].Name + " declared twice")
		}
	}
	// Every default must parse.
	var s Settings
	for _, k := range out {
		for _, d := range []string{k.Default, k.CoreDefault} {
			if d != "" {
				if err := k.Set(&s, d); err != nil {
					panic(fmt.Sprintf("config: key %s: default %q: %v", k.Name, d, err))
				}
			}
		}
	}
	return out
}

// typeUnit is the unit the docs show for a type.
func typeUnit(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[time.Duration]():
		return "duration"
	case reflect.TypeFor[Window]():
		return "duration or off"
	case reflect.TypeFor[Limit]():
		return "count or unlimited"
	case reflect.TypeFor[Rate]():
		return "per second or unlimited"
	case reflect.TypeFor[[]string]():
		return "list"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "text"
	}
	return ""
}

// field is the key's field in s.
func (k *Key) field(s *Settings) reflect.Value {
	return reflect.ValueOf(s).Elem().FieldByIndex(k.index)
}

// Get is the text form of the key's value in s.
func (k *Key) Get(s *Settings) string { return textOf(k.field(s)) }

// Set sets the key's value in s from its text form.
// A key with an Enum takes only those values, or "" (its default).
func (k *Key) Set(s *Settings, text string) error {
	if len(k.Enum) > 0 && text != "" && !slices.Contains(k.Enum, text) {
		return fmt.Errorf("want one of %s, got %q", strings.Join(k.Enum, ", "), text)
	}
	return setText(k.field(s), text)
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// setText sets v (a settable field) from a text form.
func setText(v reflect.Value, text string) error {
	if v.Addr().Type().Implements(textUnmarshaler) {
		return v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(text))
	}
	switch v.Interface().(type) {
	case time.Duration:
		d, err := time.ParseDuration(strings.TrimSpace(text))
		if err != nil {
			return fmt.Errorf("want a duration such as 250ms or 1h30m, got %q", text)
		}
		if d < 0 {
			return fmt.Errorf("want a duration that is not negative, got %q", text)
		}
		v.SetInt(int64(d))
		return nil
	case []string:
		var out []string
		for _, p := range strings.Split(text, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		v.Set(reflect.ValueOf(out))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(text)
	case reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(text))
		if err != nil {
			return fmt.Errorf("want true or false, got %q", text)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil {
			return fmt.Errorf("want a whole number, got %q", text)
		}
		v.SetInt(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil {
			return fmt.Errorf("want a number, got %q", text)
		}
		v.SetFloat(f)
	default:
		panic("config: no text form for " + v.Type().String())
	}
	return nil
}

// textOf is the text form of v.
func textOf(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case fmt.Stringer:
		return x.String()
	case []string:
		return strings.Join(x, ",")
	}
	return fmt.Sprint(v.Interface())
}
