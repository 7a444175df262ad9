package door

import (
	"context"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/grants"
	"github.com/corral-rt/corral/hooks"
	"github.com/corral-rt/corral/roomclass"
)

// Client is what the door needs of a session: who it is, and a way to
// answer it. The core's session implements it.
type Client interface {
	UserID() string
	SessionID() string
	Identity() *corralv1.Identity
	SendErr(code corralv1.Code, msg, room, ref string)
	SendRetry(code corralv1.Code, msg, room, ref string, after time.Duration)
}

// Reason is why the door refused: the core counts each under its own
// label of corral_core_refused_total (core/reasons.go, docs/SECURITY.md).
type Reason uint8

const (
	ReadOnly          Reason = iota // read_only
	ForbiddenPublish                // forbidden_publish
	GrantsUnavailable               // grants_unavailable
	HookPublish                     // hook_publish
	HookUnavailable                 // hook_unavailable
	TooLarge                        // payload_too_large
	NumReasons
)

// RefuseReadOnly checks a client publish (signal false) or signal against
// the room's class: publish: none or signal: none refuse it. It answers a
// refusal itself and reports true.
func (d *Door) RefuseReadOnly(s Client, cl *roomclass.Class, name, ref string, signal bool) bool {
	if (signal && cl.Signal != roomclass.None) || (!signal && cl.Publish != roomclass.None) {
		return false
	}
	d.opt.Refused(ReadOnly)
	what := "publishing"
	if signal {
		what = "signals"
	}
	s.SendErr(corralv1.Code_CODE_FORBIDDEN, "the room is read-only for clients ("+what+")", name, ref)
	return true
}

// RefusePublish checks a client publish or signal for the grants. It
// answers a refusal itself and reports true.
func (d *Door) RefusePublish(ctx context.Context, s Client, name, ref string) bool {
	ok, err := d.Granted(ctx, s.UserID(), s.Identity(), grants.Publish, name)
	switch {
	case err != nil:
		s.SendErr(corralv1.Code_CODE_UNAVAILABLE, "grants store unavailable", name, ref)
		return true
	case !ok:
		d.opt.Refused(ForbiddenPublish)
		s.SendErr(corralv1.Code_CODE_FORBIDDEN, "the token does not grant publishing to this room", name, ref)
		return true
	}
	return false
}

// HookPublish asks the application's backend (the Publish hook) about a
// client's publish when its policy names the room. It answers a refusal
// itself and reports false; otherwise it returns the payload to store
// (the client's, or the backend's replacement). When the backend cannot
// answer, the room class's hooks.publish-policy applies: closed refuses
// the publish with CODE_UNAVAILABLE (retry with the same id); open lets
// the client's payload through unchecked (corral_hook_unchecked_total).
func (d *Door) HookPublish(ctx context.Context, s Client, cl *roomclass.Class, p *corralv1.Publish) ([]byte, bool) {
	return d.HookWrite(ctx, s, cl, p, corralv1.PublishKind_PUBLISH_KIND_UNSPECIFIED, "")
}

// HookWrite is [Door.HookPublish] for a write of kind (an append, a
// state set or delete: p's id is its ref or the message's id, its payload
// the data or value, none for a delete) on the state key key: the hook
// request says which, and a refusal is answered as a publish's.
func (d *Door) HookWrite(ctx context.Context, s Client, cl *roomclass.Class, p *corralv1.Publish, kind corralv1.PublishKind, key string) ([]byte, bool) {
	h := d.opt.Hooks
	if h == nil || !(cl.Hooks.Publish || h.Policy().For(p.GetRoom()).Publish) {
		return p.GetPayload(), true
	}
	log := d.opt.Logger
	res, err := h.Publish(ctx, &corralv1.HooksServicePublishRequest{
		UserId: s.UserID(), Room: p.GetRoom(), Id: p.GetId(), Payload: p.GetPayload(), SessionId: s.SessionID(),
		Kind: kind, Key: key,
	})
	switch {
	case err != nil && cl.Hooks.PublishPolicy == roomclass.Open:
		log.Warn("publish hook unavailable: the publish goes through unchecked (publish-policy open)", "session", s.SessionID(), "room", p.GetRoom(), "err", err)
		h.Unchecked(hooks.HookPublish, 1)
		return p.GetPayload(), true
	case err != nil:
		log.Warn("publish hook unavailable", "session", s.SessionID(), "room", p.GetRoom(), "err", err)
		d.opt.Refused(HookUnavailable)
		s.SendRetry(corralv1.Code_CODE_UNAVAILABLE, "the application could not check this publish: retry later",
			p.GetRoom(), p.GetId(), hooks.RetryAfter(err))
		return nil, false
	case res.GetRefusal() != nil:
		d.opt.Refused(HookPublish)
		code, reason := hooks.ClientRefusal(res.GetRefusal(), corralv1.Code_CODE_FORBIDDEN)
		s.SendErr(code, reason, p.GetRoom(), p.GetId())
		return nil, false
	case kind == corralv1.PublishKind_PUBLISH_KIND_DELETE_STATE:
		return nil, true // a delete has no payload to replace
	case res.GetReplace() && len(res.GetPayload()) > cl.MaxPayload:
		// Bounded like a client's payload: the backend's bug is not a
		// way around the limit.
		log.Warn("publish hook: replacement payload over the limit", "room", p.GetRoom(), "bytes", len(res.GetPayload()))
		d.opt.Refused(TooLarge)
		s.SendErr(corralv1.Code_CODE_TOO_LARGE, "the application's replacement payload exceeds the server's limit", p.GetRoom(), p.GetId())
		return nil, false
	case res.GetReplace():
		return res.GetPayload(), true
	}
	return p.GetPayload(), true
}
