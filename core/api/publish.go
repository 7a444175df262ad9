package api

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connectproto"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/safetext"
)

// The API's publishes (Publish, Broadcast, Batch): each checked, pushed
// back while the queues toward the edges are backed up (overloaded), and
// handed to the core one message at a time.

// Publish appends a message to a room as an internal service and fans it
// out to the room's members.
func (s *Service) Publish(ctx context.Context, req *corralv1.PublishRequest) (*corralv1.PublishResponse, error) {
	if err := s.o.Door.ValidRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	if err := s.validPublish(req.GetRoom(), req.GetPayload(), req.GetIdempotencyKey(), req.GetSender()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	order, err := apiSender(req)
	if err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	if reason, retry, over := s.overloaded(); over {
		return nil, s.refuseOverloaded(reason, retry)
	}
	res, err := s.publish(ctx, req.GetRoom(), req.GetPayload(), req.GetIdempotencyKey(), req.GetSender(), order)
	if err != nil {
		return nil, s.rpcError(err)
	}
	return &corralv1.PublishResponse{Seq: res.Seq, Epoch: res.Epoch, Duplicate: res.Duplicate}, nil
}

// validPublish checks the parts of an API publish that are not the
// room's name: the payload is bounded by the room's class (max-payload),
// as a client's is, so that every message of a room fits the bound its
// members were promised.
func (s *Service) validPublish(room string, payload []byte, key, sender string) error {
	switch {
	case len(payload) > s.o.MaxPayload(room):
		return errors.New("core: payload exceeds the room's limit (its class's max-payload)")
	case len(key) > 256:
		return errors.New("core: idempotency key longer than 256 bytes")
	case len(sender) > 256:
		return errors.New("core: sender longer than 256 bytes")
	case sender != "":
		// Clients show the sender as a user id: the same rule.
		if err := safetext.CheckName("sender", sender, 256); err != nil {
			return fmt.Errorf("core: %w", err)
		}
	}
	return nil
}

// apiSender is an API publish's place in its stream's sequence
// (PublishRequest.seq and stream), the zero Sender for none. Its stream
// is apart from the client sessions' (prefix "api:"), as its dedupe keys
// are.
func apiSender(req *corralv1.PublishRequest) (history.Sender, error) {
	if req.GetSeq() == 0 {
		return history.Sender{}, nil
	}
	stream := req.GetStream()
	if stream == "" {
		stream = req.GetSender()
	}
	switch {
	case req.GetIdempotencyKey() == "":
		// Without a key a retry of a stored publish could not be told
		// from a sequence that starts again, and would be stored twice.
		return history.Sender{}, errors.New("core: a publish with seq needs an idempotency key")
	case stream == "":
		return history.Sender{}, errors.New("core: a publish with seq needs a stream (or a sender) naming its sequence")
	case len(stream) > 256:
		return history.Sender{}, errors.New("core: stream longer than 256 bytes")
	}
	return history.Sender{Stream: "api:" + stream, Seq: req.GetSeq()}, nil
}

// publish publishes one message of an internal service to a valid room,
// at its place in its stream's order when order is not zero.
func (s *Service) publish(ctx context.Context, room string, payload []byte, key, sender string, order history.Sender) (history.AppendResult, error) {
	msg := &corralv1.Message{
		Room:    room,
		Sender:  sender,
		Payload: payload,
		TimeMs:  time.Now().UnixMilli(),
	}
	dedupe := ""
	if key != "" {
		dedupe = "api:" + key
	}
	return s.core.Publish(ctx, msg, dedupe, order)
}

// Broadcast publishes one payload to many rooms, a bounded number at a
// time. Every room is checked first: one invalid room fails the call and
// nothing is published. After that, each room succeeds or fails on its
// own, and its result says which.
func (s *Service) Broadcast(ctx context.Context, req *corralv1.BroadcastRequest) (*corralv1.BroadcastResponse, error) {
	rooms := req.GetRooms()
	switch {
	case len(rooms) == 0:
		return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: no rooms"))
	case len(rooms) > s.cfg.MaxBroadcastRooms:
		return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: more than %d rooms", s.cfg.MaxBroadcastRooms))
	}
	seen := make(map[string]struct{}, len(rooms))
	for _, room := range rooms {
		if err := s.o.Door.ValidRoom(room); err != nil {
			return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("room %s: %w", safetext.Quote(room), err))
		}
		if err := s.validPublish(room, req.GetPayload(), req.GetIdempotencyKey(), req.GetSender()); err != nil {
			return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("room %s: %w", safetext.Quote(room), err))
		}
		if _, dup := seen[room]; dup {
			return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: room %s appears twice", safetext.Quote(room)))
		}
		seen[room] = struct{}{}
	}

	if reason, retry, over := s.overloaded(); over {
		return nil, s.refuseOverloaded(reason, retry)
	}

	results := make([]*corralv1.BroadcastResult, len(rooms))
	var next atomic.Int64
	// stopped is the refusal of the first room found backed up midway:
	// every room left gets it, to be retried with the same key (checked
	// and encoded once, not once per room left).
	var stopped atomic.Pointer[connect.Error]
	var wg sync.WaitGroup
	for range min(len(rooms), s.cfg.BroadcastConcurrency) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(rooms) {
					return
				}
				out := &corralv1.BroadcastResult{Room: rooms[i]}
				ce := stopped.Load()
				if ce == nil {
					if reason, retry, over := s.overloaded(); over {
						stopped.CompareAndSwap(nil, s.refuseOverloaded(reason, retry))
						ce = stopped.Load()
					}
				}
				if ce != nil {
					out.ErrorCode, out.ErrorMessage = ce.Code().String(), ce.Message()
					results[i] = out
					continue
				}
				res, err := s.publish(ctx, rooms[i], req.GetPayload(), req.GetIdempotencyKey(), req.GetSender(), history.Sender{})
				out.Seq, out.Epoch, out.Duplicate = res.Seq, res.Epoch, res.Duplicate
				if err != nil {
					ce := s.rpcError(err)
					out.ErrorCode, out.ErrorMessage = ce.Code().String(), ce.Message()
				}
				results[i] = out
			}
		})
	}
	wg.Wait()
	res := &corralv1.BroadcastResponse{Results: results}
	for _, r := range results {
		if r.GetErrorCode() != "" {
			res.Failed++
		}
	}
	return res, nil
}

