package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/server"
)

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "corral.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigEveryKeyInAFile: a file that sets every key of a command to
// its default is accepted, for every command.
func TestConfigEveryKeyInAFile(t *testing.T) {
	for _, mode := range modes {
		cmd := commandName(mode)
		def := config.Defaults(cmd)
		var b strings.Builder
		n := 0
		for _, k := range config.Keys() {
			if k.Name == "config" || !k.Has(cmd) {
				continue
			}
			fmt.Fprintf(&b, "%s: %q\n", k.Name, k.Get(&def.Settings))
			n++
		}
		p := writeConfig(t, b.String())
		args := []string{cmd, "--config", p, "--insecure-dev"}
		if _, l, err := configure(mode, args, io.Discard); err != nil {
			t.Errorf("%s: a file with all %d keys: %v", cmd, n, err)
		} else if l.File == nil || len(l.File.Keys) != n {
			t.Errorf("%s: file keys not read", cmd)
		}
	}
}

// TestConfigPrecedence: flag > env > file > default, each pair.
func TestConfigPrecedence(t *testing.T) {
	p := writeConfig(t, "history-ttl: 3h\nsignal-tick: 20ms\npresence-grace: 7s\nmax-rooms-per-conn: 5\n")
	t.Setenv("CORRAL_SIGNAL_TICK", "25ms")
	t.Setenv("CORRAL_MAX_ROOMS_PER_CONN", "6")
	opts := mustConfigure(t, server.Serve, "serve", "--insecure-dev", "--config", p, "--max-rooms-per-conn", "7")
	def := opts.Core.Classes.Table().Default()
	for name, tc := range map[string]struct{ got, want time.Duration }{
		"file > default (history-ttl)":     {opts.HistoryTTL, 3 * time.Hour},
		"env > file (signal-tick)":         {opts.Core.SignalTick, 25 * time.Millisecond},
		"flag > env (max-rooms-per-conn)":  {time.Duration(opts.Core.MaxRoomsPerConn), 7},
		"default (session-ttl)":            {opts.Core.SessionTTL, 2 * time.Minute},
		"default class takes the file":     {def.History.TTL, 3 * time.Hour},
		"default class takes the env":      {def.SignalTick, 25 * time.Millisecond},
		"default class takes the file too": {def.Presence.Grace, 7 * time.Second},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", name, tc.got, tc.want)
		}
	}
	// env > file, without a flag.
	opts = mustConfigure(t, server.Serve, "serve", "--insecure-dev", "--config", p)
	if opts.Core.MaxRoomsPerConn != 6 {
		t.Errorf("env > file: max-rooms-per-conn %v, want 6", opts.Core.MaxRoomsPerConn)
	}
	// CORRAL_CONFIG names the file.
	t.Setenv("CORRAL_CONFIG", p)
	opts = mustConfigure(t, server.Serve, "serve", "--insecure-dev")
	if opts.HistoryTTL != 3*time.Hour {
		t.Errorf("CORRAL_CONFIG: history-ttl %v, want the file's 3h", opts.HistoryTTL)
	}
}

