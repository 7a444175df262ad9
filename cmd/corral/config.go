package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/server"
)

// The settings (flags, environment, file keys) are package config's; this
// file turns them into room classes, checks files (check-config), lists
// the keys (config keys) and reloads.

// docs/corral.schema.json and the key table of docs/CONFIG.md, generated
// from package config (make check fails when they are stale):
//go:generate go test -count=1 -run TestConfigDocsCurrent -update .

// modes are every command's mode.
var modes = []server.Mode{server.Serve, server.EdgeOnly, server.CoreOnly}

func commandName(m server.Mode) string {
	switch m {
	case server.EdgeOnly:
		return "edge"
	case server.CoreOnly:
		return "core"
	}
	return "serve"
}

// configCommand is `corral config keys [COMMAND]`.
func configCommand(args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "keys" || len(args) > 2 {
		return errors.New("usage: corral config keys [serve|edge|core]")
	}
	cmd := ""
	if len(args) == 2 {
		cmd = args[1]
		if !slices.Contains(config.Commands, cmd) {
			return fmt.Errorf("config keys: unknown command %q: want serve, edge or core", cmd)
		}
	}
	config.PrintKeys(stdout, cmd)
	return nil
}

// defaultClass is the class of rooms no class matches: the keys' values.
func defaultClass(l *config.Loaded) roomclass.Class {
	s := &l.Settings
	def := roomclass.Default()
	def.History.Size = s.Node.HistoryMaxLen
	if def.History.Size <= 0 {
		def.History.Size = 1000 // history.MemoryOptions' default
		if s.Node.RedisURL != "" {
			def.History.Size = 10000 // history.RedisOptions'
		}
	}
	// The edge has none of these keys: the built-in defaults stay.
	if s.Node.HistoryTTL > 0 {
		def.History.TTL = s.Node.HistoryTTL
	}
	if s.Core.SignalTick > 0 {
		def.SignalTick = s.Core.SignalTick
	}
	if s.Core.MaxPayload > 0 {
		def.MaxPayload = s.Core.MaxPayload
	}
	if s.Presence.Grace > 0 {
		def.Presence.Grace = s.Presence.Grace
	}
	if s.Presence.MaxDiffMembers > 0 {
		def.Presence.MaxDiff = s.Presence.MaxDiffMembers
	}
	// Their keys take only a class's values (config's enum tag).
	if s.Policy.JoinPolicy != "" {
		def.Hooks.JoinPolicy = s.Policy.JoinPolicy
	}
	if s.Policy.PublishPolicy != "" {
		def.Hooks.PublishPolicy = s.Policy.PublishPolicy
	}
	def.Hooks.JoinCacheTTL = s.Hooks.JoinCacheTTL
	return def
}

// classTable builds the room classes: the file's (file may be nil), on
// top of the keys' default class.
func classTable(l *config.Loaded, file *config.File) (*roomclass.Table, error) {
	def := defaultClass(l)
	check := roomclass.CheckOptions{SessionTTL: l.Core.SessionTTL}
	var classes []roomclass.Class
	if file != nil {
		var err error
		if classes, err = file.Classes(def, check); err != nil {
			return nil, err
		}
	}
	if len(classes) == 0 {
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
// against every command's keys and their defaults (not the environment).
func checkConfig(args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		return errors.New("usage: corral check-config FILE")
	}
	file, err := config.ReadFile(args[0])
	if err == nil {
		// What a reload refuses (config.CheckEnd).
		if data, rerr := os.ReadFile(args[0]); rerr == nil {
			err = config.CheckEnd(args[0], data)
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
	var serve *config.Loaded
	for _, cmd := range config.Commands {
		l := config.Defaults(cmd)
		if cmd == "serve" {
			serve = l
		}
		var es roomclass.Errors
		if err := l.ApplyFile(file); errors.As(err, &es) {
			for _, e := range es {
				if !seen[e.Error()] {
					seen[e.Error()] = true
					errs = append(errs, e)
				}
			}
		}
	}
	t, err := classTable(serve, file)
	if err != nil {
		var es roomclass.Errors
		if !errors.As(err, &es) {
			es = roomclass.Errors{{File: file.Name, Msg: err.Error()}}
		}
		errs = append(errs, es...)
	}
	if len(errs) > 0 {
		return reportErrors(stderr, errs)
	}
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
func reloader(mode server.Mode, args []string, file *config.File, logger *slog.Logger) func() (*roomclass.Table, error) {
	prev := file
	var mu sync.Mutex
	return func() (*roomclass.Table, error) {
		if data, err := os.ReadFile(prev.Name); err == nil {
			if err := config.CheckEnd(prev.Name, data); err != nil {
				return nil, err
			}
		}
		opts, l, err := configure(mode, args, io.Discard)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if changed := changedKeys(prev, l.File); len(changed) > 0 {
			logger.Warn("config reload: these keys apply at the next restart only", "keys", strings.Join(changed, ","))
		}
		prev = l.File
		return opts.Core.Classes.Table(), nil
	}
}

// changedKeys lists the keys whose value differs between two reads of a
// file.
func changedKeys(a, b *config.File) []string {
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
