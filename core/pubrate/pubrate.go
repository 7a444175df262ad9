// Package pubrate holds the publish budgets of room classes with a
// publish-rate: one token bucket per (user, room), kept by the core
// across the user's connections, so that reconnecting, resuming or
// opening a second connection (through any edge linked to this core)
// does not start a fresh burst.
//
// A bucket is forgotten once it would be full again (burst / rate after
// its last publish): a fresh bucket is the same budget, so forgetting it
// changes nothing. The table is bounded; past its bound an entry of the
// shard goes (any one; counted), which can only give its user a fresh
// burst early. Safe for concurrent use: the table is sharded, one lock
// each.
package pubrate

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

const shards = 64

// Table is the budgets of one core.
type Table struct {
	seed     maphash.Seed
	shardMax int
	shards   [shards]shard
	n        atomic.Int64
	evicted  atomic.Uint64
}

type key struct{ user, room string }

type shard struct {
	mu sync.Mutex // guards the following fields
	m  map[key]*rate.Limiter
	// sweepAt is the size at which an insert first forgets the buckets
	// full again: twice what was left by the last sweep, so the cost is
	// amortized and idle entries do not pile up.
	sweepAt int
}

// New returns a table that holds at most limit budgets (at least one per
// shard).
func New(limit int) *Table {
	t := &Table{seed: maphash.MakeSeed(), shardMax: max(limit/shards, 1)}
	for i := range t.shards {
		t.shards[i].m = make(map[key]*rate.Limiter)
		t.shards[i].sweepAt = minSweep
	}
	return t
}

const minSweep = 64

// Take takes a token of user's bucket in room, of perSec tokens a second
// and burst, at now. When there is none it reports false and the wait
// until one; the bucket is unchanged then. perSec < 0: unlimited.
func (t *Table) Take(user, room string, perSec float64, burst int, now time.Time) (time.Duration, bool) {
	if perSec < 0 {
		return 0, true
	}
	k := key{user, room}
	var h maphash.Hash
	h.SetSeed(t.seed)
	h.WriteString(user)
	h.WriteByte(0)
	h.WriteString(room)
	s := &t.shards[h.Sum64()%shards]
	s.mu.Lock()
	defer s.mu.Unlock()
	lim := s.m[k]
	if lim == nil || lim.Limit() != rate.Limit(perSec) || lim.Burst() != burst {
		// A new budget, or the class's rate changed (a reload).
		if lim == nil {
			t.makeRoomLocked(s, now)
			t.n.Add(1)
		}
		lim = rate.NewLimiter(rate.Limit(perSec), burst)
		s.m[k] = lim
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// makeRoomLocked makes room in s for one more budget: it forgets the
// buckets full again when s reached its sweep size, and evicts one when
// s is at its bound still. s.mu must be held.
func (t *Table) makeRoomLocked(s *shard, now time.Time) {
	if len(s.m) < s.sweepAt && len(s.m) < t.shardMax {
		return
	}
	for k, lim := range s.m {
		if lim.TokensAt(now) >= float64(lim.Burst()) {
			delete(s.m, k)
			t.n.Add(-1)
		}
	}
	s.sweepAt = max(2*len(s.m), minSweep)
	if len(s.m) < t.shardMax {
		return
	}
	for k := range s.m { // any one: a map's order is random
		delete(s.m, k)
		t.n.Add(-1)
		t.evicted.Add(1)
		break
	}
}

// Len is how many budgets the table holds.
func (t *Table) Len() int { return int(t.n.Load()) }

// Evicted is how many budgets were forgotten before they were full
// again, because the table was at its bound.
func (t *Table) Evicted() uint64 { return t.evicted.Load() }
