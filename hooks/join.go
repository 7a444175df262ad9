package hooks

import (
	"context"
	"math"
	"sync"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// Join batching. Every Join of the process adds its pairs to the open
// batch; the batch goes to the backend JoinWindow after its first pair, or
// at once when it holds JoinMaxBatch pairs, as soon as fewer than
// JoinMaxCalls Join calls are in flight. So a resume's rooms are one
// call, and a storm of resumes becomes one call per window (or per
// JoinMaxBatch pairs), not one per session. Admissions are cached per
// (user, room) for the room's TTL (JoinOptions.CacheTTL: its room class's
// hooks.join-cache-ttl), refusals never: a refused user who was granted
// access meanwhile is not kept out for a TTL.
//
// Herds. The joiner keeps a rate of pairs per second (an exponentially
// decaying count, time constant rateTau). A batch opened while the rate
// would bring JoinHerdBatch pairs within JoinHerdWindow waits
// JoinHerdBatch/rate (at least JoinWindow) and goes at once when it holds
// JoinHerdBatch pairs: in a storm of resumes the calls are few and full,
// and a join waits at most JoinHerdWindow. At quieter rates a batch waits
// JoinWindow, as before.

// rateTau is the time constant of the pair rate: short, so that a herd
// is seen within a few batches, long enough that one resume's rooms
// (fewer than JoinHerdBatch/JoinHerdWindow*rateTau, 16 by default) are
// not a herd.
const rateTau = 20 * time.Millisecond

// joiner coalesces Join calls and caches their results.
type joiner struct {
	c     *Client
	slots chan struct{} // a token per Join call in flight

	mu     sync.Mutex // guards the following fields
	open   *joinBatch
	cache  map[joinKey]cached
	rate   float64 // pairs per second at rateAt, decaying with rateTau
	rateAt time.Time
}

type joinKey struct{ user, room string }

// cached is an admission: it is good until at plus the room's TTL when
// looked up (a reload may shorten it) and at most until (the TTL when it
// was stored, for eviction).
type cached struct {
	res       *corralv1.JoinResult
	at, until time.Time
}

// joinBatch is one backend call's pairs; done closes when results or err
// are set.
type joinBatch struct {
	pairs   []*corralv1.JoinPair
	ttls    []time.Duration // each pair's cache TTL
	done    chan struct{}
	results []*corralv1.JoinResult
	err     error
	sent    bool // guarded by joiner.mu
	max     int  // pairs that send it at once
}

func newJoiner(c *Client) *joiner {
	return &joiner{c: c, slots: make(chan struct{}, c.cfg.JoinMaxCalls), cache: make(map[joinKey]cached)}
}

// JoinOptions tune one Join. A nil *JoinOptions means defaults.
type JoinOptions struct {
	// CacheTTL returns how long an admission to room is cached (0: not
	// cached). Nil: Config.JoinCacheTTL for every room.
	CacheTTL func(room string) time.Duration
}

// Join decides pairs: one result per pair, in order. The pairs share
// backend calls with every other Join within the window; those cached
// (admitted within their TTL) are answered without a call. An error
// wraps [ErrUnavailable] (the backend could not answer) or is ctx's.
func (c *Client) Join(ctx context.Context, pairs []*corralv1.JoinPair, opts *JoinOptions) ([]*corralv1.JoinResult, error) {
	ttls := make([]time.Duration, len(pairs))
	for i, p := range pairs {
		if opts != nil && opts.CacheTTL != nil {
			ttls[i] = opts.CacheTTL(p.GetRoom())
		} else {
			ttls[i] = c.cfg.JoinCacheTTL
		}
	}
	return c.joins.join(ctx, pairs, ttls)
}

// segment is the part of a caller's pairs that went into one batch.
type segment struct {
	b    *joinBatch
	from int // index in the batch
	at   []int
}

func (j *joiner) join(ctx context.Context, pairs []*corralv1.JoinPair, ttls []time.Duration) ([]*corralv1.JoinResult, error) {
	out := make([]*corralv1.JoinResult, len(pairs))
	now := time.Now()
	var segs []segment
	j.mu.Lock()
	j.decayLocked(now)
	for i, p := range pairs {
		if ttl := ttls[i]; ttl > 0 {
			if e, ok := j.cache[joinKey{p.GetUserId(), p.GetRoom()}]; ok && now.Before(e.until) && now.Before(e.at.Add(ttl)) {
				out[i] = e.res
				j.c.metrics.cache.WithLabelValues("hit").Inc()
				continue
			}
			j.c.metrics.cache.WithLabelValues("miss").Inc()
		}
		j.rate += 1 / rateTau.Seconds()
		if j.open == nil {
			j.startLocked()
		}
		b := j.open
		if n := len(segs); n == 0 || segs[n-1].b != b {
			segs = append(segs, segment{b: b, from: len(b.pairs)})
		}
		segs[len(segs)-1].at = append(segs[len(segs)-1].at, i)
		b.pairs = append(b.pairs, p)
		b.ttls = append(b.ttls, ttls[i])
		if len(b.pairs) >= b.max {
			j.open = nil // full: the next pairs open another batch
			j.c.wg.Add(1)
			go func() {
				defer j.c.wg.Done()
				j.send(b)
			}()
		}
	}
	j.mu.Unlock()
	for _, s := range segs {
		select {
		case <-s.b.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if s.b.err != nil {
			return nil, s.b.err
		}
		for k, i := range s.at {
			out[i] = s.b.results[s.from+k]
		}
	}
	return out, nil
}

// decayLocked brings the pair rate to now. Lock must be held.
func (j *joiner) decayLocked(now time.Time) {
	if !j.rateAt.IsZero() {
		j.rate *= math.Exp(-now.Sub(j.rateAt).Seconds() / rateTau.Seconds())
	}
	j.rateAt = now
}

// windowLocked is how long a batch opened now waits, and the pairs that
// send it at once. Lock must be held.
func (j *joiner) windowLocked() (time.Duration, int) {
	cfg := &j.c.cfg
	if cfg.JoinHerdWindow <= 0 || cfg.JoinWindow < 0 || j.rate <= 0 {
		return cfg.JoinWindow, cfg.JoinMaxBatch
	}
	fill := time.Duration(float64(cfg.JoinHerdBatch) / j.rate * float64(time.Second))
	if fill > time.Duration(cfg.JoinHerdWindow) {
		return cfg.JoinWindow, cfg.JoinMaxBatch // not a herd
	}
	return max(fill, cfg.JoinWindow), min(cfg.JoinHerdBatch, cfg.JoinMaxBatch)
}

// startLocked opens a batch and schedules its send. Lock must be held.
func (j *joiner) startLocked() {
	window, maxPairs := j.windowLocked()
	b := &joinBatch{done: make(chan struct{}), max: maxPairs}
	j.open = b
	j.c.wg.Add(1)
	if window < 0 {
		// No window: the batch goes as soon as a call slot is free
		// (callers meanwhile join it).
		go func() {
			defer j.c.wg.Done()
			j.send(b)
		}()
		return
	}
	time.AfterFunc(window, func() {
		defer j.c.wg.Done()
		j.send(b)
	})
}

// send sends b once a call slot is free (at most JoinMaxCalls Join calls
// are in flight), unless it was sent already. While b waits for a slot it
// stays open and takes more pairs: when the backend is slow, batches grow
// instead of calls piling up.
func (j *joiner) send(b *joinBatch) {
	select {
	case j.slots <- struct{}{}:
	case <-j.c.ctx.Done():
	}
	defer func() {
		if j.c.ctx.Err() == nil {
			<-j.slots
		}
	}()
	j.mu.Lock()
	if b.sent {
		j.mu.Unlock()
		return
	}
	b.sent = true
	if j.open == b {
		j.open = nil
	}
	j.mu.Unlock()
	j.call(b)
}

// call asks the backend about b's pairs and wakes its callers.
func (j *joiner) call(b *joinBatch) {
	defer close(b.done)
	j.c.metrics.batch.WithLabelValues(HookJoin).Observe(float64(len(b.pairs)))
	var res *corralv1.JoinResponse
	err := j.c.guards[HookJoin].do(j.c.ctx, func(ctx context.Context) (err error) {
		res, err = j.c.api.Join(ctx, &corralv1.JoinRequest{Pairs: b.pairs})
		if err == nil && len(res.GetResults()) != len(b.pairs) {
			return badResponse("Join answered a different number of results than pairs")
		}
		return err
	})
	if err != nil {
		b.err = err
		return
	}
	b.results = res.GetResults()
	for i, r := range b.results {
		if r.GetRefusal() == nil && checkInfo(r.GetInfo()) != nil {
			// One pair's bad answer refuses that pair, not the batch.
			j.c.metrics.errors.WithLabelValues(HookJoin, KindBadResponse).Inc()
			r = badInfoRefusal()
			b.results[i] = r
		}
		j.c.count(HookJoin, r.GetRefusal() == nil)
	}
	j.store(b)
}

// store caches b's admissions whose TTL is positive; refusals are not
// cached.
func (j *joiner) store(b *joinBatch) {
	now := time.Now()
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.cache)+len(b.pairs) > j.c.cfg.JoinCacheSize {
		j.evictLocked()
	}
	for i, p := range b.pairs {
		if b.ttls[i] <= 0 || b.results[i].GetRefusal() != nil {
			continue
		}
		if len(j.cache) >= j.c.cfg.JoinCacheSize {
			break
		}
		j.cache[joinKey{p.GetUserId(), p.GetRoom()}] = cached{res: b.results[i], at: now, until: now.Add(b.ttls[i])}
	}
}

// evictLocked drops expired entries, and every entry if none had
// expired (the cache is a bound on memory, not a promise). Lock must be
// held.
func (j *joiner) evictLocked() {
	now := time.Now()
	n := len(j.cache)
	for k, e := range j.cache {
		if !now.Before(e.until) {
			delete(j.cache, k)
		}
	}
	if len(j.cache) == n {
		clear(j.cache)
	}
}
