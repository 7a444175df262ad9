// Package replay reads the history a join missed, batched with the
// reads of the other joins that arrive at the same moment (flow (b) step
// 7 in docs/ARCHITECTURE.md). The core's readMissed asks it one round of
// a connection's joins at a time ([Reads.Read]); while one batch is read,
// the reads asked meanwhile queue (internal/batch), and go to the store
// together in the next one, one ReadMany (one pipelined round trip); the
// reads of one room whose ranges fit one page merge into one query. A
// rejoin or resume storm then costs about one read per room per round
// trip, not one per session; a lone join waits for nothing. Past its
// bound of calls queued or in flight a call fails at once with [ErrBusy].
//
// # Concurrency
//
// A [Reads]' methods are safe for concurrent use; one goroutine of the
// batcher at a time reads a batch.
package replay

import (
	"context"
	"fmt"
	"sort"

	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/batch"
	"github.com/corral-rt/corral/internal/inflight"
)

// Bounds of the batched replay reads (Reads). A call is one
// connection's round of reads (one query per room it joins); a batch
// costs the store one query per room whose calls' ranges fit a page, and
// one per query otherwise.
//
// MaxBatch bounds the calls of one batch. A rejoin storm of 10,000
// joins at once over 100 rooms, one query each (BenchmarkReplayStorm on
// a private redis-server, 2 shared cores), cost with 1024: 11 ReadMany
// calls, ~1,000 room reads, 54 ms; with 256 (the grants store's batch):
// 41 calls, ~3,900 reads, 107 ms; with the whole queue in one batch (no
// bound, as before): 3.4 calls, ~230 reads, 34 ms. Where the calls share
// no room, a batch of 1024 is a pipeline of ~1,000 read.lua calls, each
// its own short script, so other clients' commands interleave with them
// (unlike the sessions store's one write.lua per batch of 128).
//
// MaxQueued bounds the calls queued or in flight, as the grants
// store bounds its reads (1<<14): the whole 10,000-client storm fits,
// with room for the multi-page rounds of long absences, while the memory
// the queue holds stays bounded (each call: its queries, then its pages).
// Past it a join's replay fails as a failed store read does: the client
// gets Reset instead of the replay (counted as dropped, replay_busy).
const (
	MaxBatch  = 1024
	MaxQueued = 1 << 14
)

// ErrBusy is Read's error past Options.Limit calls queued or in flight.
// It wraps history.ErrBusy: the store errors' kind is busy.
var ErrBusy = fmt.Errorf("core: too many replay reads queued: %w", history.ErrBusy)

// Store is what Reads needs of the history store.
type Store interface {
	ReadMany(ctx context.Context, qs []history.Query) ([]history.Page, error)
}

// Options are what Reads needs of the core.
type Options struct {
	Store Store
	// Max bounds the calls of one batch, Limit the calls queued or in
	// flight (MaxBatch and MaxQueued for the core's).
	Max, Limit int
	// Ctx is what every batch's read runs under (the core's: it ends at
	// Close).
	Ctx context.Context
	// Closed is Read's error after Close.
	Closed error
}

// Reads batches the history reads of joins.
type Reads struct {
	b     *batch.Batcher[[]history.Query, []history.Page]
	limit *inflight.Limit // the calls queued or in flight
	store Store
	ctx   context.Context
}

// op is one round of one connection's joins: its queries, answered by
// one page each.
type op = batch.Op[[]history.Query, []history.Page]

// New returns the batcher of the joins' replay reads. Close ends it.
func New(o Options) *Reads {
	r := &Reads{limit: inflight.New(o.Limit), store: o.Store, ctx: o.Ctx}
	r.b = batch.New(batch.Options[[]history.Query, []history.Page]{
		Max: o.Max, Limit: r.limit, Busy: ErrBusy, Closed: o.Closed, Send: r.readBatch,
	})
	return r
}

// Read is history.Store.ReadMany of a join's queries, batched with the
// other joins'. The batch runs under Options.Ctx and the store's own
// bounds; ctx bounds only this caller's wait. Past Options.Limit it fails
// at once with ErrBusy.
func (r *Reads) Read(ctx context.Context, qs []history.Query) ([]history.Page, error) {
	return r.b.Do(ctx, qs)
}

