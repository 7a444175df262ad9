package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/corral-rt/corral/roomclass"
)

// Removed are the keys that are gone, each with what to write instead.
// Using one (a flag, a variable, a file key) is an error naming it.
var Removed = map[string]string{
	"read-only-rooms":   "room settings live in room classes: declare the rooms as a class with publish: none and signal: none in the config file's rooms (docs/CONFIG.md, Migration)",
	"signal-tick-rooms": "room settings live in room classes: declare the rooms as a class with signal-tick: DURATION in the config file's rooms (docs/CONFIG.md, Migration)",
	"hooks-join":        "room settings live in room classes: give the rooms' class hooks: {join: true} in the config file's rooms (docs/CONFIG.md, Migration)",
	"hooks-publish":     "room settings live in room classes: give the rooms' class hooks: {publish: true} in the config file's rooms (docs/CONFIG.md, Migration)",
}

// Loaded is the settings of one command, with where each came from.
type Loaded struct {
	Settings
	// Command is serve, edge or core.
	Command string
	// File is the config file read (--config); nil without one.
	File *File
	from map[string]string // key name -> "flag", "environment" or "file"
}

// IsSet reports whether the key was given (by a flag, the environment or
// the file) rather than left at its default.
func (l *Loaded) IsSet(name string) bool { return l.from[name] != "" }

// Defaults is cmd's settings with every key at its default.
func Defaults(cmd string) *Loaded {
	l := &Loaded{Command: cmd, from: map[string]string{}}
	for _, k := range keys {
		if d := k.DefaultFor(cmd); d != "" && k.Has(cmd) {
			if err := k.Set(&l.Settings, d); err != nil {
				panic(err) // checked by mustKeys
			}
		}
	}
	return l
}

// Load reads cmd's settings: its command-line flags (args, without the
// command), then for each key not given there its environment variable
// (env, such as os.LookupEnv), then for each key still unset the config
// file's (--config or CORRAL_CONFIG), then the defaults: flag >
// environment > file > default. --help prints Usage to usage and returns
// flag.ErrHelp. A file's problems are [roomclass.Errors].
func Load(cmd string, args []string, env func(string) (string, bool), usage io.Writer) (*Loaded, error) {
	if !slices.Contains(Commands, cmd) {
		return nil, fmt.Errorf("config: unknown command %q", cmd)
	}
	l := Defaults(cmd)
	if err := checkArgs(cmd, args); err != nil {
		return nil, err
	}
	fs := flag.NewFlagSet("corral "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for _, k := range keys {
		if k.IsFlag(cmd) {
			fs.Var(&flagValue{k: k, l: l}, k.Name, k.Help)
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			Usage(usage, cmd)
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	for name := range Removed {
		if _, ok := env(EnvName(name)); ok {
			return nil, fmt.Errorf("%s: %s is gone: %s", EnvName(name), name, Removed[name])
		}
	}
	for _, k := range keys {
		if !k.Has(cmd) || l.IsSet(k.Name) {
			continue
		}
		if v, ok := env(k.Env); ok {
			if err := k.Set(&l.Settings, v); err != nil {
				return nil, fmt.Errorf("%s: %w", k.Env, err)
			}
			l.from[k.Name] = "environment"
		}
	}
	if l.Config != "" {
		f, err := ReadFile(l.Config)
		if err != nil {
			return nil, err
		}
		if err := l.ApplyFile(f); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// ApplyFile sets each key file names that is not set yet, and keeps the
// file. A key of another command only is skipped (one file may serve
// every command); a key of no command is an error. The error, when not
// nil, is [roomclass.Errors].
func (l *Loaded) ApplyFile(file *File) error {
	l.File = file
	var errs roomclass.Errors
	for _, fk := range file.Keys {
		fail := func(format string, args ...any) {
			errs = append(errs, roomclass.Error{File: file.Name, Line: fk.Line, Path: fk.Name, Msg: fmt.Sprintf(format, args...)})
		}
		k := Lookup(fk.Name)
		switch {
		case fk.Name == "config":
			fail("a config file cannot name another one")
		case Removed[fk.Name] != "":
			fail("gone: %s", Removed[fk.Name])
		case k == nil:
			fail("unknown key%s: the keys are listed by corral config keys, besides rooms and version", suggest(fk.Name))
		case !k.Has(l.Command):
			// Another command's key.
		case l.IsSet(k.Name):
			// The command line or the environment wins.
		default:
			if err := k.Set(&l.Settings, fk.Value); err != nil {
				fail("parse error: %v", err)
				continue
			}
			l.from[k.Name] = "file"
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// checkArgs refuses, with what to do instead, a flag that is a key but
// not a flag of cmd, or a removed one.
func checkArgs(cmd string, args []string) error {
	for _, a := range args {
		if a == "--" || !strings.HasPrefix(a, "-") || len(a) < 2 {
			if a == "--" {
				return nil
			}
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if msg := Removed[name]; msg != "" {
			return fmt.Errorf("--%s is gone: %s", name, msg)
		}
		k := Lookup(name)
		switch {
		case k == nil || k.IsFlag(cmd):
		case k.Has(cmd):
			return fmt.Errorf("--%s is not a flag of corral %s: set %s in the config file (--config) or %s (corral config keys lists every key)", name, cmd, name, k.Env)
		default:
			return fmt.Errorf("--%s is not a setting of corral %s (it is one of corral %s)", name, cmd, strings.Join(k.Commands, ", corral "))
		}
	}
	return nil
}

// suggest is ` (did you mean "x"?)` for the key closest to k, or "".
func suggest(k string) string {
	best, bestD := "", 3
	for _, c := range keys {
		if d := editDistance(k, c.Name); d < bestD {
			best, bestD = c.Name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
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

// flagValue is a key as a flag.Value.
type flagValue struct {
	k *Key
	l *Loaded
}

func (f *flagValue) String() string {
	if f.k == nil {
		return ""
	}
	return f.k.Get(&f.l.Settings)
}

func (f *flagValue) Set(s string) error {
	if err := f.k.Set(&f.l.Settings, s); err != nil {
		return err
	}
	f.l.from[f.k.Name] = "flag"
	return nil
}

func (f *flagValue) IsBoolFlag() bool { return f.k.Type.Kind() == reflect.Bool }
