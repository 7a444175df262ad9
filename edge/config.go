package edge

import (
	"log/slog"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	"github.com/corral-rt/corral/hooks"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures an Edge. Core (or Cores) and Auth are required.
type Config struct {
	// Edge is the settings of package config (docs/CONFIG.md, Keys):
	// ReadLimit (max-frame, default 64 KiB), HelloTimeout (10s),
	// DrainWindow (10s; a drain tells each client to come back after a
	// delay uniform in [0, DrainWindow]), ReplayBytes (see replayBytes),
	// CoalesceWindow (ignored: no frame waits for a timer; sender.go),
	// each token bucket's rate and burst, OriginPatterns (the browser
	// origins, host patterns as websocket.AcceptOptions's, allowed besides
	// the request's own host), HookHeaders and HookCookies
	// (what the Connect hook is shown), RateStrikes (refusals by the
	// buckets within 10s that close a connection with
	// CODE_RATE_LIMITED), MaxConnsPerUser (past it a connection is
	// closed after its hello with CODE_LIMIT_EXCEEDED) and MaxPending
	// (upgraded connections whose hello is not yet authenticated; past
	// it an upgrade is answered 503 with Retry-After). Zero fields take
	// the defaults below; config.Unlimited and config.UnlimitedRate lift
	// a bound.
	config.Edge
	// Core is the core the edge links to (in-process or over h2c).
	Core linkv1connect.LinkServiceClient
	// Cores, when set, replaces Core: several cores sharing one Redis. The
	// edge keeps Links streams to each; a connection is assigned to one
	// stream. When a stream fails, it re-opens on the next core in the
	// list and the edge resumes the stream's sessions there (sessions live
	// in Redis, so any core can resume them): a failed core costs its
	// clients no disconnect. A failed-over stream stays on its new core
	// until that one fails too.
	Cores []linkv1connect.LinkServiceClient
	// Auth verifies connection tokens.
	Auth auth.Authenticator
	// Links is how many Link streams the edge keeps to each core;
	// connections are spread over all of them. Default 2.
	Links int
	// AnyOrigin accepts every origin. For local development only.
	AnyOrigin bool
	// Heartbeat is the interval clients are told to keep; a connection
	// silent for twice as long is closed with CODE_HEARTBEAT_TIMEOUT.
	// Default 25s.
	Heartbeat time.Duration
	// WriteTimeout bounds one write to a socket; past it the connection is
	// a slow consumer. Default 5s.
	WriteTimeout time.Duration
	// QueueFrames and QueueBytes bound one connection's send queue; past
	// either the connection is a slow consumer. Default 4096 frames, and
	// bytes derived from the limits (config.Edge.SenderBurstBytes): one
	// sender's whole burst of publishes and signals of the largest frames,
	// and a tick of a room's signals and presence, about 20 MiB by default.
	QueueFrames int
	QueueBytes  int
	// MaxCallsInFlight bounds a connection's calls waiting for the
	// backend; past it a call is answered CODE_RATE_LIMITED. Default 8.
	MaxCallsInFlight int
	// Hooks, when set, is the application's backend; its Policy says
	// whether the edge calls Connect (instead of Auth), Refresh and Call
	// (docs/HOOKS.md). Nil: no hooks.
	Hooks *hooks.Client
	// RateCloseDelay is how long a connection closed for RateStrikes is
	// told to stay away. Default 10s.
	RateCloseDelay time.Duration
	// Logger receives structured logs. Nil: slog.Default().
	Logger *slog.Logger
	// Registerer receives the edge's metrics. Nil: not registered.
	Registerer prometheus.Registerer
}

func (c *Config) withDefaults() Config {
	out := *c
	if len(out.Cores) == 0 && out.Core != nil {
		out.Cores = []linkv1connect.LinkServiceClient{out.Core}
	}
	if out.Links <= 0 {
		out.Links = 2
	}
	if out.ReadLimit <= 0 {
		out.ReadLimit = 64 << 10
	}
	if out.StreamHeartbeat <= 0 {
		out.StreamHeartbeat = 15 * time.Second
	}
	if out.MaxPostBytes <= 0 {
		out.MaxPostBytes = 4 * out.ReadLimit
	}
	if out.HelloTimeout <= 0 {
		out.HelloTimeout = 10 * time.Second
	}
	if out.Heartbeat <= 0 {
		out.Heartbeat = 25 * time.Second
	}
	if out.WriteTimeout <= 0 {
		out.WriteTimeout = 5 * time.Second
	}
	if out.QueueFrames <= 0 {
		out.QueueFrames = 4096
	}
	if out.HandshakeRate == 0 {
		out.HandshakeRate, out.HandshakeBurst = 10000, 10000
	}
	if out.ResumeRate == 0 {
		out.ResumeRate, out.ResumeBurst = 10000, 10000
	}
	out.MessageRate, out.MessageBurst = bucketDefaults(out.MessageRate, out.MessageBurst, 50, 100)
	out.SignalRate, out.SignalBurst = bucketDefaults(out.SignalRate, out.SignalBurst, 100, 200)
	out.ControlRate, out.ControlBurst = bucketDefaults(out.ControlRate, out.ControlBurst, 20, 200)
	out.PresenceRate, out.PresenceBurst = bucketDefaults(out.PresenceRate, out.PresenceBurst, 10, 20)
	out.QueryRate, out.QueryBurst = bucketDefaults(out.QueryRate, out.QueryBurst, 10, 50)
	out.AckRate, out.AckBurst = bucketDefaults(out.AckRate, out.AckBurst, 50, 200)
	out.MiscRate, out.MiscBurst = bucketDefaults(out.MiscRate, out.MiscBurst, 5, 20)
	out.CallRate, out.CallBurst = bucketDefaults(out.CallRate, out.CallBurst, 10, 20)
	if out.QueueBytes <= 0 {
		// What one sender may send at once fits: no traffic the limits
		// allow closes a reader, even one paused while it arrives.
		out.QueueBytes = out.Edge.SenderBurstBytes()
	}
	if out.MaxCallsInFlight <= 0 {
		out.MaxCallsInFlight = 8
	}
	if out.RateStrikes == 0 {
		out.RateStrikes = 100
	}
	if out.RateCloseDelay <= 0 {
		out.RateCloseDelay = 10 * time.Second
	}
	if out.MaxConnsPerUser == 0 {
		out.MaxConnsPerUser = 1000
	}
	if out.MaxPending == 0 {
		out.MaxPending = 10000
	}
	if out.DrainWindow <= 0 {
		out.DrainWindow = 10 * time.Second
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	return out
}

// bucketDefaults fills a token bucket's rate and burst: a zero rate takes
// the default, a zero burst twice the rate (at least the default burst
// when the rate is the default).
func bucketDefaults(rate config.Rate, burst int, defRate config.Rate, defBurst int) (config.Rate, int) {
	if rate == 0 {
		rate = defRate
		if burst <= 0 {
			burst = defBurst
		}
	}
	if burst <= 0 {
		burst = max(1, int(2*rate))
	}
	return rate, burst
}

// replayPage is the messages of one history page (history.MaxPage; the
// edge does not import history).
const replayPage = 1000

// replayBytes is the byte bound of the replays queued for one connection,
// apart from QueueBytes: one history page of the largest messages, each
// with its frame's fields (~65 MiB with the 64 KiB read limit). A client
// that reads gets a replay of a page of the largest messages; one that
// joins rooms with large histories and never reads is closed at the next
// replay past it (CODE_SLOW_CONSUMER, replay_full) instead of holding a
// replay per join. The core sends a replay a page at a time (1 MiB, at
// least one message), the next when the writer took the last
// (ConnReplay.ack, conn.reportTaken), so a replay of any length passes a
// client that reads; what the bound meets is a page per room being
// replayed at once, the snapshots, and the live messages held for a join
// that follow its last page (the core's catch-up, up to 64 MiB).
//
// Config.ReplayBytes (key replay-max-bytes), when set, replaces it.
func (c *Config) replayBytes() int {
	if c.ReplayBytes > 0 {
		return c.ReplayBytes
	}
	const frameFields = 1 << 10
	return replayPage * int(c.ReadLimit+frameFields)
}