// TestConfigErrors: configure refuses a bad file with file:line: key.
func TestConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct{ src, want string }{
		"unknown key":         {"history: 5\nhistroy-ttl: 1h\n", `:2: histroy-ttl: unknown key (did you mean "history-ttl"?)`},
		"bad value":           {"\n\nhistory-ttl: soon\n", `:3: history-ttl: parse error`},
		"another command's":   {"core: http://x\nbogus: 1\n", `:2: bogus: unknown key`},
		"class typo":          {"rooms:\n  - name: a\n    match: a\n    max-member: 3\n", `:4: rooms[0].max-member: unknown key (did you mean "max-members"?)`},
		"config in config":    {"config: other.yaml\n", `:1: config: a config file cannot name another one`},
		"a room-pattern key":  {"read-only-rooms: news\n", ":1: read-only-rooms: gone: room settings live in room classes"},
		"zero limit":          {"max-pending: 0\n", ":1: max-pending: parse error: want a positive number or unlimited"},
		"history ttl too low": {"session-ttl: 10m\nhistory-ttl: 5m\n", "history-ttl: 5m0s is shorter than the session TTL"},
	} {
		t.Run(name, func(t *testing.T) {
			p := writeConfig(t, tc.src)
			_, _, err := configure(server.Serve, []string{"serve", "--insecure-dev", "--config", p}, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestCheckConfig: check-config prints every error with its line and
// fails; a good file passes and is summed up.
func TestCheckConfig(t *testing.T) {
	bad := writeConfig(t, "history: 5\nrooms:\n  - name: chat\n    match: \"chat:*\"\n    histroy: {size: 3}\n  - name: one\n    match: \"chat:one\"\n  - name: ro\n    match: ro\n    publish: none\n    hooks: {publish: true}\nmax-rooms-per-con: 3\n")
	var out, errOut bytes.Buffer
	err := checkConfig([]string{bad}, &out, &errOut)
	if err == nil {
		t.Fatal("check-config passed a bad file")
	}
	for _, want := range []string{
		bad + `:5: rooms[0].histroy: unknown key (did you mean "history"?)`,
		bad + `:7: rooms[1](one).match[0]: "chat:one" can never match`,
		bad + `:11: rooms[2](ro).hooks.publish: the class is read-only`,
		bad + `:12: max-rooms-per-con: unknown key (did you mean "max-rooms-per-conn"?)`,
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("missing %q in:\n%s", want, errOut.String())
		}
	}
	out.Reset()
	good := writeConfig(t, "version: v7\nrooms:\n  - name: chat\n    match: \"chat:*\"\n")
	if err := checkConfig([]string{good}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `ok: version "v7"`) {
		t.Errorf("summary %q", out.String())
	}
	// What a reload refuses, check-config refuses or notes.
	for _, cut := range []string{"", "version: v7\nrooms:\n  - name: chat\n    match: \"chat:"} {
		p := writeConfig(t, cut)
		errOut.Reset()
		if err := checkConfig([]string{p}, io.Discard, &errOut); err == nil || !strings.Contains(errOut.String(), p+":") {
			t.Errorf("check-config of %q: %v, stderr %q", cut, err, errOut.String())
		}
	}
	errOut.Reset()
	if err := checkConfig([]string{writeConfig(t, "version: v8\n")}, io.Discard, &errOut); err != nil || !strings.Contains(errOut.String(), "no room classes") {
		t.Errorf("check-config of a file without classes: %v, stderr %q", err, errOut.String())
	}
}

// TestExampleConfig: docs/corral.example.yaml passes check-config and
// gives its four classes the settings docs/CONFIG.md describes.
func TestExampleConfig(t *testing.T) {
	const path = "../../docs/corral.example.yaml"
	var errOut bytes.Buffer
	if err := checkConfig([]string{path}, io.Discard, &errOut); err != nil {
		t.Fatalf("%v:\n%s", err, errOut.String())
	}
	opts := mustConfigure(t, server.Serve, "serve", "--insecure-dev", "--config", path)
	tb := opts.Core.Classes.Table()
	chat, canvas, live, news := tb.Lookup("chat:42"), tb.Lookup("canvas:1"), tb.Lookup("class:math-101"), tb.Lookup("news:world")
	switch {
	case chat.Name != "chat" || chat.History.Size != 10000 || chat.History.TTL != 24*time.Hour:
		t.Errorf("chat: %+v", chat)
	case canvas.Name != "canvas" || canvas.History.Size != 1 || canvas.SignalTick != 16*time.Millisecond:
		t.Errorf("canvas: %+v", canvas)
	case live.Name != "live-class" || !live.Presence.Enabled || !live.JoinLeaveEvents:
		t.Errorf("live class: %+v", live)
	case news.Name != "news" || news.Publish != roomclass.None || news.History.TTL < 24*time.Hour || news.WriteDelay != 20*time.Millisecond:
		t.Errorf("news: %+v", news)
	}
}

// TestRoomPatternFlagsGone: the room-pattern flags (and their variables)
// are refused with the class key to write instead.
func TestRoomPatternFlagsGone(t *testing.T) {
	for flag, want := range map[string]string{
		"read-only-rooms":   "publish: none and signal: none",
		"signal-tick-rooms": "signal-tick: DURATION",
		"hooks-join":        "hooks: {join: true}",
		"hooks-publish":     "hooks: {publish: true}",
	} {
		_, _, err := configure(server.Serve, []string{"serve", "--insecure-dev", "--" + flag, "news:*"}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--"+flag+" is gone") {
			t.Errorf("--%s: %v, want an error naming %q", flag, err, want)
		}
		t.Run(flag, func(t *testing.T) {
			t.Setenv(config.EnvName(flag), "news:*")
			_, _, err := configure(server.CoreOnly, []string{"core", "--insecure-dev"}, io.Discard)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want an error naming %q", config.EnvName(flag), err, want)
			}
		})
	}
}

// TestKeyNotAFlag: a key that is not a flag of the command is refused on
// the command line with where to set it instead.
func TestKeyNotAFlag(t *testing.T) {
	_, _, err := configure(server.Serve, []string{"serve", "--insecure-dev", "--publish-rate=5"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "CORRAL_PUBLISH_RATE") || !strings.Contains(err.Error(), "config file") {
		t.Fatalf("--publish-rate: %v, want where to set it", err)
	}
	_, _, err = configure(server.CoreOnly, []string{"core", "--insecure-dev", "--core", "http://x"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "corral edge") {
		t.Fatalf("core --core: %v, want the command that has it", err)
	}
}

// TestReload: the reloader reads the file anew; an invalid file is an
// error (the server keeps its table).
func TestReload(t *testing.T) {
	p := writeConfig(t, "rooms:\n  - name: a\n    match: a\n    max-members: 3\n")
	opts := mustConfigure(t, server.Serve, "serve", "--insecure-dev", "--config", p)
	if opts.Reload == nil {
		t.Fatal("no reloader with --config")
	}
	if err := os.WriteFile(p, []byte("version: two\nrooms:\n  - name: a\n    match: a\n    max-members: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tb, err := opts.Reload()
	if err != nil || tb.Lookup("a").MaxMembers != 5 || tb.Version != "two" {
		t.Fatalf("reload: %v %+v", err, tb)
	}
	if err := os.WriteFile(p, []byte("rooms:\n  - name: a\n    match: a\n    max-members: -1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := opts.Reload(); err == nil || !strings.Contains(err.Error(), ":4: rooms[0](a).max-members") {
		t.Fatalf("reload of an invalid file: %v", err)
	}
}

// TestConfigHistoryBounds: the in-memory history's global bounds have
// keys, "unlimited" included, and their defaults.
func TestConfigHistoryBounds(t *testing.T) {
	opts := mustConfigure(t, server.Serve, "serve", "--insecure-dev")
	if opts.HistoryMaxBytes != 256<<20 || opts.HistoryMaxKeys != 1<<20 {
		t.Errorf("defaults: history-max-bytes %v, history-max-keys %v", opts.HistoryMaxBytes, opts.HistoryMaxKeys)
	}
	p := writeConfig(t, "history-max-bytes: unlimited\nhistory-max-keys: 5000\n")
	opts = mustConfigure(t, server.Serve, "serve", "--insecure-dev", "--config", p)
	if opts.HistoryMaxBytes != config.Unlimited || opts.HistoryMaxKeys != 5000 {
		t.Errorf("from the file: history-max-bytes %v, history-max-keys %v", opts.HistoryMaxBytes, opts.HistoryMaxKeys)
	}
}
