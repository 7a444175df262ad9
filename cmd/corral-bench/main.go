// Command corral-bench drives a corral deployment with the reference
// workloads and reports what users feel: a table on the terminal, a JSON
// record (--json) and a self-contained HTML page (--report).
//
//	corral-bench broadcast  [flags]   W3: server-side publishes to N sockets
//	corral-bench connect    [flags]   W3: connection rate, memory per connection
//	corral-bench chat-burst [flags]   W4: a burst of persisted chat posts
//
// This file holds flags and wiring only; behaviour lives in package bench.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/bench"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/edge"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/server"
)

const usage = `corral-bench — load corral with the reference workloads and see what users feel.

Usage:
  corral-bench <scenario> [flags]
  corral-bench <scenario> --help     the scenario, its seed, and every flag

Scenarios:
%s
Run corral as its own process, so that its cost is its own:

  go build -o /tmp/corral ./cmd/corral
  /tmp/corral serve --insecure-dev --addr 127.0.0.1:8080 --internal-addr 127.0.0.1:8091 &
  corral-bench broadcast --url ws://127.0.0.1:8080/ws --api http://127.0.0.1:8091 --pid $!

or let corral-bench start one inside its own process (quick, but then the
server and the generator share one process and its CPU figures):

  corral-bench broadcast --spawn --sockets 2000 --rate 500

Every run checks delivery (order, gaps, duplicates, acknowledged but missing)
and exits 1 when anything was lost. Load only goes to loopback addresses
unless --allow-remote.
`

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "corral-bench:", err)
		}
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(stderr, usage, scenarioList())
		return nil
	}
	if args[0] == bench.ProxyChildArg && len(args) == 2 {
		// One of storm's proxy processes, started by a storm run.
		return bench.ProxyChildMain(args[1], os.Stdin, stdout)
	}
	sc := bench.Lookup(args[0])
	if sc == nil {
		fmt.Fprintf(stderr, usage, scenarioList())
		return fmt.Errorf("unknown scenario %q", args[0])
	}
	fs := flag.NewFlagSet("corral-bench "+sc.Name(), flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := defineCommon(fs)
	sc.Flags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "corral-bench %s [flags]\n\n%s\n\nFlags:\n", sc.Name(), sc.Describe())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	opts, err := c.options(stderr)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if c.spawn {
		so := server.Options{
			Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0"},
			Auth: auth.Dev{}, APIInsecure: true,
			// Load, not abuse: the per-connection rates and the per-user
			// bound are lifted (the other limits stay).
			Edge:   edge.Config{Edge: config.Edge{MessageRate: -1, SignalRate: -1, ControlRate: -1, PresenceRate: -1, QueryRate: -1, AckRate: -1, MiscRate: -1, MaxConnsPerUser: -1}},
			Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		}
		def := roomclass.Default()
		def.State.Delta = c.stateDelta
		so.Core.Classes = roomclass.NewLive(roomclass.NewTable(def, nil))
		node, err := server.Start(so)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = node.Close(sctx)
		}()
		opts.Target.WS = "ws://" + node.Addr() + "/ws"
		opts.Target.API = "http://" + node.InternalAddr()
		opts.Target.Metrics = ""
		opts.Target.PID = os.Getpid()
		opts.InProcess = true
		fmt.Fprintf(stderr, "corral running in this process (pid %d): %s, internal API %s\n",
			os.Getpid(), opts.Target.WS, opts.Target.API)
	}

	res, runErr := sc.Run(ctx, opts)
	if res == nil {
		return runErr
	}
	if err := res.WriteText(stdout); err != nil {
		return err
	}
	if c.jsonFile != "" {
		if err := writeFile(c.jsonFile, res.WriteJSON); err != nil {
			return err
		}
	}
	if c.report != "" {
		if err := writeFile(c.report, res.WriteHTML); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "report: %s\n", c.report)
	}
	return runErr
}

type common struct {
	url, api, apiKey, metrics, token string
	pid, sources                     int
	encoding, clientKind             string
	drain                            time.Duration
	jsonFile, report                 string
	allowRemote, spawn, stateDelta   bool
	quiet                            bool
	cpuProfile                       string
	transport                        string
}

