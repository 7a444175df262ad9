package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/state"
)

// The keyed-state RPCs (docs/STATE.md): each validates, hands the write or
// the read to the core (Core.SetState, DeleteState, StateSnapshot) and
// maps its errors. A write by the API passes no client's door (no grant,
// no read-only class, no hook), as Publish does; the class's bounds apply.

// stateRPCs serves the keyed-state RPCs for s, which embeds it: a concept
// of its own, so that Service's methods stay few. Its own methods shadow
// the growRPCs it embeds.
type stateRPCs struct {
	growRPCs // Append, GetMessage (grow.go); embedded in it, the unimplemented rest
	s        *Service
}

// maxGetStateKeys bounds GetStateRequest.keys.
const maxGetStateKeys = 1000

// SetState sets one key of a room's keyed state.
func (a stateRPCs) SetState(ctx context.Context, req *corralv1.SetStateRequest) (*corralv1.SetStateResponse, error) {
	s := a.s
	if err := s.o.Door.ValidRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	res, err := s.core.SetState(ctx, req.GetRoom(), state.Set{Key: req.GetKey(), Value: req.GetValue(),
		CAS: req.GetCas(), Version: req.GetVersion(), TTL: time.Duration(req.GetTtlMs()) * time.Millisecond})
	if err != nil {
		return nil, a.stateError(err)
	}
	return &corralv1.SetStateResponse{Version: res.Version, Position: res.Position, Epoch: res.Epoch}, nil
}

// DeleteState removes one key of a room's keyed state.
func (a stateRPCs) DeleteState(ctx context.Context, req *corralv1.DeleteStateRequest) (*corralv1.DeleteStateResponse, error) {
	s := a.s
	if err := s.o.Door.ValidRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	res, err := s.core.DeleteState(ctx, req.GetRoom(), req.GetKey(), req.GetCas(), req.GetVersion())
	if err != nil {
		return nil, a.stateError(err)
	}
	return &corralv1.DeleteStateResponse{Position: res.Position, Epoch: res.Epoch, Existed: res.Existed}, nil
}

// GetState reads a room's keyed state, every key or the keys named.
func (a stateRPCs) GetState(ctx context.Context, req *corralv1.GetStateRequest) (*corralv1.GetStateResponse, error) {
	s := a.s
	if err := s.o.Door.ValidRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	if len(req.GetKeys()) > maxGetStateKeys {
		return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: at most %d keys", maxGetStateKeys))
	}
	snap, err := s.core.StateSnapshot(ctx, req.GetRoom())
	if err != nil {
		return nil, s.rpcError(err)
	}
	out := &corralv1.StateSnapshot{Room: req.GetRoom(), Position: snap.Position, Epoch: snap.Epoch}
	for _, e := range snap.Entries {
		if len(req.GetKeys()) > 0 && !slices.Contains(req.GetKeys(), e.Key) {
			continue
		}
		out.Entries = append(out.Entries, &corralv1.StateEntry{Key: e.Key, Value: e.Value, Version: e.Version, ExpiresMs: unixMs(e.Expires)})
	}
	return &corralv1.GetStateResponse{Snapshot: out}, nil
}

// unixMs is t in milliseconds since the Unix epoch, 0 for the zero time.
func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// stateError maps a state write's error at the RPC boundary: the caller's
// own mistakes with their text, the store's through rpcError.
func (a stateRPCs) stateError(err error) *connect.Error {
	switch {
	case errors.Is(err, state.ErrConflict):
		return connectErr(connect.CodeAborted, err)
	case errors.Is(err, state.ErrTooManyKeys):
		return connectErr(connect.CodeResourceExhausted, err)
	case errors.Is(err, state.ErrTooLarge), errors.Is(err, state.ErrInvalid):
		return connectErr(connect.CodeInvalidArgument, err)
	}
	return a.s.rpcError(err)
}