// InFlight is how many calls are queued or in flight.
func (r *Reads) InFlight() int64 { return r.limit.InFlight() }

// Close ends the batcher: its batches end with Options.Ctx; calls after
// it fail with Options.Closed.
func (r *Reads) Close() { r.b.Close() }

// readBatch is the batcher's Send: it reads the queries of ops (in arrival
// order) in one ReadMany, under Options.Ctx, and gives each op the
// pages it asked for.
func (r *Reads) readBatch(ops []*op) {
	qss := make([][]history.Query, len(ops))
	for i, op := range ops {
		qss[i] = op.Arg
	}
	pages, err := r.readMerged(r.ctx, qss)
	for i, op := range ops {
		if err != nil {
			op.Finish(nil, err)
			continue
		}
		op.Finish(pages[i], nil)
	}
}

// readMerged reads the queries of several calls, qss, in one ReadMany and
// returns each call's pages. Forward queries of one room whose ranges,
// taken together, fit one page are read as one query and each gets its
// slice of it (the same messages and state a read of its own would give,
// read after it was asked); other queries go as they are.
func (r *Reads) readMerged(ctx context.Context, qss [][]history.Query) ([][]history.Page, error) {
	type span struct {
		q   history.Query // the merged query
		idx int           // its index in the ReadMany
	}
	end := func(q history.Query) uint64 { return q.After + uint64(pageLimit(q.Limit)) }
	spans := make(map[string]*span)
	var out []history.Query
	// First the union of each room's ranges...
	for _, qs := range qss {
		for _, q := range qs {
			if !mergeable(q) {
				continue
			}
			sp := spans[q.Room]
			if sp == nil {
				spans[q.Room] = &span{q: q, idx: -1}
				continue
			}
			if sp.q.Limit < 0 {
				continue
			}
			lo, hi := min(sp.q.After, q.After), max(end(sp.q), end(q))
			if hi-lo <= history.MaxPage && sp.q.Peek == q.Peek {
				sp.q.After, sp.q.Limit = lo, int(hi-lo)
			} else {
				sp.q.Limit = -1 // too wide: this room's queries go as they are
			}
		}
	}
	// ...then one query per room that merged, and the others as asked.
	where := make([][]int, len(qss)) // per call and query: index in out
	for i, qs := range qss {
		where[i] = make([]int, len(qs))
		for j, q := range qs {
			sp := spans[q.Room]
			if !mergeable(q) || sp == nil || sp.q.Limit < 0 {
				where[i][j] = len(out)
				out = append(out, q)
				continue
			}
			if sp.idx < 0 {
				sp.idx = len(out)
				out = append(out, sp.q)
			}
			where[i][j] = sp.idx
		}
	}
	pages, err := r.store.ReadMany(ctx, out)
	if err != nil {
		return nil, err
	}
	res := make([][]history.Page, len(qss))
	for i, qs := range qss {
		res[i] = make([]history.Page, len(qs))
		for j, q := range qs {
			k := where[i][j]
			if out[k] == q {
				res[i][j] = pages[k]
				continue
			}
			res[i][j] = slicePage(pages[k], q.After, end(q))
		}
	}
	return res, nil
}

// mergeable reports whether q may share a read with other queries of its
// room: a forward read with a range.
func mergeable(q history.Query) bool {
	return !q.Reverse && q.Before == 0 && q.Limit > 0 && q.Limit <= history.MaxPage
}

// pageLimit is a query's limit as the store applies it.
func pageLimit(limit int) int {
	if limit <= 0 || limit > history.MaxPage {
		return history.MaxPage
	}
	return limit
}

// slicePage is the page a forward read of (after, upto] would have got,
// cut from p, a forward page that covers that range.
func slicePage(p history.Page, after, upto uint64) history.Page {
	ms := p.Messages
	i := sort.Search(len(ms), func(i int) bool { return ms[i].GetSeq() > after })
	j := sort.Search(len(ms), func(j int) bool { return ms[j].GetSeq() > upto })
	return history.Page{
		State:    p.State,
		Messages: ms[i:j:j],
		More:     p.More || j < len(ms),
	}
}
