package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/corral-rt/corral/roomclass"
	"go.yaml.in/yaml/v3"
)

// File is a parsed config file: the settings it holds (by key, not yet
// applied) and its room classes (not yet decoded: they are decoded on top
// of the default class, which the settings make; see [File.Classes]).
type File struct {
	// Name is the file's name, the prefix of every error.
	Name string
	// Version is the file's "version" key (free text, e.g. a date or a
	// commit); Hash is the SHA-256 of its bytes, 12 hex digits.
	Version, Hash string
	// Keys are the other top-level keys, in file order.
	Keys  []FileKey
	rooms *yaml.Node // the "rooms" sequence, or nil
}

// FileKey is one top-level setting of a file.
type FileKey struct {
	Name string
	// Value is the key's text form: a scalar as written, a list of
	// scalars joined with commas (for list keys such as origins).
	Value string
	Line  int
}

// ReadFile reads and parses a config file. The error, when not nil and
// not the file's absence, is [roomclass.Errors].
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	return Parse(path, data)
}

// Parse reads a config file's bytes. name prefixes the errors. The error,
// when not nil, is [roomclass.Errors].
func Parse(name string, data []byte) (*File, error) {
	sum := sha256.Sum256(data)
	f := &File{Name: name, Hash: hex.EncodeToString(sum[:])[:12]}
	if len(data) == 0 {
		return nil, roomclass.Errors{{File: name, Msg: "empty file: a file being written or cut short? (leave --config out to run on flags alone)"}}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, roomclass.Errors{{File: name, Msg: "no keys, only comments: a config file sets something (leave --config out to run on flags alone)"}}
		}
		return nil, roomclass.Errors{roomclass.YAMLError(name, 0, "", err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, roomclass.Errors{{File: name, Line: extra.Line, Msg: "more than one YAML document: keep one"}}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, roomclass.Errors{{File: name, Line: root.Line, Msg: "want a mapping of keys (corral config keys, rooms, version)"}}
	}
	var errs roomclass.Errors
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if line, dup := seen[k.Value]; dup {
			errs = append(errs, roomclass.Error{File: name, Line: k.Line, Path: k.Value, Msg: fmt.Sprintf("set twice (first on line %d)", line)})
			continue
		}
		seen[k.Value] = k.Line
		switch k.Value {
		case "version":
			if v.Kind != yaml.ScalarNode {
				errs = append(errs, roomclass.Error{File: name, Line: v.Line, Path: "version", Msg: "want text"})
				continue
			}
			f.Version = v.Value
		case "rooms":
			if v.Kind != yaml.SequenceNode {
				errs = append(errs, roomclass.Error{File: name, Line: v.Line, Path: "rooms", Msg: "want a list of classes ({name, match, ...})"})
				continue
			}
			f.rooms = v
		default:
			val, err := scalarText(v)
			if err != nil {
				errs = append(errs, roomclass.Error{File: name, Line: v.Line, Path: k.Value, Msg: err.Error()})
				continue
			}
			f.Keys = append(f.Keys, FileKey{Name: k.Value, Value: val, Line: k.Line})
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return f, nil
}

// Classes decodes the file's room classes on top of def and checks them
// (roomclass.DecodeClasses).
func (f *File) Classes(def roomclass.Class, opts roomclass.CheckOptions) ([]roomclass.Class, error) {
	return roomclass.DecodeClasses(f.Name, f.rooms, def, opts)
}

// CheckEnd refuses, for a reload (and check-config), a file that does
// not end with a newline. A file read while an editor or a deploy
// rewrites it, or cut short by a full disk, is often still valid YAML (a
// file truncated to its first 60 bytes parsed, and its room classes were
// gone), and putting it in force in a running server would silently drop
// policy such as a read-only class. Editors and YAML writers end a file
// with a newline. Not at start, where a file without one (a Kubernetes
// ConfigMap written with "|-") has always been taken and nothing is in
// force yet to weaken. The error, when not nil, is [roomclass.Errors].
func CheckEnd(name string, data []byte) error {
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return roomclass.Errors{{File: name, Line: bytes.Count(data, []byte("\n")) + 1, Msg: "the file does not end with a newline: cut short, or read while being written? (write it whole, then reload)"}}
	}
	return nil
}

// scalarText is a key's text form of a value: a scalar, or a list of
// scalars joined with commas.
func scalarText(v *yaml.Node) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		return v.Value, nil
	case yaml.SequenceNode:
		items := make([]string, len(v.Content))
		for i, it := range v.Content {
			if it.Kind != yaml.ScalarNode {
				return "", errors.New("want a value or a list of values")
			}
			items[i] = it.Value
		}
		return strings.Join(items, ","), nil
	}
	return "", errors.New("want a value or a list of values, not a mapping")
}
