package bench

import (
	"context"
	"flag"
	"io"
	"sort"
	"time"

	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/protocol"
)

// A Scenario is one reference workload. Its exported fields are its
// parameters; Flags binds them to a flag set, with the seed's values as
// defaults. Run may be called once per value.
type Scenario interface {
	// Name is the command-line name, e.g. "broadcast".
	Name() string
	// Describe is a paragraph for --help: the workload, its seed and the
	// figure to beat.
	Describe() string
	// Flags registers the scenario's parameters on fs.
	Flags(fs *flag.FlagSet)
	// Run drives the target until the scenario's bounded duration ends
	// or ctx is done, then checks delivery. It returns the Result even
	// with an error wrapping ErrViolation.
	Run(ctx context.Context, o Options) (*Result, error)
}

// Options are what every scenario shares.
type Options struct {
	Target Target
	// Encoding is the subprotocol of the WebSocket clients. Default JSON.
	Encoding protocol.Encoding
	// Transport is the clients' carrier: WebSocket (the default), or an
	// HTTP fallback (client.SSE, client.HTTPStream; docs/TRANSPORTS.md).
	Transport client.Transport
	// Client is how the WebSocket clients read. Default ClientFast.
	Client ClientKind
	// Sources is how many loopback source addresses (127.0.0.1 to
	// 127.0.0.N, round-robin) the clients connect from. 0: one per
	// 2,000 connections when the target is an IPv4 loopback address,
	// else one.
	Sources int
	// Drain bounds the wait for deliveries still in flight after the last
	// publish. Default 10s.
	Drain time.Duration
	// InProcess says the server runs in this process (corral-bench
	// --spawn): each connection then costs two open files, not one.
	InProcess bool
	// Progress receives a status line every second; nil: quiet.
	Progress io.Writer
}

func (o Options) withDefaults() Options {
	if o.Drain <= 0 {
		o.Drain = 10 * time.Second
	}
	return o
}

// Scenarios returns a fresh value of every scenario, by name, with the
// seeds' defaults.
func Scenarios() []Scenario {
	s := []Scenario{NewBroadcast(), NewBusyRoom(), NewConnect(), NewChatBurst(), NewCursors(), NewDocEdit(), NewLimit(), NewOutboxBurst(), NewStorm(), NewVersus()}
	sort.Slice(s, func(i, j int) bool { return s[i].Name() < s[j].Name() })
	return s
}

// Lookup returns a fresh scenario by name, or nil.
func Lookup(name string) Scenario {
	for _, s := range Scenarios() {
		if s.Name() == name {
			return s
		}
	}
	return nil
}
