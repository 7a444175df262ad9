package grants

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-rt/corral/internal/batch"
	"github.com/corral-rt/corral/internal/inflight"
	"github.com/corral-rt/corral/internal/pubsub"
	"github.com/corral-rt/corral/internal/retry"
	"github.com/redis/rueidis"
)

//go:embed cas.lua
var casLua string

var casScript = rueidis.NewLuaScript(casLua)

// RedisOptions configure a Redis store.
type RedisOptions struct {
	// Prefix prefixes every key and the channel. Default "corral".
	Prefix string
	// TTL bounds how long a cached user's grants are used without reading
	// Redis again: the delay of a change whose announcement this process
	// missed (its pub/sub connection was down). Default 5s.
	TTL time.Duration
}

// Redis is a Store shared by every process using the same Redis. Each
// user's grants are one JSON value; a change is a compare-and-set that
// also publishes the user's id on the prefix's grants channel. Reads are
// cached for RedisOptions.TTL and dropped when a change is announced.
type Redis struct {
	client  rueidis.Client
	prefix  string
	channel string
	ttl     time.Duration
	cancel  context.CancelFunc
	done    chan struct{}
	reads   *batch.Batcher[string, readReply]
	// now is the cache's clock: time.Now, another in tests of its TTL.
	now func() time.Time

	mu    sync.RWMutex // guards the following fields
	cache map[string]cached
	// nextSweep is when the expired entries are next dropped: the cache
	// holds the users checked within about two TTLs, not every user ever
	// checked (up to maxCached).
	nextSweep time.Time
	watch     func(string)
	// gen counts invalidations (an announced change, a change made here,
	// a resubscription). A read from Redis is cached only if none came
	// while it was in flight: else a revoked grant could be cached anew.
	gen uint64
}

type cached struct {
	g  *Grants
	at time.Time
}

// maxCached bounds the cache; past it, and once per TTL, expired entries
// are swept.
const maxCached = 1 << 16

// NewRedis returns a Redis store and starts listening for changes. Close
// stops it; it does not close client.
func NewRedis(client rueidis.Client, o RedisOptions) *Redis {
	if o.Prefix == "" {
		o.Prefix = "corral"
	}
	if o.TTL <= 0 {
		o.TTL = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Redis{
		client:  client,
		prefix:  o.Prefix,
		channel: o.Prefix + ":grants",
		ttl:     o.TTL,
		cancel:  cancel,
		done:    make(chan struct{}),
		cache:   make(map[string]cached),
		now:     time.Now,
	}
	r.reads = batch.New(batch.Options[string, readReply]{
		Max: maxReadBatch, Limit: inflight.New(maxReads), Busy: ErrBusy, Closed: errClosed, Send: r.sendReads,
	})
	go r.listen(ctx)
	return r
}

func (r *Redis) key(user string) string { return r.prefix + ":grants:{" + user + "}" }

// listen follows the channel until ctx ends, subscribing again after a
// failure. Each (re)subscription drops the whole cache, and every one
// after the first tells the watcher that any user's grants may have
// changed: announcements may have been missed while it was down (rueidis
// may also resubscribe by itself inside Receive; the confirmation hook
// sees those too).
func (r *Redis) listen(ctx context.Context) {
	defer close(r.done)
	b := retry.Backoff{Base: 50 * time.Millisecond, Cap: 5 * time.Second, ResetAfter: 10 * time.Second}
	var confirmed atomic.Int64
	rctx := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
		if s.Kind != "subscribe" {
			return
		}
		if confirmed.Add(1) > 1 {
			r.changed(AnyUser)
		}
	})
	for ctx.Err() == nil {
		r.mu.Lock()
		clear(r.cache)
		r.gen++
		r.mu.Unlock()
		b.Start()
		_ = pubsub.Receive(rctx, r.client, r.channel, func(m rueidis.PubSubMessage) {
			r.changed(m.Message)
		})
		b.Wait(ctx)
	}
}

func (r *Redis) changed(user string) {
	r.mu.Lock()
	if user == AnyUser {
		clear(r.cache)
	} else {
		delete(r.cache, user)
	}
	r.gen++
	watch := r.watch
	r.mu.Unlock()
	if watch != nil {
		watch(user)
	}
}

