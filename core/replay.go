package core

import (
	"context"
	"errors"

	"github.com/corral-rt/corral/core/replay"
	croom "github.com/corral-rt/corral/core/room"
	"github.com/corral-rt/corral/history"
)

// The replay read of a join (flow (b) step 7 in docs/ARCHITECTURE.md):
// readMissed reads what each joining room missed, (since, target], while
// the room keeps live messages for the session (room.beginJoin); the
// reads of joins from many connections that arrive together go to the
// history store as one batch (package core/replay), a page at a time:
// session.Lifecycle.GoLive sends the page, and Core.replayTaken reads and sends the
// next once the edge took it, until the last turns the session live; a join whose read failed (the store
// failed, or too many reads were queued) gets Reset instead, as one whose
// history is gone: never a silent gap.
// replayPageBytes bounds the messages of one replay page (as croom.CatchupSize
// counts them; a page holds at least one message, whatever its size).
// The edge holds at most about two pages of a client that does not read
// (one in its queue, one on the wire), far below its replay bound
// (edge Config.replayBytes), and the core one: a replay of any length
// costs no more memory than that, however slowly it is read.
const replayPageBytes = 1 << 20

// replayPage bounds one page of a join's replay.
type replayPage struct{ messages, bytes int }

// readMissed reads, in one batch, the next page of history each joining
// room needs: (from, target], at most history.MaxPage messages; q.More
// says history holds more of it. The rest is read a page at a time as
// the edge takes each page (replayTaken), never whole.
func (c *Core) readMissed(ctx context.Context, reqs []*joinReq) {
	var todo []*joinReq
	for _, q := range reqs {
		q.More = false
		if q.Replay {
			q.ReadOK = true
			todo = append(todo, q)
		}
	}
	for len(todo) > 0 {
		qs := make([]history.Query, len(todo))
		for i, q := range todo {
			after := max(q.Since, q.From)
			if n := len(q.Msgs); n > 0 {
				after = q.Msgs[n-1].GetSeq()
			}
			qs[i] = history.Query{Room: q.Name, After: after, Limit: int(min(q.Target-after, uint64(c.page.limit(q)-len(q.Msgs))))}
		}
		done := c.metrics.storeOp("read_many")
		pages, err := c.missed.Read(ctx, qs)
		done(err)
		if err != nil {
			for _, q := range todo {
				q.ReadOK = false // goLive turns this into a Reset
			}
			c.replayFailed(ctx, err, len(todo))
			return
		}
		next := todo[:0]
		for i, q := range todo {
			p := pages[i]
			if p.Epoch != q.RoomEpoch || len(p.Messages) == 0 || p.Messages[0].GetSeq() != qs[i].After+1 {
				q.ReadOK = false // trimmed, expired, or another epoch
				continue
			}
			cut := false
			for _, m := range p.Messages {
				size := croom.CatchupSize(m)
				if len(q.Msgs) > 0 && q.Bytes+size > c.page.bytes {
					cut = true
					break
				}
				q.Msgs = append(q.Msgs, m)
				q.Bytes += size
			}
			last := q.Msgs[len(q.Msgs)-1].GetSeq()
			switch {
			case cut:
				// Read no more than fits next time: large messages
				// would make every read many times the page.
				q.More, q.Limit = true, len(q.Msgs)
			case last >= q.Target || !p.More:
			case len(q.Msgs) < c.page.limit(q):
				// A store's page may hold fewer: fill this one.
				next = append(next, q)
			default:
				// Full by count, under the bytes: the next may be longer.
				q.More, q.Limit = true, min(2*c.page.limit(q), c.page.messages)
			}
		}
		todo = next
	}
}

// limit is how many messages q's next page reads.
func (p replayPage) limit(q *joinReq) int {
	if q.Limit > 0 {
		return q.Limit
	}
	return p.messages
}

// replayTaken is the step of a paged replay, on the connection's worker
// (core/session Work): the edge took the join's last page of room
// (EdgeFrame.replay_taken), so the next page is read and sent; after the
// last one the member goes live with the live messages held for it
// meanwhile (catch-up). It never waits for the edge: a page not yet
// taken leaves the join with the session (Session.WaitPage) until the
// edge reports it.
func (c *Core) replayTaken(ctx context.Context, s *session, room string) {
	q := s.TakePage(room)
	if q == nil {
		return // left, rejoined or detached meanwhile
	}
	ep, ok := s.Endpoint()
	if !ok {
		return
	}
	q.Msgs, q.Bytes = nil, 0
	c.readMissed(ctx, []*joinReq{q})
	c.life.GoLive(ctx, s, ep, []*joinReq{q})
}

// newMissedReads returns the batcher of the joins' replay reads (package
// core/replay): max calls a batch, limit calls queued or in flight.
func (c *Core) newMissedReads(max, limit int) *replay.Reads {
	return replay.New(replay.Options{Store: c.hist, Max: max, Limit: limit, Ctx: c.ctx, Closed: errCoreClosed})
}

// replayFailed counts (and logs) the n joins whose replay read failed
// with err: each gets Reset instead of its replay. Past the bound of
// the batched reads it does not log: a storm would log once per join.
func (c *Core) replayFailed(ctx context.Context, err error, n int) {
	switch {
	case ctx.Err() != nil, c.ctx.Err() != nil:
		// The connection went away, or the core closes: no one to tell.
	case errors.Is(err, replay.ErrBusy):
		c.metrics.drop(droppedReplayBusy, n)
	default:
		c.metrics.drop(droppedReplayFailed, n)
		c.cfg.Logger.Warn("history read for join failed", "err", err)
	}
}
