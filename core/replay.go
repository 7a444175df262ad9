package core

import (
	"context"
	"sort"
	"sync"

	"github.com/corral-rt/corral/history"
)

// The replay read of a join (flow (b) step 7 in docs/ARCHITECTURE.md):
// readMissed reads what each joining room missed, (since, target], while
// the room keeps live messages for the session (room.beginJoin); the
// reads of joins from many connections that arrive together go to the
// history store as one batch (missedReads). room.goLive then sends the
// replay and turns the session live.

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
			c.cfg.Logger.Warn("history read for join failed", "err", err)
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
// arrive together, from many connections: while one batch is read, the
// reads asked meanwhile queue, and go to the store together in the next
// one, one ReadMany (one pipelined round trip); the reads of one room
// whose ranges fit one page merge into one query. A rejoin or resume storm
// then costs about one read per room per round trip, not one per session;
// a lone join waits for nothing. The zero value is ready.
type missedReads struct {
	mu      sync.Mutex // guards the following fields
	queue   []*missedCall
	reading bool // a batch goroutine runs; it takes the queue when done
}

// missedCall is one readMissed round of one connection's join.
type missedCall struct {
	qs    []history.Query
	pages []history.Page
	err   error
	done  chan struct{}
}

// readJoined is history.Store.ReadMany of a join's queries, batched with
// the other joins' (missedReads). The batch runs under the core's context
// and the store's own bounds; ctx bounds only this caller's wait.
func (c *Core) readJoined(ctx context.Context, qs []history.Query) ([]history.Page, error) {
	call := &missedCall{qs: qs, done: make(chan struct{})}
	m := &c.missed
	m.mu.Lock()
	m.queue = append(m.queue, call)
	start := !m.reading
	m.reading = true
	m.mu.Unlock()
	if start {
		go c.readBatches()
	}
	select {
	case <-call.done:
		return call.pages, call.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readBatches reads what is queued in missedReads, batch after batch,
// until the queue is empty.
func (c *Core) readBatches() {
	m := &c.missed
	for {
		m.mu.Lock()
		batch := m.queue
		m.queue = nil
		if len(batch) == 0 {
			m.reading = false
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
		c.readBatch(c.ctx, batch)
		for _, call := range batch {
			close(call.done)
		}
	}
}

// readBatch reads the queries of calls in one ReadMany and gives each call
// the pages it asked for. Forward queries of one room whose ranges, taken
// together, fit one page are read as one query and each gets its slice
// of it (the same messages and state a read of its own would give, read
// after it was asked); other queries go as they are.
func (c *Core) readBatch(ctx context.Context, calls []*missedCall) {
	type span struct {
		q   history.Query // the merged query
		idx int           // its index in the ReadMany
	}
	end := func(q history.Query) uint64 { return q.After + uint64(pageLimit(q.Limit)) }
	spans := make(map[string]*span)
	var out []history.Query
	// First the union of each room's ranges...
	for _, call := range calls {
		for _, q := range call.qs {
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
	where := make([][]int, len(calls)) // per call and query: index in out
	for i, call := range calls {
		where[i] = make([]int, len(call.qs))
		for j, q := range call.qs {
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
	for i, call := range calls {
		if err != nil {
			call.err = err
			continue
		}
		call.pages = make([]history.Page, len(call.qs))
		for j, q := range call.qs {
			k := where[i][j]
			if out[k] == q {
				call.pages[j] = pages[k]
				continue
			}
			call.pages[j] = slicePage(pages[k], q.After, end(q))
		}
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
