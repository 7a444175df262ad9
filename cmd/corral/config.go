package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/server"
)

// The config file (docs/CONFIG.md): its top-level keys are the flag names,
// so that no flag can be missed; "rooms" holds the room classes and
// "version" names the file. Precedence: flag > environment > file >
// default.

// modes are every command's mode, for the keys of all commands.
var modes = []server.Mode{server.Serve, server.EdgeOnly, server.CoreOnly}

// flagSet is the flags of one mode, unparsed.
func flagSet(mode server.Mode) (*flag.FlagSet, *flags) {
	fs := flag.NewFlagSet("corral", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs, defineFlags(fs, mode)
}

// allKeys is every flag name of every command: the keys a file may hold.
func allKeys() map[string]bool {
	keys := map[string]bool{}
	for _, m := range modes {
		fs, _ := flagSet(m)
		fs.VisitAll(func(fl *flag.Flag) { keys[fl.Name] = true })
	}
	return keys
}

// readConfig reads and parses a config file.
func readConfig(path string) (*roomclass.File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	return roomclass.Parse(path, data)
}

// applyFile sets each flag that file names and that neither the command
// line nor the environment set. A key that is a flag of another command
// only is skipped (one file may serve every command); a key of no command
// is an error. The error, when not nil, is roomclass.Errors.
func applyFile(fs *flag.FlagSet, file *roomclass.File) error {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	known := allKeys()
	var errs roomclass.Errors
	for _, k := range file.Keys {
		fail := func(format string, args ...any) {
			errs = append(errs, roomclass.Error{File: file.Name, Line: k.Line, Path: k.Name, Msg: fmt.Sprintf(format, args...)})
		}
		switch {
		case k.Name == "config":
			fail("a config file cannot name another one")
		case fs.Lookup(k.Name) == nil && known[k.Name]:
			// Another command's flag.
		case fs.Lookup(k.Name) == nil:
			fail("unknown key%s: the keys are the flag names (corral <command> -h), rooms and version", suggest(k.Name, known))
		case set[k.Name]:
			// The command line or the environment wins.
		default:
			if err := fs.Set(k.Name, k.Value); err != nil {
				fail("%v", err)
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// suggest is ` (did you mean "x"?)` for the key closest to k, or "".
func suggest(k string, known map[string]bool) string {
	best, bestD := "", 3
	for c := range known {
		if d := editDistance(k, c); d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// defaultClass is the class of rooms no class matches: the flags' values.
func defaultClass(f *flags) roomclass.Class {
	def := roomclass.Default()
	def.History.Size = f.historyMaxLen
	if def.History.Size <= 0 {
		def.History.Size = 1000 // history.MemoryOptions' default
		if f.redisURL != "" {
			def.History.Size = 10000 // history.RedisOptions'
		}
	}
	if f.historyTTL > 0 {
		def.History.TTL = f.historyTTL
	}
	if f.signalTick > 0 {
		def.SignalTick = f.signalTick
	}
	if f.maxPayload > 0 {
		def.MaxPayload = f.maxPayload
	}
	if f.presenceGrace > 0 {
		def.Presence.Grace = f.presenceGrace
	}
	def.Presence.MaxDiff = f.presenceMaxDiff
	// Checked by hooksConfig; not defined for the edge-only command.
	if f.hooksPolicyJoin != "" {
		def.Hooks.JoinPolicy = roomclass.Failure(f.hooksPolicyJoin)
	}
	if f.hooksPolicyPublish != "" {
		def.Hooks.PublishPolicy = roomclass.Failure(f.hooksPolicyPublish)
	}
	def.Hooks.JoinCacheTTL = f.hooksJoinCacheTTL
	return def
}

// classTable builds the room classes: the file's (file may be nil), or
// those the pattern flags stand for, on top of the flags' default class.
func classTable(f *flags, file *roomclass.File) (*roomclass.Table, error) {
	def := defaultClass(f)
	check := roomclass.CheckOptions{SessionTTL: f.sessionTTL}
	var ticks []roomclass.Tick
	for _, item := range splitList(f.signalTickRooms) {
		pattern, d, ok := strings.Cut(item, "=")
		tick, err := time.ParseDuration(d)
		if !ok || pattern == "" || err != nil || tick <= 0 {
			return nil, fmt.Errorf("--signal-tick-rooms: %q: want pattern=duration, e.g. canvas:*=16ms", item)
		}
		ticks = append(ticks, roomclass.Tick{Pattern: pattern, Tick: tick})
	}
	readOnly := splitList(f.readOnlyRooms)
	var classes []roomclass.Class
	if file != nil {
		var err error
		if classes, err = file.Classes(def, check); err != nil {
			return nil, err
		}
	}
	if len(classes) > 0 && (len(ticks) > 0 || len(readOnly) > 0) {
		return nil, errors.New("--read-only-rooms or --signal-tick-rooms with the config file's rooms: declare those rooms as classes in the file (docs/CONFIG.md, Migration)")
	}
	if len(classes) == 0 {
		classes = roomclass.FromFlags(def, readOnly, ticks)
		if err := roomclass.Check(def, nil, check); err != nil {
			return nil, err
		}
	}
	t := roomclass.NewTable(def, classes)
	if file != nil {
		t.Version, t.Hash = file.Version, file.Hash
	}
	return t, nil
}

// checkConfig is `corral check-config FILE`: every problem of the file,
// against every command's flags and their defaults (not the environment).
func checkConfig(args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		return errors.New("usage: corral check-config FILE")
	}
	file, err := readConfig(args[0])
	if err == nil {
		// What a reload refuses (roomclass.CheckEnd).
		if data, rerr := os.ReadFile(args[0]); rerr == nil {
			err = roomclass.CheckEnd(args[0], data)
		}
	}
	var errs roomclass.Errors
	if err != nil {
		if !errors.As(err, &errs) {
			return err
		}
		return reportErrors(stderr, errs)
	}
	seen := map[string]bool{}
	var serveFlags *flags
	for _, m := range modes {
		fs, f := flagSet(m)
		if m == server.Serve {
			serveFlags = f
		}
		var es roomclass.Errors
		if err := applyFile(fs, file); errors.As(err, &es) {
			for _, e := range es {
				if !seen[e.Error()] {
					seen[e.Error()] = true
					errs = append(errs, e)
				}
			}
		}
	}
	if _, err := classTable(serveFlags, file); err != nil {
		var es roomclass.Errors
		if !errors.As(err, &es) {
			es = roomclass.Errors{{File: file.Name, Msg: err.Error()}}
		}
		errs = append(errs, es...)
	}
	if len(errs) > 0 {
		return reportErrors(stderr, errs)
	}
	t, _ := classTable(serveFlags, file)
	names := []string{}
	for _, c := range t.Classes() {
		names = append(names, c.Name)
	}
	fmt.Fprintf(stdout, "%s: ok: version %q, hash %s, %d room classes (%s) and the default\n",
		file.Name, file.Version, file.Hash, len(names), strings.Join(names, ", "))
	if len(names) == 0 {
		// What server.Node.Reload refuses when classes are in force.
		fmt.Fprintf(stderr, "%s: note: no room classes: a running server with room classes refuses to reload this file (start with it instead)\n", file.Name)
	}
	return nil
}

func reportErrors(w io.Writer, errs roomclass.Errors) error {
	slices.SortStableFunc(errs, func(a, b roomclass.Error) int { return a.Line - b.Line })
	for _, e := range errs {
		fmt.Fprintln(w, e.Error())
	}
	return fmt.Errorf("%d errors in the config file", len(errs))
}

// reloader re-reads the config file for server.Node.Reload: it runs the
// command's configuration again (same arguments; the file read anew) and
// returns its room classes. Other keys apply at the next start only: a
// reload that changes one says so in the log.
func reloader(mode server.Mode, args []string, file *roomclass.File, logger *slog.Logger) func() (*roomclass.Table, error) {
	prev := file
	var mu sync.Mutex
	return func() (*roomclass.Table, error) {
		if data, err := os.ReadFile(prev.Name); err == nil {
			if err := roomclass.CheckEnd(prev.Name, data); err != nil {
				return nil, err
			}
		}
		opts, f, err := configure(mode, args, io.Discard)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if changed := changedKeys(prev, f.file); len(changed) > 0 {
			logger.Warn("config reload: these keys apply at the next restart only", "keys", strings.Join(changed, ","))
		}
		prev = f.file
		return opts.Core.Classes.Table(), nil
	}
}

// changedKeys lists the flag keys whose value differs between two reads
// of a file.
func changedKeys(a, b *roomclass.File) []string {
	va, vb := map[string]string{}, map[string]string{}
	for _, k := range a.Keys {
		va[k.Name] = k.Value
	}
	for _, k := range b.Keys {
		vb[k.Name] = k.Value
	}
	var out []string
	for k, v := range va {
		if w, ok := vb[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range vb {
		if _, ok := va[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
