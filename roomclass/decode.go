package roomclass

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Error is one problem of a config file, located.
type Error struct {
	File string
	Line int    // 0: the whole file
	Path string // key path, e.g. rooms[2].history.ttl
	Msg  string
}

func (e Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a file, in file order; its Error is
// one per line.
type Errors []Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// orNil returns es as an error, nil when empty.
func (es Errors) orNil() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// DecodeClasses decodes a config file's room classes (rooms, the "rooms"
// sequence of the file named file; package config reads the file), each
// on top of def (a key a class leaves out keeps def's value), and checks
// them (see [Check]). The error, when not nil, is [Errors].
func DecodeClasses(file string, rooms *yaml.Node, def Class, opts CheckOptions) ([]Class, error) {
	if rooms == nil {
		return nil, nil
	}
	var errs Errors
	var out []Class
	var lines []classLines
	for i, n := range rooms.Content {
		path := fmt.Sprintf("rooms[%d]", i)
		c := def
		c.Name, c.Match = "", nil
		if n.Kind != yaml.MappingNode {
			errs = append(errs, Error{file, n.Line, path, "want a class: a mapping with name, match and settings"})
			continue
		}
		decodeInto(file, n, reflect.ValueOf(&c).Elem(), path, &errs)
		out = append(out, c)
		lines = append(lines, lineIndex(n))
	}
	errs = append(errs, check(file, def, out, lines, opts)...)
	sortErrors(errs)
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// decodeInto decodes n into v (a settable struct or value), field by field
// for structs so that every error names its key and line.
func decodeInto(file string, n *yaml.Node, v reflect.Value, path string, errs *Errors) {
	if v.Kind() != reflect.Struct || v.Addr().Type().Implements(unmarshalerType) {
		if err := n.Decode(v.Addr().Interface()); err != nil {
			*errs = append(*errs, YAMLError(file, n.Line, path, err))
		}
		return
	}
	if n.Kind != yaml.MappingNode {
		*errs = append(*errs, Error{file, n.Line, path, "want a mapping of keys: " + strings.Join(keysOf(v.Type()), ", ")})
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		kp := path + "." + k.Value
		if line, dup := seen[k.Value]; dup {
			*errs = append(*errs, Error{file, k.Line, kp, fmt.Sprintf("set twice (first on line %d)", line)})
			continue
		}
		seen[k.Value] = k.Line
		fi, ok := fieldByKey(v.Type(), k.Value)
		if !ok {
			msg := "unknown key"
			if s := closest(k.Value, keysOf(v.Type())); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			*errs = append(*errs, Error{file, k.Line, kp, msg + "; keys here: " + strings.Join(keysOf(v.Type()), ", ")})
			continue
		}
		decodeInto(file, val, v.Field(fi), kp, errs)
	}
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// yamlKey is the key of a struct field (its yaml tag).
func yamlKey(f reflect.StructField) string {
	k, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return k
}

func fieldByKey(t reflect.Type, key string) (int, bool) {
	for i := range t.NumField() {
		if yamlKey(t.Field(i)) == key {
			return i, true
		}
	}
	return 0, false
}

func keysOf(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if k := yamlKey(t.Field(i)); k != "" {
			out = append(out, k)
		}
	}
	return out
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?(?:unmarshal errors:\s*)?line (\d+): `)

// YAMLError turns an error of package yaml into an Error, keeping the
// line yaml names when it names one.
func YAMLError(file string, line int, path string, err error) Error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		fmt.Sscan(m[1], &line)
		msg = msg[len(m[0]):]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	return Error{File: file, Line: line, Path: path, Msg: msg}
}

// closest is the key within edit distance 2 of k, if one is.
func closest(k string, keys []string) string {
	best, bestD := "", 3
	for _, c := range keys {
		if d := distance(k, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// classLines is where each key of one class is, by key path relative to
// the class ("history.ttl"), for the checks' errors.
type classLines struct {
	line int
	keys map[string]int
	// match holds the line of each pattern.
	match []int
}

func lineIndex(n *yaml.Node) classLines {
	cl := classLines{line: n.Line, keys: map[string]int{}}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := prefix + k.Value
			cl.keys[p] = k.Line
			if v.Kind == yaml.MappingNode {
				walk(v, p+".")
			}
			if p == "match" {
				if v.Kind == yaml.SequenceNode {
					for _, it := range v.Content {
						cl.match = append(cl.match, it.Line)
					}
				} else {
					cl.match = append(cl.match, v.Line)
				}
			}
		}
	}
	if n.Kind == yaml.MappingNode {
		walk(n, "")
	}
	return cl
}

// at is the line of key (relative to the class), or the class's line.
func (cl classLines) at(key string) int {
	if l, ok := cl.keys[key]; ok {
		return l
	}
	return cl.line
}
