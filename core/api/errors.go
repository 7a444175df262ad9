package api

import (
	"context"
	"errors"

	"connectrpc.com/connect/v2"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/safetext"
	"github.com/corral-rt/corral/sessions"
)

// This file is where the API's errors become text a calling service
// reads. A store's error names addresses, keys and scripts: it goes to the
// log, and the caller gets a code and a fixed text.

// errClosed: the core closed under a call.
var errClosed = errors.New("core: closed")

// rpcError converts a store error (or the end of the call's context) at the
// RPC boundary: the caller gets a code and a fixed text, the log the error.
func (s *Service) rpcError(err error) *connect.Error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, "core: deadline exceeded").WithCause(err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, "core: canceled").WithCause(err)
	}
	if errors.Is(err, history.ErrOutOfOrder) {
		s.o.Count(OutOfOrder)
		return connect.NewError(connect.CodeFailedPrecondition, "core: the publish before this one in its stream (seq - 1) is not stored: publish it first, then this one")
	}
	s.o.Logger.Warn("api: store operation failed", "err", err)
	if errors.Is(err, history.ErrNotReplicated) {
		return connect.NewError(connect.CodeUnavailable, "core: not confirmed durable: it may have been stored; retry with the same idempotency key").WithCause(err)
	}
	if errors.Is(err, history.ErrBusy) || errors.Is(err, sessions.ErrBusy) {
		return connect.NewError(connect.CodeResourceExhausted, "core: store busy, retry later").WithCause(err)
	}
	return connect.NewError(connect.CodeUnavailable, "core: store unavailable, retry later").WithCause(err)
}

// boundary passes on an error already made for the caller (a
// *connect.Error, as this Service's own handlers return) and turns any
// other into rpcError's code and fixed text: a store's or another core's
// error text never reaches the caller.
func (s *Service) boundary(err error) error {
	if _, ok := errors.AsType[*connect.Error](err); ok {
		return err
	}
	return s.rpcError(err)
}

// maxRPCMessage bounds the text of a Connect error made from a core error.
const maxRPCMessage = 512

// connectErr wraps err, an error meant for the caller (invalid argument,
// out of range...), in a Connect error with code, keeping err as the
// cause for errors.Is. Errors that quote the request do it with
// safetext.Quote; the text is bounded here.
func connectErr(code connect.Code, err error) *connect.Error {
	return connect.NewError(code, safetext.Truncate(err.Error(), maxRPCMessage)).WithCause(err)
}
