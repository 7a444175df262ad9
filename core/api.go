package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/safetext"
)

// Publish appends a message to a room as an internal service and fans it
// out to the room's members.
func (c *Core) Publish(ctx context.Context, req *corralv1.PublishRequest) (*corralv1.PublishResponse, error) {
	if err := c.validRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	if err := c.validPublish(req.GetPayload(), req.GetIdempotencyKey(), req.GetSender()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	res, err := c.apiPublish(ctx, req.GetRoom(), req.GetPayload(), req.GetIdempotencyKey(), req.GetSender())
	if err != nil {
		return nil, c.rpcError(err)
	}
	return &corralv1.PublishResponse{Seq: res.Seq, Epoch: res.Epoch, Duplicate: res.Duplicate}, nil
}

// validPublish checks the parts of an API publish that are not the room.
func (c *Core) validPublish(payload []byte, key, sender string) error {
	switch {
	case len(payload) > c.cfg.MaxPayload:
		return errors.New("core: payload exceeds the server's limit")
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

// apiPublish publishes one message of an internal service to a valid room.
func (c *Core) apiPublish(ctx context.Context, room string, payload []byte, key, sender string) (history.AppendResult, error) {
	r, err := c.acquireRoom(ctx, room, false)
	if err != nil {
		return history.AppendResult{}, err
	}
	defer c.releaseRoom(r)
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
	return r.publish(ctx, msg, dedupe)
}

// Broadcast publishes one payload to many rooms, a bounded number at a
// time. Every room is checked first: one invalid room fails the call and
// nothing is published. After that, each room succeeds or fails on its
// own, and its result says which.
func (c *Core) Broadcast(ctx context.Context, req *corralv1.BroadcastRequest) (*corralv1.BroadcastResponse, error) {
	rooms := req.GetRooms()
	switch {
	case len(rooms) == 0:
		return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: no rooms"))
	case len(rooms) > c.api.cfg.MaxBroadcastRooms:
		return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: more than %d rooms", c.api.cfg.MaxBroadcastRooms))
	}
	if err := c.validPublish(req.GetPayload(), req.GetIdempotencyKey(), req.GetSender()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	seen := make(map[string]struct{}, len(rooms))
	for _, room := range rooms {
		if err := c.validRoom(room); err != nil {
			return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("room %s: %w", safetext.Quote(room), err))
		}
		if _, dup := seen[room]; dup {
			return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: room %s appears twice", safetext.Quote(room)))
		}
		seen[room] = struct{}{}
	}

	results := make([]*corralv1.BroadcastResult, len(rooms))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(rooms), c.api.cfg.BroadcastConcurrency) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(rooms) {
					return
				}
				res, err := c.apiPublish(ctx, rooms[i], req.GetPayload(), req.GetIdempotencyKey(), req.GetSender())
				out := &corralv1.BroadcastResult{Room: rooms[i], Seq: res.Seq, Epoch: res.Epoch, Duplicate: res.Duplicate}
				if err != nil {
					ce := c.rpcError(err)
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

// History reads a page of a room's retained messages.
func (c *Core) History(ctx context.Context, req *corralv1.HistoryRequest) (*corralv1.HistoryResponse, error) {
	if err := c.validRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	page, err := c.hist.Read(ctx, history.Query{
		Room:    req.GetRoom(),
		After:   req.GetAfterSeq(),
		Before:  req.GetBeforeSeq(),
		Reverse: req.GetReverse(),
		Limit:   int(req.GetLimit()),
	})
	if err != nil {
		return nil, c.rpcError(err)
	}
	return &corralv1.HistoryResponse{
		Messages: page.Messages,
		Epoch:    page.Epoch,
		LastSeq:  page.Last,
		FirstSeq: page.First,
		More:     page.More,
	}, nil
}
