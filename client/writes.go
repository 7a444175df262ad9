package client

import (
	"context"
	"errors"
	"strconv"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// AppendOptions are the flags of an Append (docs/MESSAGES.md).
type AppendOptions struct {
	// Replace: data replaces the body instead of being added to it.
	Replace bool
	// Final: the message's last chunk; later appends are refused (4412).
	Final bool
	// Version is the version this chunk makes the message (1 for the
	// first), so that a retry is applied once; 0: unchecked.
	Version uint64
}

// Append adds data to the growing message id of room (opening it on the
// first append) and waits for the server's answer: a Published with the
// chunk's seq (Duplicate for a retried version), or a *ServerError:
// CODE_MESSAGE_FINAL after the final chunk, CODE_OUT_OF_ORDER for a
// version more than one ahead, CODE_TOO_LARGE, and CODE_UNIMPLEMENTED
// from a server that does not serve growing messages yet. A Publish or
// an Append with the room and id of one still waiting on the Conn is
// refused with ErrInFlight, unsent.
//
// The protocol does not yet name the answer to an append; this waits for
// a Published with the append's id (see docs/MESSAGES.md, SDKs).
func (c *Conn) Append(ctx context.Context, room, id string, data []byte, o AppendOptions) (*corralv1.Published, error) {
	if id == "" {
		return nil, errors.New("client: append needs an id")
	}
	f, err := c.request(ctx, c.pubWait, pubKey(room, id), &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Append{Append: &corralv1.Append{
		Room: room, Id: id, Data: data, Replace: o.Replace, Final: o.Final, Version: o.Version,
	}}})
	return f.GetPublished(), err
}

// StateOptions are the conditions of a SetState or DeleteState
// (docs/STATE.md).
type StateOptions struct {
	// CAS: apply only when the key's version is Version now (0: the key
	// must not exist); otherwise CODE_VERSION_CONFLICT.
	CAS     bool
	Version uint64
	// TTL removes the key this long after the set (0: never, or the
	// room class's default); ignored by DeleteState. Whole milliseconds.
	TTL time.Duration
}

// SetState sets key of room's state to value and waits for StateUpdated
// (the key's new version and the state's position), or a *ServerError:
// CODE_VERSION_CONFLICT for a failed compare, CODE_TOO_MANY_KEYS,
// CODE_TOO_LARGE, CODE_INVALID_ARGUMENT for a key, CODE_UNIMPLEMENTED from a
// server that does not serve state yet. Members, this one too, see the
// change as a StateChange.
func (c *Conn) SetState(ctx context.Context, room, key string, value []byte, o StateOptions) (*corralv1.StateUpdated, error) {
	ref := c.nextStateRef()
	f, err := c.request(ctx, c.stateWait, ref, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_SetState{SetState: &corralv1.SetState{
		Room: room, Key: key, Value: value, Cas: o.CAS, Version: o.Version, TtlMs: uint32(o.TTL.Milliseconds()), Ref: ref,
	}}})
	return f.GetStateUpdated(), err
}

// DeleteState removes key from room's state, as SetState.
func (c *Conn) DeleteState(ctx context.Context, room, key string, o StateOptions) (*corralv1.StateUpdated, error) {
	ref := c.nextStateRef()
	f, err := c.request(ctx, c.stateWait, ref, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_DeleteState{DeleteState: &corralv1.DeleteState{
		Room: room, Key: key, Cas: o.CAS, Version: o.Version, Ref: ref,
	}}})
	return f.GetStateUpdated(), err
}

// nextStateRef is a ref no Publish id of this Conn is likely to be: the
// server echoes it in StateUpdated and Error.ref.
func (c *Conn) nextStateRef() string {
	return "~state:" + strconv.FormatUint(c.stateRef.Add(1), 10)
}
