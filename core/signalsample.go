package core

import (
	"cmp"
	"context"
	"slices"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"google.golang.org/protobuf/proto"
)

// A sample of a room's signals for the internal API (RoomService.Signals):
// the latest value of each key, read under the room's lock, as a member
// joining now would be sent them. Signals are never stored, so a room
// without members here has none.

// maxSignalsPage bounds the keys Signals lists.
const maxSignalsPage = 200

// Signals samples a room's signals on this core.
func (c *Core) Signals(ctx context.Context, req *corralv1.SignalsRequest) (*corralv1.SignalsResponse, error) {
	if err := c.door.ValidRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	limit := int(req.GetLimit())
	if limit <= 0 || limit > maxSignalsPage {
		limit = maxSignalsPage
	}
	var sigs []*corralv1.SignalEvent
	if r := c.rooms.get(req.GetRoom()); r != nil {
		// Under the room's lock: the keys, the first limit+1 of them
		// (the one past the limit says there are more), copied, so that
		// nothing read later races with the room.
		r.mu.Lock()
		for _, ev := range r.signals.latest {
			if !ev.GetClear() {
				sigs = append(sigs, ev)
			}
		}
		slices.SortFunc(sigs, func(a, b *corralv1.SignalEvent) int { return cmp.Compare(a.GetKey(), b.GetKey()) })
		if len(sigs) > limit+1 {
			sigs = sigs[:limit+1]
		}
		for i, ev := range sigs {
			sigs[i] = proto.CloneOf(ev)
		}
		r.mu.Unlock()
	}
	return c.signalsPage(ctx, req, sigs, limit), nil
}

// signalsPage orders sigs (with the other cores' when every_core asks)
// by key, one per key, and keeps the first limit.
func (c *Core) signalsPage(ctx context.Context, req *corralv1.SignalsRequest, sigs []*corralv1.SignalEvent, limit int) *corralv1.SignalsResponse {
	res := &corralv1.SignalsResponse{}
	if req.GetEveryCore() {
		others, more, answered, missing := c.every.Signals(ctx, req)
		sigs = append(sigs, others...)
		res.More, res.CoresAnswered, res.CoresMissing = more, answered+1, missing
	}
	slices.SortStableFunc(sigs, func(a, b *corralv1.SignalEvent) int { return cmp.Compare(a.GetKey(), b.GetKey()) })
	sigs = slices.CompactFunc(sigs, func(a, b *corralv1.SignalEvent) bool { return a.GetKey() == b.GetKey() })
	if len(sigs) > limit {
		sigs, res.More = sigs[:limit], true
	}
	res.Signals = sigs
	return res
}