func defineCommon(fs *flag.FlagSet) *common {
	c := new(common)
	fs.StringVar(&c.url, "url", "ws://127.0.0.1:8080/ws", "corral's WebSocket endpoint")
	fs.StringVar(&c.api, "api", "", "base `URL` of corral's internal RoomService API (corral serve --internal-addr), e.g. http://127.0.0.1:8091; broadcast publishes through it")
	fs.StringVar(&c.apiKey, "api-key", os.Getenv("CORRAL_BENCH_API_KEY"), "`key` for the internal API (one of corral's --api-keys), sent as a bearer token [CORRAL_BENCH_API_KEY]")
	fs.StringVar(&c.metrics, "metrics", "", "corral's Prometheus `URL` for server cost when --pid is not given (default: /metrics on the --url host)")
	fs.IntVar(&c.pid, "pid", 0, "the corral server's process `id` on this machine: its CPU and memory are read from /proc")
	fs.StringVar(&c.token, "token", "", "connection token every client sends (default: each client's own name, a user id for corral --insecure-dev)")
	fs.StringVar(&c.encoding, "encoding", "json", "client subprotocol: json or proto")
	fs.StringVar(&c.transport, "transport", "ws", "clients' carrier: ws, sse (Server-Sent Events and POSTs) or stream (HTTP streaming and POSTs); docs/TRANSPORTS.md")
	fs.StringVar(&c.clientKind, "client", "fast", "how clients read: fast (their own frame reader) or standard (coder/websocket's Conn.Read, one goroutine per socket, like most users' clients)")
	fs.IntVar(&c.sources, "sources", 0, "spread clients over source addresses 127.0.0.1 to 127.0.0.`N` (0: one per 2,000 connections when the target is 127.0.0.1)")
	fs.DurationVar(&c.drain, "drain", 10*time.Second, "how long to wait for deliveries in flight after the last publish")
	fs.StringVar(&c.jsonFile, "json", "", "write the JSON record to `FILE`")
	fs.StringVar(&c.report, "report", "", "write a self-contained HTML report (latency histogram, timeline) to `FILE.html`")
	fs.BoolVar(&c.allowRemote, "allow-remote", false, "allow targets that are not loopback addresses")
	fs.BoolVar(&c.spawn, "spawn", false, "start corral (serve mode, in memory, dev auth) inside this process and load it; ignores --url, --api, --pid")
	fs.BoolVar(&c.stateDelta, "spawn-state-delta", false, "with --spawn: every room's class sends keyed-state sets as deltas when smaller (state.delta, docs/DELTA.md)")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress line each second on stderr")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of this process (with --spawn: server and generator) to `FILE`")
	return c
}

func (c *common) options(stderr io.Writer) (bench.Options, error) {
	o := bench.Options{
		Target: bench.Target{
			WS: c.url, API: c.api, APIKey: c.apiKey, Metrics: c.metrics, PID: c.pid, Token: c.token, AllowRemote: c.allowRemote,
		},
		Sources: c.sources,
		Drain:   c.drain,
	}
	switch c.encoding {
	case "json":
		o.Encoding = protocol.JSON
	case "proto":
		o.Encoding = protocol.Proto
	default:
		return o, fmt.Errorf("--encoding is json or proto, not %q", c.encoding)
	}
	tr, err := client.ParseTransport(c.transport)
	if err != nil {
		return o, fmt.Errorf("--transport: %w", err)
	}
	o.Transport = tr
	kind, ok := bench.ParseClientKind(c.clientKind)
	if !ok {
		return o, fmt.Errorf("--client is fast or standard, not %q", c.clientKind)
	}
	o.Client = kind
	if !c.quiet {
		o.Progress = stderr
	}
	return o, nil
}

func scenarioList() string {
	var b strings.Builder
	for _, s := range bench.Scenarios() {
		first, _, _ := strings.Cut(s.Describe(), "\n")
		fmt.Fprintf(&b, "  %-11s %s\n", s.Name(), first)
	}
	return b.String()
}

func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
