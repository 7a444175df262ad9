package api

import (
	"cmp"
	"context"
	"slices"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// A sample of a room's signals (RoomService.Signals): the latest value of
// each key, as a member joining now would be sent them. Signals are never
// stored, so a room without members has none.

// maxSignalsPage bounds the keys Signals lists.
const maxSignalsPage = 200

// Signals samples a room's signals on this core.
func (s *Service) Signals(ctx context.Context, req *corralv1.SignalsRequest) (*corralv1.SignalsResponse, error) {
	if err := s.o.Door.ValidRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	limit := int(req.GetLimit())
	if limit <= 0 || limit > maxSignalsPage {
		limit = maxSignalsPage
	}
	// The first limit+1 keys: the one past the limit says there are more.
	sigs := s.core.Signals(req.GetRoom(), limit+1)
	return s.signalsPage(ctx, req, sigs, limit), nil
}

// signalsPage orders sigs (with the other cores' when every_core asks)
// by key, one per key, and keeps the first limit.
func (s *Service) signalsPage(ctx context.Context, req *corralv1.SignalsRequest, sigs []*corralv1.SignalEvent, limit int) *corralv1.SignalsResponse {
	res := &corralv1.SignalsResponse{}
	if req.GetEveryCore() {
		others, more, answered, missing := s.every.Signals(ctx, req)
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
