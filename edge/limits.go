package edge

import (
	"fmt"
	"math"
	"net/http"
	"reflect"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/mono"
)

// Abuse limits at the edge. Every client frame kind takes a token from one
// of its connection's buckets, as the table rules says (one row per
// ClientFrame kind; a kind without a row, such as a newer client's frame
// this edge cannot decode, takes from the misc bucket). The buckets are
// used only by the connection's reader goroutine, so they need no lock. A
// frame over its bucket is refused with an Error frame (CODE_RATE_LIMITED,
// retry_after_ms) and not passed on; a connection that keeps sending while
// refused (Config.RateStrikes refusals within strikeWindow) is closed with
// CODE_RATE_LIMITED and a delay, and what it sends after that is dropped
// uncounted. Beside the buckets the edge bounds connections per user and
// connections still in their handshake (upgraded, no authenticated hello
// yet). Every refusal is counted in corral_edge_refused_total by reason.

// The buckets of a connection.
const (
	bucketMessages = iota // publish
	bucketSignals         // signal
	bucketControl         // join, leave, refresh
	bucketPresence        // set_presence
	bucketQueries         // presence_query
	bucketAcks            // ack
	bucketMisc            // ping, hello again, unknown frames
	bucketCalls           // call
	numBuckets
)

// rule is what bounds one frame kind: the bucket it takes a token from
// and the reason counted when it is refused.
type rule struct {
	bucket int
	reason refuseReason
}

// rules is the one table of the per-connection rate limits, keyed by the
// ClientFrame kind. docs/SECURITY.md's limits table has a row for each.
var rules = map[reflect.Type]rule{
	reflect.TypeFor[*corralv1.ClientFrame_Hello]():         {bucketMisc, refusedRateMisc},
	reflect.TypeFor[*corralv1.ClientFrame_Join]():          {bucketControl, refusedRateControl},
	reflect.TypeFor[*corralv1.ClientFrame_Leave]():         {bucketControl, refusedRateControl},
	reflect.TypeFor[*corralv1.ClientFrame_Publish]():       {bucketMessages, refusedRateMessages},
	reflect.TypeFor[*corralv1.ClientFrame_Signal]():        {bucketSignals, refusedRateSignals},
	reflect.TypeFor[*corralv1.ClientFrame_Ack]():           {bucketAcks, refusedRateAcks},
	reflect.TypeFor[*corralv1.ClientFrame_Ping]():          {bucketMisc, refusedRateMisc},
	reflect.TypeFor[*corralv1.ClientFrame_SetPresence]():   {bucketPresence, refusedRatePresence},
	reflect.TypeFor[*corralv1.ClientFrame_PresenceQuery](): {bucketQueries, refusedRateQueries},
	reflect.TypeFor[*corralv1.ClientFrame_Refresh]():       {bucketControl, refusedRateControl},
	reflect.TypeFor[*corralv1.ClientFrame_Call]():          {bucketCalls, refusedRateCalls},
	// Growing messages' appends and keyed state's writes are stored
	// writes to a room, as publishes are: they share the messages bucket
	// until they get their own (issue 39).
	reflect.TypeFor[*corralv1.ClientFrame_Append]():      {bucketMessages, refusedRateMessages},
	reflect.TypeFor[*corralv1.ClientFrame_SetState]():    {bucketMessages, refusedRateMessages},
	reflect.TypeFor[*corralv1.ClientFrame_DeleteState](): {bucketMessages, refusedRateMessages},
}

// ruleOf returns the rule of f's kind (nil f: a frame this edge does not
// know).
func ruleOf(f *corralv1.ClientFrame) rule {
	if r, ok := rules[reflect.TypeOf(f.GetKind())]; ok {
		return r
	}
	return rule{bucketMisc, refusedRateMisc}
}

// strikeWindow is the window in which Config.RateStrikes refusals close a
// connection.
const strikeWindow = 10 * time.Second

