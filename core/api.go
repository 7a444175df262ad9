package core

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/sessions"
)

// Publish appends a message to a room as an internal service and fans it
// out to the room's members.
func (c *Core) Publish(ctx context.Context, req *corralv1.PublishRequest) (*corralv1.PublishResponse, error) {
	if err := c.validRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	if len(req.GetPayload()) > c.cfg.MaxPayload {
		return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: payload exceeds the server's limit"))
	}
	r, err := c.acquireRoom(ctx, req.GetRoom(), false)
	if err != nil {
		return nil, rpcError(err)
	}
	defer c.releaseRoom(r)
	msg := &corralv1.Message{
		Room:    req.GetRoom(),
		Sender:  req.GetSender(),
		Payload: req.GetPayload(),
		TimeMs:  time.Now().UnixMilli(),
	}
	dedupe := ""
	if k := req.GetIdempotencyKey(); k != "" {
		dedupe = "api:" + k
	}
	res, err := r.publish(ctx, msg, dedupe)
	if err != nil {
		return nil, rpcError(err)
	}
	return &corralv1.PublishResponse{Seq: res.Seq, Epoch: res.Epoch, Duplicate: res.Duplicate}, nil
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
		return nil, rpcError(err)
	}
	return &corralv1.HistoryResponse{
		Messages: page.Messages,
		Epoch:    page.Epoch,
		LastSeq:  page.Last,
		FirstSeq: page.First,
		More:     page.More,
	}, nil
}

// rpcError converts a core or store error at the RPC boundary.
func rpcError(err error) error {
	switch {
	case errors.Is(err, history.ErrBusy), errors.Is(err, sessions.ErrBusy):
		return connectErr(connect.CodeResourceExhausted, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connectErr(connect.CodeDeadlineExceeded, err)
	case errors.Is(err, context.Canceled):
		return connectErr(connect.CodeCanceled, err)
	default:
		return connectErr(connect.CodeUnavailable, err)
	}
}

// connectErr wraps err in a Connect error with code, keeping err as the
// cause for errors.Is.
func connectErr(code connect.Code, err error) error {
	return connect.NewError(code, err.Error()).WithCause(err)
}
