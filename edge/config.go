package edge

import (
	"log/slog"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	"github.com/corral-rt/corral/hooks"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures an Edge. Core (or Cores) and Auth are required.
type Config struct {
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
	// OriginPatterns are the browser origins (host patterns, see
	// websocket.AcceptOptions) allowed besides the request's own host.
	OriginPatterns []string
	// AnyOrigin accepts every origin. For local development only.
	AnyOrigin bool
	// ReadLimit bounds one client frame in bytes. Default 64 KiB.
	ReadLimit int64
	// HelloTimeout bounds the wait for the first frame. Default 10s.
	HelloTimeout time.Duration
	// Heartbeat is the interval clients are told to keep; a connection
	// silent for twice as long is closed with CODE_HEARTBEAT_TIMEOUT.
	// Default 25s.
	Heartbeat time.Duration
	// WriteTimeout bounds one write to a socket; past it the connection is
	// a slow consumer. Default 5s.
	WriteTimeout time.Duration
	// StreamHeartbeat is how long an HTTP carrier (SSE, HTTP streaming:
	// docs/TRANSPORTS.md) may go without a write before the edge writes
	// a heartbeat, under the idle timeouts of proxies (often 30 s).
	// Default 15s.
	StreamHeartbeat time.Duration
	// MaxPostBytes bounds the body of one POST to a stream (its frames,
	// each also under ReadLimit). Default 4 × ReadLimit.
	MaxPostBytes int64
	// CoalesceWindow is ignored: no frame waits for a timer. A socket's
	// writer sends what is queued at once, and frames queued while a
	// write is under way (or the socket is full) go together in the next
	// (sender.go). Kept so that configurations that set it still load.
	CoalesceWindow time.Duration
	// QueueFrames and QueueBytes bound one connection's send queue; past
	// either the connection is a slow consumer. Default 4096 frames, and
	// bytes derived from the limits (queueBytesFor): one sender's whole
	// message burst of the largest frames, and a tick of a room's signals
	// and presence, about 7.4 MiB by default.
	QueueFrames int
	QueueBytes  int
	// HandshakeRate and HandshakeBurst are the token bucket for new
	// connections (per second; 0: unlimited). Defaults 10000 and 10000.
	HandshakeRate  float64
	HandshakeBurst int
	// ResumeRate and ResumeBurst are the bucket for resuming connections
	// (URL ?resume=1). Defaults 10000 and 10000.
	ResumeRate  float64
	ResumeBurst int
	// MessageRate and MessageBurst are each connection's token bucket for
	// publishes (per second). Past it a publish gets an Error frame with
	// CODE_RATE_LIMITED and retry_after_ms. Defaults 50 and 100; a
	// negative rate: unlimited.
	MessageRate  float64
	MessageBurst int
	// SignalRate and SignalBurst are the bucket for signals. Defaults 100
	// and 200 (a cursor at 60 Hz fits).
	SignalRate  float64
	SignalBurst int
	// ControlRate and ControlBurst are the bucket for joins and leaves.
	// Defaults 20 and 200 (a client joining its 128 rooms at once fits).
	ControlRate  float64
	ControlBurst int
	// PresenceRate and PresenceBurst are the bucket for presence updates
	// (set_presence). Defaults 10 and 20. The core also keeps at most one
	// update per room queued for a connection (latest wins).
	PresenceRate  float64
	PresenceBurst int
	// QueryRate and QueryBurst are the bucket for presence queries
	// (presence_query). Defaults 10 and 50 (pages of a big room at once).
	QueryRate  float64
	QueryBurst int
	// AckRate and AckBurst are the bucket for acks. Defaults 50 and 200
	// (an ack per room after a resume into its 128 rooms fits).
	AckRate  float64
	AckBurst int
	// MiscRate and MiscBurst are the bucket for every other frame: pings
	// (answered by the edge), a hello after the first (an error), and
	// frames of kinds this edge does not know (an error). Defaults 5 and
	// 20 (a heartbeat ping every 25 s fits many times).
	MiscRate  float64
	MiscBurst int
	// CallRate and CallBurst are the bucket for calls (the Call hook).
	// Defaults 10 and 20.
	CallRate  float64
	CallBurst int
	// MaxCallsInFlight bounds a connection's calls waiting for the
	// backend; past it a call is answered CODE_RATE_LIMITED. Default 8.
	MaxCallsInFlight int
	// Hooks, when set, is the application's backend; its Policy says
	// whether the edge calls Connect (instead of Auth), Refresh and Call
	// (docs/HOOKS.md). Nil: no hooks.
	Hooks *hooks.Client
	// HookHeaders and HookCookies are the request headers and cookies the
	// Connect hook is shown; no others are.
	HookHeaders, HookCookies []string
	// RateStrikes is how many refusals by the buckets within 10 seconds
	// close a connection with CODE_RATE_LIMITED (sustained abuse), told to
	// come back after RateCloseDelay. Defaults 100 and 10s; negative: never
	// close.
	RateStrikes    int
	RateCloseDelay time.Duration
	// MaxConnsPerUser bounds one user's connections on this edge; past it
	// a connection is closed after its hello with CODE_LIMIT_EXCEEDED.
	// Default 1000; negative: unlimited.
	MaxConnsPerUser int
	// MaxPending bounds the connections upgraded whose hello has not been
	// authenticated yet (slow or silent clients, each held at most
	// HelloTimeout); past it an upgrade is answered 503 with Retry-After.
	// Default 10000; negative: unlimited.
	MaxPending int
	// DrainWindow spreads the reconnect hints of a drain: each client is
	// told to come back after a delay uniform in [0, DrainWindow]. Default
	// 10s.
	DrainWindow time.Duration
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
		out.QueueBytes = queueBytesFor(out.MessageBurst, out.ReadLimit)
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
func bucketDefaults(rate float64, burst int, defRate float64, defBurst int) (float64, int) {
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

// queueBytesFor is the send queue's byte bound that no limit-respecting
// traffic passes for a reader that keeps up: what one sender may publish
// at once (burst frames of the largest size, each with its server
// frame's fields: room, sender, id, seq), plus 1 MiB for a tick of a
// room's signals (core: 256 KiB a tick) and presence. With the 1 MiB it
// had, a burst of 100 publishes of 60 KB, all the limits allow, closed a
// reader that parsed JSON as it read (4001).
func queueBytesFor(burst int, readLimit int64) int {
	const frameFields, ticks = 1 << 10, 1 << 20
	return max(burst, 1)*int(readLimit+frameFields) + ticks
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
// replay per join. The core still sends a replay at once, not as the
// socket drains (issue 35 item 2): this bounds what one connection
// holds, not what all of them hold together.
func (c *Config) replayBytes() int {
	const frameFields = 1 << 10
	return replayPage * int(c.ReadLimit+frameFields)
}
