package core

import (
	"context"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/state"
)

// The writes of keyed state: a member's SetState and DeleteState frames
// (checked at the door as a publish is: the read-only class, the publish
// grant, the class's bounds and publish rate, the publish hook) and the
// internal API's (api_keyed.go). Each write goes to the store, which
// orders it, and then to the room's mirror here (keyed.go), which hands
// it to the members.

// clientSet answers a member's SetState: StateUpdated, or Error with ref.
func (k *stateRooms) clientSet(ctx context.Context, s *session, f *corralv1.SetState) {
	c := k.c
	name, ref := f.GetRoom(), f.GetRef()
	cl := c.class(name)
	r := writeDoor(ctx, c, s, cl, name, ref, "setting its state")
	switch {
	case r == nil:
		return
	case len(f.GetValue()) > cl.State.MaxValue:
		c.metrics.refuse(refusedTooLarge)
		s.SendErr(corralv1.Code_CODE_TOO_LARGE, "value exceeds the room's limit (its class's state.max-value)", name, ref)
		return
	case c.refuseRate(s, cl, name, ref):
		return
	case len(ref) > 128:
		c.metrics.refuse(refusedInvalid)
		s.SendErr(corralv1.Code_CODE_INVALID_ARGUMENT, "ref longer than 128 bytes", name, ref)
		return
	}
	// The publish hook sees a set as a publish whose id is the ref and
	// whose payload is the value; a replaced payload is the value stored.
	value, ok := c.door.HookWrite(ctx, s, cl, &corralv1.Publish{Room: name, Id: ref, Payload: f.GetValue()},
		corralv1.PublishKind_PUBLISH_KIND_SET_STATE, f.GetKey())
	if !ok {
		return
	}
	if len(value) > cl.State.MaxValue {
		c.metrics.refuse(refusedTooLarge)
		s.SendErr(corralv1.Code_CODE_TOO_LARGE, "the application's replacement value exceeds the room's limit", name, ref)
		return
	}
	res, err := k.set(ctx, r, name, state.Set{Key: f.GetKey(), Value: value, CAS: f.GetCas(), Version: f.GetVersion(),
		TTL: time.Duration(f.GetTtlMs()) * time.Millisecond})
	if err != nil {
		k.refuse(s, "set_state", err, name, ref)
		return
	}
	s.SendTo(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_StateUpdated{StateUpdated: &corralv1.StateUpdated{
		Room: name, Key: f.GetKey(), Ref: ref, Version: res.Version, Position: res.Position,
	}}})
}

// clientDelete answers a member's DeleteState: StateUpdated (deleted), or
// Error with ref. Deletes pass the door as sets do, the publish hook too
// (kind delete, no payload: a refusal is answered as a refused set's).
func (k *stateRooms) clientDelete(ctx context.Context, s *session, f *corralv1.DeleteState) {
	c := k.c
	name, ref := f.GetRoom(), f.GetRef()
	cl := c.class(name)
	r := writeDoor(ctx, c, s, cl, name, ref, "deleting its state")
	switch {
	case r == nil:
		return
	case c.refuseRate(s, cl, name, ref):
		return
	case len(ref) > 128:
		c.metrics.refuse(refusedInvalid)
		s.SendErr(corralv1.Code_CODE_INVALID_ARGUMENT, "ref longer than 128 bytes", name, ref)
		return
	}
	if _, ok := c.door.HookWrite(ctx, s, cl, &corralv1.Publish{Room: name, Id: ref},
		corralv1.PublishKind_PUBLISH_KIND_DELETE_STATE, f.GetKey()); !ok {
		return
	}
	res, err := k.delete(ctx, r, name, f.GetKey(), f.GetCas(), f.GetVersion())
	if err != nil {
		k.refuse(s, "delete_state", err, name, ref)
		return
	}
	s.SendTo(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_StateUpdated{StateUpdated: &corralv1.StateUpdated{
		Room: name, Key: f.GetKey(), Ref: ref, Position: res.Position, Deleted: true,
	}}})
}

// refuse answers a failed write: its named code, or "unavailable" for a
// store failure (logged, never shown).
func (k *stateRooms) refuse(s *session, what string, err error, room, ref string) {
	code, text, reason := stateError(err)
	if reason == numRefuseReasons {
		k.c.storeFailed(s, what, err, room, ref)
		return
	}
	k.c.metrics.refuse(reason)
	s.SendErr(code, text, room, ref)
}

// set writes one key of room (r: the room when held here, else nil) with
// the class's default TTL, and hands the change to the room's mirror.
func (k *stateRooms) set(ctx context.Context, r *room, name string, set state.Set) (state.Result, error) {
	if set.TTL <= 0 {
		set.TTL = k.c.class(name).State.TTL
	}
	done := k.c.metrics.storeOp("state_set")
	res, err := k.store.Set(ctx, name, set)
	done(err)
	if err != nil {
		return res, err
	}
	var expires time.Time
	if set.TTL > 0 {
		// The store's deadline, within the write's round trip: members
		// see it as expires_ms; the removal itself comes from the store.
		expires = time.Now().Add(set.TTL)
	}
	k.applyHere(r, name, res.Epoch, state.Change{Position: res.Position, Key: set.Key, Value: set.Value,
		Version: res.Version, Expires: expires})
	return res, nil
}

// delete removes one key of room and hands the change to the mirror.
func (k *stateRooms) delete(ctx context.Context, r *room, name, key string, cas bool, version uint64) (state.Result, error) {
	done := k.c.metrics.storeOp("state_delete")
	res, err := k.store.Delete(ctx, name, key, cas, version)
	done(err)
	if err != nil || !res.Existed {
		return res, err
	}
	k.applyHere(r, name, res.Epoch, state.Change{Position: res.Position, Key: key, Version: res.Version, Deleted: true})
	return res, nil
}

// applyHere hands this core's own write to the room's mirror, when the
// room is held here (the feed brings it to the other cores).
func (k *stateRooms) applyHere(r *room, name, epoch string, ch state.Change) {
	if r == nil {
		r = k.c.rooms.get(name)
	}
	if r != nil {
		r.Keyed().Apply(epoch, ch)
	}
}
