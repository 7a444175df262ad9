package core

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/batch"
	"github.com/corral-rt/corral/internal/inflight"
)

// The replay read of a join (flow (b) step 7 in docs/ARCHITECTURE.md):
// readMissed reads what each joining room missed, (since, target], while
// the room keeps live messages for the session (room.beginJoin); the
// reads of joins from many connections that arrive together go to the
// history store as one batch (missedReads). room.goLive then sends the
// replay and turns the session live; a join whose read failed (the store
// failed, or too many reads were queued) gets Reset instead, as one whose
// history is gone: never a silent gap.

// readMissed reads, in one batch, the history each joining room needs:
// (since, target]. A page limit may need further reads for long absences.
func (c *Core) readMissed(ctx context.Context, reqs []*joinReq) {
	var todo []*joinReq
	for _, q := range reqs {
		if q.replay {
			q.readOK = true
			todo = append(todo, q)
		}
	}
	for len(todo) > 0 {
		qs := make([]history.Query, len(todo))
		for i, q := range todo {
			after := q.since
			if n := len(q.msgs); n > 0 {
				after = q.msgs[n-1].GetSeq()
			}
			qs[i] = history.Query{Room: q.name, After: after, Limit: int(min(q.target-after, history.MaxPage))}
		}
		done := c.metrics.storeOp("read_many")
		pages, err := c.readJoined(ctx, qs)
		done(err)
		if err != nil {
			for _, q := range todo {
				q.readOK = false // goLive turns this into a Reset
			}
			c.replayFailed(ctx, err, len(todo))
			return
		}
		next := todo[:0]
		for i, q := range todo {
			p := pages[i]
			if p.Epoch != q.roomEpoch || len(p.Messages) == 0 || p.Messages[0].GetSeq() != qs[i].After+1 {
				q.readOK = false // trimmed, expired, or another epoch
				continue
			}
			q.msgs = append(q.msgs, p.Messages...)
			if last := p.Messages[len(p.Messages)-1].GetSeq(); last < q.target && p.More {
				next = append(next, q)
			}
		}
		todo = next
	}
}

// missedReads batches the history reads of joins (readMissed) that
// arrive together, from many connections (internal/batch): while one
// batch is read, the reads asked meanwhile queue, and go to the store
// together in the next one, one ReadMany (one pipelined round trip); the
// reads of one room whose ranges fit one page merge into one query
// (readMerged). A rejoin or resume storm then costs about one read per
// room per round trip, not one per session; a lone join waits for
// nothing. Past maxMissedReads calls queued or in flight a call fails at
// once with errReplayBusy.
type missedReads struct {
	b     *batch.Batcher[[]history.Query, []history.Page]
	limit *inflight.Limit // the calls queued or in flight
}

// missedOp is one readMissed round of one connection's join: its
// queries, answered by one page each.
type missedOp = batch.Op[[]history.Query, []history.Page]

// Bounds of the batched replay reads (missedReads). A call is one
// connection's round of reads (one query per room it joins); a batch
// costs the store one query per room whose calls' ranges fit a page, and
// one per query otherwise.
//
// maxMissedBatch bounds the calls of one batch. A rejoin storm of 10,000
// joins at once over 100 rooms, one query each (BenchmarkReplayStorm on
// a private redis-server, 2 shared cores), cost with 1024: 11 ReadMany
// calls, ~1,000 room reads, 54 ms; with 256 (the grants store's batch):
// 41 calls, ~3,900 reads, 107 ms; with the whole queue in one batch (no
// bound, as before): 3.4 calls, ~230 reads, 34 ms. Where the calls share
// no room, a batch of 1024 is a pipeline of ~1,000 read.lua calls, each
// its own short script, so other clients' commands interleave with them
// (unlike the sessions store's one write.lua per batch of 128).
//
// maxMissedReads bounds the calls queued or in flight, as the grants
// store bounds its reads (1<<14): the whole 10,000-client storm fits,
// with room for the multi-page rounds of long absences, while the memory
// the queue holds stays bounded (each call: its queries, then its pages).
// Past it a join's replay fails as a failed store read does: the client
// gets Reset instead of the replay (counted as dropped, replay_busy).
const (
	maxMissedBatch = 1024
	maxMissedReads = 1 << 14
)

// errReplayBusy is readJoined's error past maxMissedReads. It wraps
// history.ErrBusy: the store errors' kind is busy.
var errReplayBusy = fmt.Errorf("core: too many replay reads queued: %w", history.ErrBusy)

// newMissedReads returns the batcher of the joins' replay reads: max
// calls a batch, limit calls queued or in flight.
func (c *Core) newMissedReads(max, limit int) missedReads {
	l := inflight.New(limit)
	return missedReads{
		b: batch.New(batch.Options[[]history.Query, []history.Page]{
			Max: max, Limit: l, Busy: errReplayBusy, Closed: errCoreClosed, Send: c.readBatch,
		}),
		limit: l,
	}
}

// readJoined is history.Store.ReadMany of a join's queries, batched with
// the other joins' (missedReads). The batch runs under the core's context
// and the store's own bounds; ctx bounds only this caller's wait. Past
// maxMissedReads it fails at once with errReplayBusy.
func (c *Core) readJoined(ctx context.Context, qs []history.Query) ([]history.Page, error) {
	return c.missed.b.Do(ctx, qs)
}

// readBatch is missedReads' Send: it reads the queries of ops (in arrival
// order) in one ReadMany, under the core's context, and gives each op the
// pages it asked for.
func (c *Core) readBatch(ops []*missedOp) {
	qss := make([][]history.Query, len(ops))
	for i, op := range ops {
		qss[i] = op.Arg
	}
	pages, err := c.readMerged(c.ctx, qss)
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
func (c *Core) readMerged(ctx context.Context, qss [][]history.Query) ([][]history.Page, error) {
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
	pages, err := c.hist.ReadMany(ctx, out)
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

// replayFailed counts (and logs) the n joins whose replay read failed
// with err: each gets Reset instead of its replay. Past the bound of
// missedReads it does not log: a storm would log once per join.
func (c *Core) replayFailed(ctx context.Context, err error, n int) {
	switch {
	case ctx.Err() != nil, c.ctx.Err() != nil:
		// The connection went away, or the core closes: no one to tell.
	case errors.Is(err, errReplayBusy):
		c.metrics.drop(droppedReplayBusy, n)
	default:
		c.metrics.drop(droppedReplayFailed, n)
		c.cfg.Logger.Warn("history read for join failed", "err", err)
	}
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