// bucket is a token bucket for one goroutine. A zero rate means unlimited.
type bucket struct {
	rate, burst float64
	tokens      float64
	last        int64 // mono.Now nanoseconds of the last refill
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

// limiter is one connection's buckets and strike count. Rates and bursts
// are the edge's (rules, one array for every connection); a connection
// holds only each bucket's tokens and last refill: 160 bytes instead of
// 288, for every idle connection.
type limiter struct {
	rules       *[numBuckets]bucket
	state       [numBuckets]bucketState
	strikes     int
	windowStart int64
	// closed: the connection is being closed for sustained abuse; frames
	// read after that are dropped and not counted again.
	closed bool
}

// bucketState is what of a bucket changes: its tokens and last refill.
type bucketState struct {
	tokens float64
	last   int64
}

// bucketRules is the edge's bucket of each kind, full, from cfg.
func bucketRules(cfg *Config) *[numBuckets]bucket {
	var r [numBuckets]bucket
	r[bucketMessages] = newBucket(float64(cfg.MessageRate), cfg.MessageBurst)
	r[bucketSignals] = newBucket(float64(cfg.SignalRate), cfg.SignalBurst)
	r[bucketControl] = newBucket(float64(cfg.ControlRate), cfg.ControlBurst)
	r[bucketPresence] = newBucket(float64(cfg.PresenceRate), cfg.PresenceBurst)
	r[bucketQueries] = newBucket(float64(cfg.QueryRate), cfg.QueryBurst)
	r[bucketAcks] = newBucket(float64(cfg.AckRate), cfg.AckBurst)
	r[bucketMisc] = newBucket(float64(cfg.MiscRate), cfg.MiscBurst)
	r[bucketCalls] = newBucket(float64(cfg.CallRate), cfg.CallBurst)
	return &r
}

// newLimiter returns a connection's limiter with every bucket full.
func newLimiter(rules *[numBuckets]bucket) *limiter {
	l := &limiter{rules: rules}
	for i := range l.state {
		l.state[i].tokens = rules[i].tokens
	}
	return l
}

// bucket returns bucket i as this connection has it.
func (l *limiter) bucket(i int) bucket {
	b := l.rules[i]
	b.tokens, b.last = l.state[i].tokens, l.state[i].last
	return b
}

// setBucket makes b's tokens and last refill bucket i's (its rate and
// burst are the edge's).
func (l *limiter) setBucket(i int, b bucket) {
	l.state[i] = bucketState{tokens: b.tokens, last: b.last}
}

// take takes one token of bucket i at now, or reports how long until one
// is free.
func (l *limiter) take(i int, now int64) (ok bool, wait time.Duration) {
	b := l.bucket(i)
	ok, wait = b.take(now)
	l.setBucket(i, b)
	return ok, wait
}

// check decides whether the reader handles f (nil: a frame of a kind this
// edge does not know). It reports false when f was refused; the
// connection is then either answered with an Error frame or, after too
// many strikes, closed. f has just been read: c.lastRead is its time.
func (c *conn) check(f *corralv1.ClientFrame) bool {
	l := c.limits
	if l.closed {
		return false
	}
	r := ruleOf(f)
	now := c.lastRead.Load() // the frame was just read: no second clock read
	ok, wait := l.take(r.bucket, now)
	if ok {
		return true
	}
	c.e.metrics.refuse(r.reason)
	if now-l.windowStart > int64(strikeWindow) {
		l.windowStart, l.strikes = now, 0
	}
	l.strikes++
	if strikes := int(c.e.cfg.RateStrikes); strikes > 0 && l.strikes > strikes {
		l.closed = true
		c.e.metrics.refuse(refusedRateClose)
		c.closeWith(corralv1.Code_CODE_RATE_LIMITED,
			fmt.Sprintf("more than %d frames over the rate limit within %v", strikes, strikeWindow),
			uint32(c.e.cfg.RateCloseDelay.Milliseconds()), false)
		return false
	}
	// The Welcome comes first (client.proto): a frame read right behind
	// the hello is refused once the Welcome is queued, as the edge's
	// other answers wait for it (awaitWelcome).
	if !c.welcomed.Load() && !c.awaitWelcome() {
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
	if e.cfg.MaxPending > 0 && e.pending >= int(e.cfg.MaxPending) {
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

// A user's publish budget survives reconnects: a connection that ends
// leaves its message bucket in Edge.spent (userDone) and the user's next
// connection starts from it (userAdd) instead of a full burst; a loop of
// reconnects had lifted one user from 50 publishes/s to ~950/s. An entry
// lives until its bucket would be full again (burst/rate: 2 s by
// default), so spent holds only users who left in that time, and at most
// maxSpent of them (past it a leaving connection's bucket is not kept).
// On one edge only: the buckets are the edge's, as every rate limit.
const maxSpent = 1 << 16

// userAdd counts a connection of user, or refuses it (false) when the
// user has Config.MaxConnsPerUser on this edge already. It returns the
// message bucket a recent connection of user left (rate 0: none).
func (e *Edge) userAdd(user string) (bool, bucket) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.users[user]
	if e.cfg.MaxConnsPerUser > 0 && n >= int(e.cfg.MaxConnsPerUser) {
		return false, bucket{}
	}
	e.users[user] = n + 1
	b, ok := e.spent[user]
	if !ok {
		return true, bucket{}
	}
	delete(e.spent, user)
	if b.full(mono.Now()) {
		return true, bucket{}
	}
	return true, b
}

// userDone uncounts a connection of user that ends with message bucket
// b, and keeps b for the user's next connection unless it is full.
func (e *Edge) userDone(user string, b bucket) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := e.users[user]; n <= 1 {
		delete(e.users, user)
	} else {
		e.users[user] = n - 1
	}
	now := mono.Now()
	if b.rate <= 0 || b.full(now) {
		return
	}
	if old, ok := e.spent[user]; ok && old.tokensAt(now) <= b.tokensAt(now) {
		return // an earlier connection left less
	}
	if len(e.spent) >= maxSpent {
		for u, s := range e.spent {
			if s.full(now) {
				delete(e.spent, u)
			}
		}
		if len(e.spent) >= maxSpent {
			return
		}
	}
	e.spent[user] = b
}

// tokensAt is how many tokens b holds at now (it does not refill b).
func (b *bucket) tokensAt(now int64) float64 {
	if b.last == 0 {
		return b.tokens
	}
	return math.Min(b.burst, b.tokens+float64(now-b.last)/1e9*b.rate)
}

// full reports whether b holds its whole burst at now: a fresh bucket.
func (b *bucket) full(now int64) bool { return b.tokensAt(now) >= b.burst }

// refusePending answers an upgrade past Config.MaxPending: 503 with a
// jittered Retry-After, like admission control.
func (e *Edge) refusePending(w http.ResponseWriter) {
	e.metrics.refuse(refusedPending)
	refuseWith(w, time.Second, "too many connections are in their handshake; retry after the delay")
}
