package config_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/corral-rt/corral/config"
)

// TestTypedValues: a Limit, a Rate and a Window each read their number or
// word and refuse 0, so that no value stands for another.
func TestTypedValues(t *testing.T) {
	for name, tc := range map[string]struct {
		v    interface{ UnmarshalText([]byte) error }
		in   string
		want string // the text form back; "" for a refusal
	}{
		"limit":              {new(config.Limit), "128", "128"},
		"limit unlimited":    {new(config.Limit), "unlimited", "unlimited"},
		"limit old negative": {new(config.Limit), "-1", "unlimited"},
		"limit zero":         {new(config.Limit), "0", ""},
		"limit word":         {new(config.Limit), "lots", ""},
		"rate":               {new(config.Rate), "2.5", "2.5"},
		"rate unlimited":     {new(config.Rate), "unlimited", "unlimited"},
		"rate zero":          {new(config.Rate), "0", ""},
		"window":             {new(config.Window), "250ms", "250ms"},
		"window off":         {new(config.Window), "off", "off"},
		"window zero":        {new(config.Window), "0", ""},
		"window negative":    {new(config.Window), "-1s", ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.v.UnmarshalText([]byte(tc.in))
			if tc.want == "" {
				if err == nil {
					t.Fatalf("%q accepted", tc.in)
				}
				return
			}
			if got := fmt.Sprint(tc.v); err != nil || got != tc.want {
				t.Fatalf("%q: %v, %q; want %q", tc.in, err, got, tc.want)
			}
		})
	}
}

// TestPrecedence: flag > environment > file > default.
func TestPrecedence(t *testing.T) {
	f, err := config.Parse("f.yaml", []byte("session-ttl: 5m\nsignal-tick: 20ms\nmax-rooms-per-conn: 5\n"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CORRAL_SIGNAL_TICK": "25ms", "CORRAL_MAX_ROOMS_PER_CONN": "6"}
	l, err := config.Load("serve", []string{"--max-rooms-per-conn", "7"}, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ApplyFile(f); err != nil {
		t.Fatal(err)
	}
	if l.Core.MaxRoomsPerConn != 7 || l.Core.SignalTick.String() != "25ms" || l.Core.SessionTTL.String() != "5m0s" || l.Presence.Grace.String() != "15s" {
		t.Fatalf("settings %+v %+v", l.Core, l.Presence)
	}
}

// Load reads a command's settings; a key that is not a flag is refused on
// the command line with where to set it.
func ExampleLoad() {
	env := func(name string) (string, bool) {
		if name == "CORRAL_PUBLISH_RATE" {
			return "unlimited", true
		}
		return "", false
	}
	l, err := config.Load("serve", []string{"--addr", "127.0.0.1:9000"}, env, io.Discard)
	if err != nil {
		panic(err)
	}
	fmt.Println(l.Node.Addr, l.Edge.MessageRate, l.Edge.MaxConnsPerUser)
	_, err = config.Load("serve", []string{"--publish-rate", "5"}, env, io.Discard)
	fmt.Println(err)
	// Output:
	// 127.0.0.1:9000 unlimited 1000
	// --publish-rate is not a flag of corral serve: set publish-rate in the config file (--config) or CORRAL_PUBLISH_RATE (corral config keys lists every key)
}

// TestEnumKeys: a key with an enum tag (the hooks' failure policies) takes
// only its values, from the environment and the file alike, and its error
// names them; the schema and the docs list them.
func TestEnumKeys(t *testing.T) {
	for _, tc := range []struct {
		key, env, good, bad string
	}{
		{"hooks-policy-join", "CORRAL_HOOKS_POLICY_JOIN", "allow-known", "open"},
		{"hooks-policy-publish", "CORRAL_HOOKS_POLICY_PUBLISH", "open", "allow-known"},
		{"hooks-policy-refresh", "CORRAL_HOOKS_POLICY_REFRESH", "allow-known", "open"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			k := config.Lookup(tc.key)
			if k == nil || len(k.Enum) != 2 || k.Enum[0] != "closed" {
				t.Fatalf("key %+v: want the enum closed and one more", k)
			}
			env := func(v string) func(string) (string, bool) {
				return func(name string) (string, bool) { return v, v != "" && name == tc.env }
			}
			if _, err := config.Load("serve", nil, env(tc.good), io.Discard); err != nil {
				t.Fatalf("%s=%s refused: %v", tc.env, tc.good, err)
			}
			_, err := config.Load("serve", nil, env(tc.bad), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.env) || !strings.Contains(err.Error(), "want one of closed, "+tc.good) {
				t.Fatalf("%s=%s: %v; want a refusal naming the variable and the values", tc.env, tc.bad, err)
			}
			f, err := config.Parse("f.yaml", []byte(tc.key+": "+tc.bad+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			l, err := config.Load("serve", nil, env(""), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.ApplyFile(f); err == nil || !strings.Contains(err.Error(), "want one of") {
				t.Fatalf("file %s: %s: %v; want a refusal", tc.key, tc.bad, err)
			}
			if !strings.Contains(config.KeyTable(), "one of closed, "+tc.good) {
				t.Fatalf("the key table does not list %s's values", tc.key)
			}
			schema, err := config.Schema()
			if err != nil || !strings.Contains(string(schema), `"closed",`) {
				t.Fatalf("schema: %v", err)
			}
		})
	}
}

// TestBacklogHoldsABurst: at the default limits, a connection's backlog
// at the core holds what one sender may send at once, so that no burst
// the limits allow closes it 4105 while its core writes to a slower
// store (with 8 MiB, 100 publishes and 64 signals of 60 KB did, on
// Redis); and the figure follows the limits it is made of.
func TestBacklogHoldsABurst(t *testing.T) {
	for _, cmd := range []string{"serve", "edge"} {
		d := config.Defaults(cmd).Settings
		if burst := d.Edge.SenderBurstBytes(); int64(d.Core.ConnQueueBytes) < int64(burst) {
			t.Errorf("%s: conn-backlog-bytes %d is less than one sender's burst at the default limits, %d bytes", cmd, d.Core.ConnQueueBytes, burst)
		}
		// Every frame a connection's buckets let through at once, each
		// kind at its burst, fits the backlog's frame bound too.
		e := d.Edge
		frames := e.MessageBurst + e.SignalBurst + e.ControlBurst + e.PresenceBurst + e.QueryBurst + e.AckBurst + e.MiscBurst + e.CallBurst
		if int64(d.Core.ConnQueueFrames) < int64(frames) {
			t.Errorf("%s: conn-backlog-frames %d is less than the %d frames the buckets' bursts let through at once", cmd, d.Core.ConnQueueFrames, frames)
		}
	}
	e := config.Defaults("serve").Settings.Edge
	base := e.SenderBurstBytes()
	e.MessageBurst *= 2
	if e.SenderBurstBytes() <= base {
		t.Error("a larger publish-burst does not raise SenderBurstBytes")
	}
	e.MessageRate = config.UnlimitedRate
	e.MessageBurst = 1 // what an unlimited rate's bucket is left with
	if e.SenderBurstBytes() != base {
		t.Errorf("an unlimited publish-rate sizes by %d bytes, want the default burst's %d", e.SenderBurstBytes(), base)
	}
}
