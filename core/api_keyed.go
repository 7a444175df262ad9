package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/state"
)

// The internal API's keyed-state methods (docs/STATE.md): thin, each
// validates, calls the state concept (keyed_write.go) and maps its
// errors. A write by the API passes no client's door (no grant, no
// read-only class, no hook), as Publish does; the class's bounds apply.
//
// They are methods of keyedAPI, which Core embeds, so that Core's own
// methods do not grow (internal/archcheck methodDebt).

// keyedAPI serves RoomService's keyed-state methods for c; it embeds the
// unimplemented handler, whose methods Core's own shadow.
type keyedAPI struct {
	corralv1connect.UnimplementedRoomServiceHandler
	c *Core
}

// SetState sets one key of a room's keyed state.
func (a keyedAPI) SetState(ctx context.Context, req *corralv1.SetStateRequest) (*corralv1.SetStateResponse, error) {
	c := a.c
	if err := c.door.ValidRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	res, err := c.keyed.set(ctx, nil, req.GetRoom(), state.Set{Key: req.GetKey(), Value: req.GetValue(),
		CAS: req.GetCas(), Version: req.GetVersion(), TTL: time.Duration(req.GetTtlMs()) * time.Millisecond})
	if err != nil {
		return nil, a.stateRPCError(err)
	}
	return &corralv1.SetStateResponse{Version: res.Version, Position: res.Position, Epoch: res.Epoch}, nil
}

// DeleteState removes one key of a room's keyed state.
func (a keyedAPI) DeleteState(ctx context.Context, req *corralv1.DeleteStateRequest) (*corralv1.DeleteStateResponse, error) {
	c := a.c
	if err := c.door.ValidRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	res, err := c.keyed.delete(ctx, nil, req.GetRoom(), req.GetKey(), req.GetCas(), req.GetVersion())
	if err != nil {
		return nil, a.stateRPCError(err)
	}
	return &corralv1.DeleteStateResponse{Position: res.Position, Epoch: res.Epoch, Existed: res.Existed}, nil
}

// GetState reads a room's keyed state, every key or the keys named.
func (a keyedAPI) GetState(ctx context.Context, req *corralv1.GetStateRequest) (*corralv1.GetStateResponse, error) {
	c := a.c
	if err := c.door.ValidRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	if len(req.GetKeys()) > maxGetStateKeys {
		return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: at most %d keys", maxGetStateKeys))
	}
	snap, err := c.keyed.store.Snapshot(ctx, req.GetRoom())
	if err != nil {
		return nil, c.rpcError(err)
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

// maxGetStateKeys bounds GetStateRequest.keys.
const maxGetStateKeys = 1000

// stateRPCError maps a state write's error at the RPC boundary.
func (a keyedAPI) stateRPCError(err error) *connect.Error {
	switch {
	case errors.Is(err, state.ErrConflict):
		return connectErr(connect.CodeAborted, err)
	case errors.Is(err, state.ErrTooManyKeys):
		return connectErr(connect.CodeResourceExhausted, err)
	case errors.Is(err, state.ErrTooLarge), errors.Is(err, state.ErrInvalid):
		return connectErr(connect.CodeInvalidArgument, err)
	}
	return a.c.rpcError(err)
}