// Get returns user's grants (nil: none), from the cache when fresh.
func (r *Redis) Get(ctx context.Context, user string) (*Grants, error) {
	now := r.now()
	r.mu.RLock()
	e, ok := r.cache[user]
	gen := r.gen
	r.mu.RUnlock()
	if ok && now.Sub(e.at) < r.ttl {
		return e.g, nil
	}
	rep, err := r.reads.Do(ctx, user)
	if err != nil {
		return nil, err
	}
	g := rep.g
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen != gen {
		return g, nil // invalidated meanwhile: use once, do not cache
	}
	if len(r.cache) >= maxCached || !now.Before(r.nextSweep) {
		r.nextSweep = now.Add(r.ttl)
		for u, e := range r.cache {
			if now.Sub(e.at) >= r.ttl {
				delete(r.cache, u)
			}
		}
	}
	if len(r.cache) < maxCached {
		r.cache[user] = cached{g: g, at: now}
	}
	return g, nil
}

// Bounds of the batched reads of Get: users whose grants are read
// together go in one pipeline of up to maxReadBatch GETs (one per key, so
// that it works on a cluster too, where users hash to different slots);
// past maxReads reads waiting, Get fails at once with ErrBusy.
const (
	maxReadBatch = 256
	maxReads     = 1 << 14
)

// ErrBusy is returned (wrapped) by Get when too many reads wait for Redis.
var ErrBusy = errors.New("grants: busy")

var errClosed = errors.New("grants: closed")

// readReply is one user's grants as read by a batch.
type readReply struct{ g *Grants }

// sendReads reads a batch of users' grants in one pipeline; a user whose
// value cannot be read or decoded fails alone.
func (r *Redis) sendReads(ops []*batch.Op[string, readReply]) {
	ctx, cancel := batch.Context(ops)
	defer cancel()
	cmds := make(rueidis.Commands, len(ops))
	for i, op := range ops {
		cmds[i] = r.client.B().Get().Key(r.key(op.Arg)).Build()
	}
	for i, resp := range r.client.DoMulti(ctx, cmds...) {
		raw, err := resp.ToString()
		g, err := r.decode(ops[i].Arg, raw, err)
		ops[i].Finish(readReply{g}, err)
	}
}

// read returns user's grants and their stored form ("" when none).
func (r *Redis) read(ctx context.Context, user string) (*Grants, string, error) {
	raw, err := r.client.Do(ctx, r.client.B().Get().Key(r.key(user)).Build()).ToString()
	g, err := r.decode(user, raw, err)
	if err != nil || g == nil {
		return nil, "", err
	}
	return g, raw, nil
}

// decode turns a GET's answer into user's grants (nil: none).
func (r *Redis) decode(user, raw string, err error) (*Grants, error) {
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("grants: read: %w", err)
	}
	g := new(Grants)
	if err := json.Unmarshal([]byte(raw), g); err != nil {
		return nil, fmt.Errorf("grants: decode %s: %w", r.key(user), err)
	}
	return g, nil
}

// Grant adds grants for user and lifts the revocations they match.
func (r *Redis) Grant(ctx context.Context, user string, join, publish []string) error {
	return r.update(ctx, user, true, join, publish)
}

// Revoke removes the grants the patterns match and records revocations.
func (r *Redis) Revoke(ctx context.Context, user string, join, publish []string) error {
	return r.update(ctx, user, false, join, publish)
}

var errContended = errors.New("grants: too many concurrent changes of one user")

func (r *Redis) update(ctx context.Context, user string, grant bool, join, publish []string) error {
	if err := Validate(user, join, publish); err != nil {
		return err
	}
	for range 16 {
		old, raw, err := r.read(ctx, user)
		if err != nil {
			return err
		}
		g, err := apply(old, grant, join, publish)
		if err != nil {
			return err
		}
		next := ""
		if !g.Empty() {
			b, err := json.Marshal(g)
			if err != nil {
				return fmt.Errorf("grants: encode: %w", err)
			}
			next = string(b)
		}
		set, err := casScript.Exec(ctx, r.client, []string{r.key(user)}, []string{raw, next, r.channel, user}).AsInt64()
		if err != nil {
			return fmt.Errorf("grants: store: %w", err)
		}
		if set == 1 {
			// This process may hear its own announcement only later: drop
			// the cached copy now, so that its next check reads the change.
			r.mu.Lock()
			delete(r.cache, user)
			r.gen++
			r.mu.Unlock()
			return nil
		}
	}
	return errContended
}

// Watch sets the function called with a user whose grants changed.
func (r *Redis) Watch(fn func(user string)) {
	r.mu.Lock()
	r.watch = fn
	r.mu.Unlock()
}

// Close stops listening and waits for the reads in flight. Safe to call
// twice.
func (r *Redis) Close() error {
	r.reads.Close()
	r.cancel()
	<-r.done
	return nil
}
