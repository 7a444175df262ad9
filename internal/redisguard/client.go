package redisguard

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Wrap returns client with every command of Do, DoMulti, DoCache and
// DoMultiCache bounded by the store timeout and its failures counted under
// store (a name such as "history"). Receive, Dedicated, Dedicate and the
// streams pass through unchanged: pub/sub connections live as long as
// their subscriptions, and rueidis's own PING ends a silent one. The
// result is used exactly as client; closing it closes client.
func (g *Guard) Wrap(client rueidis.Client, store string) rueidis.Client {
	// Every series from zero, so that a rate or an alert sees the first
	// failure.
	for _, kind := range []string{kindTimeout, kindConnection, kindOther} {
		g.errs.WithLabelValues(store, kind)
	}
	return &guarded{Client: client, g: g, store: store}
}

// guarded is a rueidis.Client whose commands have a deadline.
type guarded struct {
	rueidis.Client
	g     *Guard
	store string
}

func (c *guarded) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	// cmd may be recycled by Do: read it first.
	cctx, cancel := c.g.bound(ctx, cmd)
	defer cancel()
	return c.g.check(ctx, cctx, c.store, c.Client.Do(cctx, cmd))
}

func (c *guarded) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	if len(multi) == 0 {
		return nil
	}
	cctx, cancel := c.g.bound(ctx, multi...)
	defer cancel()
	resps := c.Client.DoMulti(cctx, multi...)
	for i := range resps {
		resps[i] = c.g.check(ctx, cctx, c.store, resps[i])
	}
	return resps
}

func (c *guarded) DoCache(ctx context.Context, cmd rueidis.Cacheable, ttl time.Duration) rueidis.RedisResult {
	cctx, cancel := context.WithTimeout(ctx, c.g.timeout)
	defer cancel()
	return c.g.check(ctx, cctx, c.store, c.Client.DoCache(cctx, cmd, ttl))
}

func (c *guarded) DoMultiCache(ctx context.Context, multi ...rueidis.CacheableTTL) []rueidis.RedisResult {
	cctx, cancel := context.WithTimeout(ctx, c.g.timeout)
	defer cancel()
	resps := c.Client.DoMultiCache(cctx, multi...)
	for i := range resps {
		resps[i] = c.g.check(ctx, cctx, c.store, resps[i])
	}
	return resps
}

// noBound is a CancelFunc with nothing to cancel.
func noBound() {}

// bound returns ctx with the deadline of cmds: the store timeout, plus the
// longest block time of a blocking command among them. A command that
// may block for ever (BLOCK 0) or whose block time is not known keeps the
// caller's context alone.
func (g *Guard) bound(ctx context.Context, cmds ...rueidis.Completed) (context.Context, context.CancelFunc) {
	d := g.timeout
	for _, cmd := range cmds {
		if !cmd.IsBlock() {
			continue
		}
		b, ok := blockTime(cmd.Commands())
		if !ok {
			return ctx, noBound
		}
		d = max(d, g.timeout+b)
	}
	return context.WithTimeout(ctx, d)
}

// blockTime is how long a blocking command may wait in Redis by its
// arguments, or false when it may wait for ever or is not known.
func blockTime(args []string) (time.Duration, bool) {
	if len(args) == 0 {
		return 0, false
	}
	ms := func(s string) (time.Duration, bool) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return 0, false
		}
		return time.Duration(n) * time.Millisecond, true
	}
	switch name := strings.ToUpper(args[0]); name {
	case "XREAD", "XREADGROUP":
		for i := 1; i+1 < len(args); i++ {
			if strings.EqualFold(args[i], "BLOCK") {
				return ms(args[i+1])
			}
		}
	case "WAIT", "WAITAOF":
		return ms(args[len(args)-1])
	case "BLPOP", "BRPOP", "BZPOPMIN", "BZPOPMAX", "BRPOPLPUSH", "BLMOVE":
		s, err := strconv.ParseFloat(args[len(args)-1], 64)
		if err != nil || s <= 0 {
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	return 0, false
}

// check counts a failed result of a command called with ctx and run with
// cctx (ctx and the store's deadline); a reply that did not come within
// the store's deadline becomes ErrTimeout.
func (g *Guard) check(ctx, cctx context.Context, store string, resp rueidis.RedisResult) rueidis.RedisResult {
	err := resp.Error()
	if err == nil || rueidis.IsRedisNil(err) {
		return resp
	}
	if re, ok := rueidis.IsRedisErr(err); ok {
		// NOSCRIPT is answered by loading the script; TRYAGAIN, MOVED
		// and ASK by trying again: the protocol, not a failure.
		if _, redirect := re.IsRedirect(); !redirect && !re.IsNoScript() && !re.IsTryAgain() {
			g.failed(store, kindOther)
		}
		return resp
	}
	if ctx.Err() != nil {
		// The caller gave up or its own deadline passed: its error.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			g.failed(store, kindTimeout)
		}
		return resp
	}
	if cctx.Err() != nil || isTimeout(err) {
		g.failed(store, kindTimeout)
		return rueidis.NewErrorResult(&timeoutError{after: g.timeout})
	}
	g.failed(store, kindConnection)
	return resp
}

// isTimeout reports whether err is a connection's read or write deadline
// (rueidis sets them from the context on a connection it uses alone).
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
