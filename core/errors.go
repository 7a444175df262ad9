package core

import (
	"context"
	"errors"
	"io"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/safetext"
)

// This file is where the core's errors become text someone else reads:
// client Error frames (storeFailed) and the Connect errors of Link
// (connectErr; the internal API's are package core/api's). A store's error names addresses, keys and
// scripts: it goes to the log, and the client or the calling service gets
// a code and a fixed text.

// storeFailed tells s that what (a store operation on room: "publish",
// "presence"...) failed, with a code that means "retry" and a text that
// names no infrastructure; the log keeps the error.
func (c *Core) storeFailed(s *session, what string, err error, room, ref string) {
	c.cfg.Logger.Warn("store operation failed", "op", what, "session", s.SessionID(), "room", room, "err", err)
	if errors.Is(err, history.ErrNotReplicated) {
		// Stored on the master, maybe delivered: only its durability is
		// unconfirmed. A retry with the same id is deduplicated.
		s.SendErr(corralv1.Code_CODE_UNAVAILABLE, what+" not confirmed durable: it may have been stored; retry with the same id", room, ref)
		return
	}
	s.SendErr(corralv1.Code_CODE_UNAVAILABLE, what+" failed: store unavailable, retry later", room, ref)
}

// joinFailed tells s that q's room could not be joined because a store
// failed (its state read or its subscription). Like every room a resume
// names, a resumed room is answered with Left, here CODE_UNAVAILABLE, and
// the session store keeps it, so the next resume asks again; a Join is
// answered with an Error frame. A resumed room answered with an Error
// frame was neither joined nor left, and its client waited for ever.
func (c *Core) joinFailed(ctx context.Context, s *session, q *joinReq, err error) {
	if !q.Resumed {
		c.storeFailed(s, "join", err, q.Name, "")
		return
	}
	c.cfg.Logger.Warn("store operation failed", "op", "resume join", "session", s.SessionID(), "room", q.Name, "err", err)
	c.adm.refuseRetry(ctx, s, q, "join failed: store unavailable, resume again later", 0)
}

// isStoreTimeout reports whether err is a store call that ran past the
// store's own bound (internal/redisguard's ErrTimeout, a net.Error-like
// Timeout): a failed store, "retry later", unlike the caller's deadline.
func isStoreTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// maxRPCMessage bounds the text of a Connect error made from a core error.
const maxRPCMessage = 512

// connectErr wraps err, a core error meant for the caller (invalid
// argument, out of range...), in a Connect error with code, keeping err as
// the cause for errors.Is. Errors that quote the request do it with
// safetext.Quote; the text is bounded here.
func connectErr(code connect.Code, err error) *connect.Error {
	return connect.NewError(code, safetext.Truncate(err.Error(), maxRPCMessage)).WithCause(err)
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
