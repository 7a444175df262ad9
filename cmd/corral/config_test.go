package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestConfigEveryFlagHasAKey: a file that sets every flag of a command to
// its default is accepted, for every command: no flag lacks a key.
func TestConfigEveryFlagHasAKey(t *testing.T) {
	for _, mode := range modes {
		fs, _ := flagSet(mode)
		var b strings.Builder
		n := 0
		fs.VisitAll(func(fl *flag.Flag) {
			if fl.Name == "config" {
				return
			}
			fmt.Fprintf(&b, "%s: %q\n", fl.Name, fl.DefValue)
			n++
		})
		p := writeConfig(t, b.String())
		args := []string{"x", "--config", p, "--insecure-dev"}
		if _, f, err := configure(mode, args, io.Discard); err != nil {
			t.Errorf("mode %v: a file with all %d flags: %v", mode, n, err)
		} else if f.file == nil || len(f.file.Keys) != n {
			t.Errorf("mode %v: file keys not read", mode)
		}
	}
}

// TestConfigPrecedence: flag > env > file > default, each pair.
func TestConfigPrecedence(t *testing.T) {
	p := writeConfig(t, "history-ttl: 3h\nsignal-tick: 20ms\npresence-grace: 7s\n")
	t.Setenv("CORRAL_SIGNAL_TICK", "25ms")
	t.Setenv("CORRAL_PRESENCE_GRACE", "9s")
	opts := mustConfigure(t, server.Serve, "serve", "--insecure-dev", "--config", p, "--presence-grace", "11s")
	def := opts.Core.Classes.Table().Default()
	for name, tc := range map[string]struct{ got, want time.Duration }{
		"file > default (history-ttl)": {opts.HistoryTTL, 3 * time.Hour},
		"env > file (signal-tick)":     {opts.Core.SignalTick, 25 * time.Millisecond},
		"flag > env (presence-grace)":  {opts.Core.Presence.Grace, 11 * time.Second},
		"default (session-ttl)":        {opts.Core.SessionTTL, 2 * time.Minute},
		"default class takes the file": {def.History.TTL, 3 * time.Hour},
		"default class takes the env":  {def.SignalTick, 25 * time.Millisecond},
		"default class takes the flag": {def.Presence.Grace, 11 * time.Second},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", name, tc.got, tc.want)
		}
	}
	// flag > file, without env.
	opts = mustConfigure(t, server.Serve, "serve", "--insecure-dev", "--config", p, "--history-ttl", "5h")
	if opts.HistoryTTL != 5*time.Hour {
		t.Errorf("flag > file: history-ttl %v, want 5h", opts.HistoryTTL)
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
		"sugar and classes":   {"read-only-rooms: news\nrooms:\n  - name: a\n    match: a\n", "declare those rooms as classes"},
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

// TestReadOnlyFlagIsSugar: --read-only-rooms and --signal-tick-rooms make
// classes.
func TestReadOnlyFlagIsSugar(t *testing.T) {
	opts := mustConfigure(t, server.Serve, "serve", "--insecure-dev", "--read-only-rooms", "news:*", "--signal-tick-rooms", "news:*=50ms,canvas:*=16ms")
	tb := opts.Core.Classes.Table()
	if c := tb.Lookup("news:a"); c.Publish != roomclass.None || c.Signal != roomclass.None || c.SignalTick != 50*time.Millisecond {
		t.Errorf("news:a %+v", c)
	}
	if c := tb.Lookup("canvas:a"); c.Publish != roomclass.Clients || c.SignalTick != 16*time.Millisecond {
		t.Errorf("canvas:a %+v", c)
	}
	if c := tb.Lookup("lobby"); c.Name != "default" {
		t.Errorf("lobby %+v", c)
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
