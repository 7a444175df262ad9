package edge

import (
	"fmt"
	"math"
	"net/http"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// Abuse limits at the edge. Each connection has three token buckets, used
// only by its reader goroutine (so they need no lock): messages
// (publish), signals, and control frames (join, leave, refresh). A frame
// over its bucket is refused with an Error frame (CODE_RATE_LIMITED, retry_after_ms)
// and not passed on; a connection that keeps sending while refused
// (Config.RateStrikes refusals within strikeWindow) is closed with
// CODE_RATE_LIMITED and a delay. Beside the buckets the edge bounds
// connections per user and connections still in their handshake (upgraded,
// no authenticated hello yet). Every refusal is counted in
// corral_edge_refused_total by reason.

// Reasons of corral_edge_refused_total.
const (
	refusedRateMessages  = "rate_messages"
	refusedRateSignals   = "rate_signals"
	refusedRateControl   = "rate_control"
	refusedRateClose     = "rate_sustained"
	refusedFrameTooLarge = "frame_too_large"
	refusedConnsPerUser  = "conns_per_user"
	refusedPending       = "pending_handshakes"
	refusedRefresh       = "refresh_token" // refresh.go
)

// strikeWindow is the window in which Config.RateStrikes refusals close a
// connection.
const strikeWindow = 10 * time.Second

// bucket is a token bucket for one goroutine. A zero rate means unlimited.
type bucket struct {
	rate, burst float64
	tokens      float64
	last        int64 // unix nanoseconds of the last refill
}

func newBucket(rate float64, burst int) bucket {
	if rate <= 0 {
		return bucket{}
	}
	b := float64(max(burst, 1))
	return bucket{rate: rate, burst: b, tokens: b}
}

// take takes one token at now, or reports how long until one is free.
func (b *bucket) take(now int64) (ok bool, wait time.Duration) {
	if b.rate <= 0 {
		return true, 0
	}
	if b.last != 0 {
		b.tokens = math.Min(b.burst, b.tokens+float64(now-b.last)/1e9*b.rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / b.rate * 1e9)
}

// limiter is one connection's buckets and strike count.
type limiter struct {
	messages, signals, control bucket
	strikes                    int
	windowStart                int64
}

func newLimiter(cfg *Config) *limiter {
	return &limiter{
		messages: newBucket(cfg.MessageRate, cfg.MessageBurst),
		signals:  newBucket(cfg.SignalRate, cfg.SignalBurst),
		control:  newBucket(cfg.ControlRate, cfg.ControlBurst),
	}
}

// check decides whether the reader passes f on. It reports false when f
// was refused; the connection is then either answered with an Error
// frame or, after too many strikes, closed.
func (c *conn) check(f *corralv1.ClientFrame) bool {
	var b *bucket
	var reason string
	switch f.GetKind().(type) {
	case *corralv1.ClientFrame_Publish:
		b, reason = &c.limits.messages, refusedRateMessages
	case *corralv1.ClientFrame_Signal:
		b, reason = &c.limits.signals, refusedRateSignals
	case *corralv1.ClientFrame_Join, *corralv1.ClientFrame_Leave, *corralv1.ClientFrame_Refresh:
		b, reason = &c.limits.control, refusedRateControl
	default:
		return true
	}
	now := time.Now().UnixNano()
	ok, wait := b.take(now)
	if ok {
		return true
	}
	c.e.metrics.refused.WithLabelValues(reason).Inc()
	l := c.limits
	if now-l.windowStart > int64(strikeWindow) {
		l.windowStart, l.strikes = now, 0
	}
	l.strikes++
	if strikes := c.e.cfg.RateStrikes; strikes > 0 && l.strikes > strikes {
		c.e.metrics.refused.WithLabelValues(refusedRateClose).Inc()
		c.closeWith(corralv1.Code_CODE_RATE_LIMITED,
			fmt.Sprintf("more than %d frames over the rate limit within %v", strikes, strikeWindow),
			uint32(c.e.cfg.RateCloseDelay.Milliseconds()), false)
		return false
	}
	ms := uint32(min(wait.Milliseconds()+1, math.MaxUint32))
	c.refuse(f, corralv1.Code_CODE_RATE_LIMITED, "rate limit: slow down", ms)
	return false
}

// pendingAdd counts a connection entering its handshake, or refuses it
// (false) when Config.MaxPending are in theirs already.
func (e *Edge) pendingAdd() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cfg.MaxPending > 0 && e.pending >= e.cfg.MaxPending {
		return false
	}
	e.pending++
	e.metrics.pending.Set(float64(e.pending))
	return true
}

// pendingDone ends a connection's handshake (hello authenticated, or the
// connection gone).
func (e *Edge) pendingDone() {
	e.mu.Lock()
	e.pending--
	e.metrics.pending.Set(float64(e.pending))
	e.mu.Unlock()
}

// userAdd counts a connection of user, or refuses it (false) when the
// user has Config.MaxConnsPerUser on this edge already.
func (e *Edge) userAdd(user string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.users[user]
	if e.cfg.MaxConnsPerUser > 0 && n >= e.cfg.MaxConnsPerUser {
		return false
	}
	e.users[user] = n + 1
	return true
}

func (e *Edge) userDone(user string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := e.users[user]; n <= 1 {
		delete(e.users, user)
	} else {
		e.users[user] = n - 1
	}
}

// refusePending answers an upgrade past Config.MaxPending: 503 with a
// jittered Retry-After, like admission control.
func (e *Edge) refusePending(w http.ResponseWriter) {
	e.metrics.refused.WithLabelValues(refusedPending).Inc()
	refuseWith(w, time.Second, "too many connections are in their handshake; retry after the delay")
}