// Batch publishes many messages, each to its own room. Every item is
// checked and published on its own; a room's items are published in item
// order, and once one of them fails the room's later items are not
// published (aborted), so that a retry cannot land out of order.
func (s *Service) Batch(ctx context.Context, req *corralv1.BatchRequest) (*corralv1.BatchResponse, error) {
	items := req.GetPublishes()
	switch {
	case len(items) == 0:
		return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: no publishes"))
	case len(items) > s.cfg.MaxBatch:
		return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: more than %d publishes in one batch", s.cfg.MaxBatch))
	}
	results := make([]*corralv1.BatchResult, len(items))
	// Each room's items, in item order; rooms in order of first item.
	byRoom := make(map[string]int)
	var groups [][]int
	for i, it := range items {
		results[i] = &corralv1.BatchResult{Room: it.GetRoom()}
		g, ok := byRoom[it.GetRoom()]
		if !ok {
			g = len(groups)
			byRoom[it.GetRoom()] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	publishRoom := func(idx []int) {
		failed := false
		for _, i := range idx {
			it, out := items[i], results[i]
			if failed {
				out.ErrorCode, out.ErrorMessage = connect.CodeAborted.String(), "an earlier item of this room failed: not published, to keep the room's order"
				continue
			}
			err := s.o.Door.ValidRoom(it.GetRoom())
			if err == nil {
				err = s.validPublish(it.GetRoom(), it.GetPayload(), it.GetIdempotencyKey(), it.GetSender())
			}
			var order history.Sender
			if err == nil {
				order, err = apiSender(it)
			}
			if err != nil {
				failed = true
				out.ErrorCode, out.ErrorMessage = connect.CodeInvalidArgument.String(), err.Error()
				continue
			}
			res, err := s.publish(ctx, it.GetRoom(), it.GetPayload(), it.GetIdempotencyKey(), it.GetSender(), order)
			if err != nil {
				failed = true
				ce := s.rpcError(err)
				out.ErrorCode, out.ErrorMessage = ce.Code().String(), ce.Message()
				continue
			}
			out.Seq, out.Epoch, out.Duplicate = res.Seq, res.Epoch, res.Duplicate
		}
	}
	if req.GetParallel() {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(len(groups), s.cfg.BroadcastConcurrency) {
			wg.Go(func() {
				for {
					g := int(next.Add(1) - 1)
					if g >= len(groups) {
						return
					}
					publishRoom(groups[g])
				}
			})
		}
		wg.Wait()
	} else {
		// One at a time in item order: a room's failure still aborts its
		// later items.
		failed := make(map[string]bool)
		for i, it := range items {
			if failed[it.GetRoom()] {
				results[i].ErrorCode, results[i].ErrorMessage = connect.CodeAborted.String(), "an earlier item of this room failed: not published, to keep the room's order"
				continue
			}
			publishRoom([]int{i})
			if results[i].GetErrorCode() != "" {
				failed[it.GetRoom()] = true
			}
		}
	}
	res := &corralv1.BatchResponse{Results: results}
	for _, r := range results {
		if r.GetErrorCode() != "" {
			res.Failed++
		}
	}
	return res, nil
}

// The retry hint of an overload refusal grows with the backlog: the
// bound's worth waits overloadRetryMin, each further bound's worth as
// much again, up to overloadRetryMax; jittered by up to half.
const (
	overloadRetryMin = 100 * time.Millisecond
	overloadRetryMax = 5 * time.Second
)

// overloaded reports why an internal API publish must be refused now
// (over false when it need not be) and the wait to hint. The signals are
// cheap and already there: every link's queue toward its edge, and the
// bytes its edge last reported in its connections' send queues
// (Config.OverloadQueueBytes). The reason names the larger of the two,
// or the link queue when one holds half of Config.LinkQueue frames (it
// fails, and its clients resume, at the whole).
func (s *Service) overloaded() (reason Reason, retry time.Duration, over bool) {
	limit := s.cfg.OverloadQueueBytes
	if limit < 0 {
		return 0, 0, false
	}
	coreBytes, edgeBytes, fullLink := s.core.Backlog()
	total := coreBytes + edgeBytes
	switch {
	case fullLink:
		reason, total = OverloadLink, max(total, 2*uint64(limit))
	case total <= uint64(limit):
		return 0, 0, false
	case coreBytes >= edgeBytes:
		reason = OverloadLink
	default:
		reason = OverloadEdge
	}
	retry = min(time.Duration(float64(overloadRetryMin)*float64(total)/float64(max(limit, 1))), overloadRetryMax)
	return reason, retry + rand.N(retry/2+1), true
}

// refuseOverloaded is the resource_exhausted answer of an overloaded
// core: counted by reason, with a corral.v1.Error detail whose code is
// CODE_OVERLOADED (retry) and whose retry_after_ms is the hint.
func (s *Service) refuseOverloaded(reason Reason, retry time.Duration) *connect.Error {
	s.o.Count(reason)
	const msg = "core: overloaded: members' queues are backed up; retry after the hinted delay"
	err := connect.NewError(connect.CodeResourceExhausted, msg)
	detail, derr := connectproto.NewErrorDetail(&corralv1.Error{
		Code: corralv1.Code_CODE_OVERLOADED, Message: msg, RetryAfterMs: uint32(retry.Milliseconds()),
	})
	if derr != nil {
		s.o.Logger.Error("api: overload detail not encoded", "err", derr)
		return err
	}
	return err.WithDetail(detail)
}
