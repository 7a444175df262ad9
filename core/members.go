package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// Members lists the room's members attached to this core, from the room's
// live state: members whose join finished (Joined was sent); and the
// room's presence from the presence store (every core).
func (c *Core) Members(ctx context.Context, req *corralv1.MembersRequest) (*corralv1.MembersResponse, error) {
	if err := c.validRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	snap, err := c.pres.store.List(ctx, req.GetRoom())
	if err != nil {
		return nil, connectErr(connect.CodeUnavailable, err)
	}
	limit := c.api.cfg.MaxMembers
	if len(snap.Members) > limit {
		return nil, tooManyMembers(limit)
	}
	c.mu.Lock()
	r := c.rooms[req.GetRoom()]
	c.mu.Unlock()
	res := &corralv1.MembersResponse{}
	for _, m := range snap.Members {
		res.Presence = append(res.Presence, presenceMember(m))
	}
	if r == nil {
		return res, nil
	}
	byUser := make(map[string]*corralv1.Member)
	r.mu.Lock()
	if len(r.members) > limit {
		r.mu.Unlock()
		return nil, tooManyMembers(limit)
	}
	for s := range r.members {
		m := byUser[s.user]
		if m == nil {
			m = &corralv1.Member{UserId: s.user}
			byUser[s.user] = m
		}
		m.SessionIds = append(m.SessionIds, s.id)
		m.Connections++
	}
	r.mu.Unlock()
	res.Members = make([]*corralv1.Member, 0, len(byUser))
	for _, m := range byUser {
		slices.Sort(m.SessionIds)
		res.Members = append(res.Members, m)
		res.Connections += m.Connections
	}
	slices.SortFunc(res.Members, func(a, b *corralv1.Member) int {
		switch {
		case a.UserId < b.UserId:
			return -1
		case a.UserId > b.UserId:
			return 1
		}
		return 0
	})
	return res, nil
}

// tooManyMembers refuses a Members call whose answer would pass max
// entries (core.APIConfig.MaxMembers).
func tooManyMembers(limit int) *connect.Error {
	return connectErr(connect.CodeResourceExhausted, fmt.Errorf("core: the room has more than %d members, the most one Members call lists", limit))
}

// maxReason bounds a Disconnect reason in bytes.
const maxReason = 256

// Disconnect closes the connections of a user or a session attached to
// this core, with the request's code, reason and (jittered) delay. For a
// STOP code the sessions are also deleted, so a resume is refused.
func (c *Core) Disconnect(ctx context.Context, req *corralv1.DisconnectRequest) (*corralv1.DisconnectResponse, error) {
	code := req.GetCode()
	if _, known := corralv1.Code_name[int32(code)]; !known || code == corralv1.Code_CODE_UNSPECIFIED {
		return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: code is required: one from the code table (docs/CODES.md)"))
	}
	if len(req.GetReason()) > maxReason {
		return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: reason longer than 256 bytes"))
	}
	if len(req.GetUserId()) > maxTargetID || len(req.GetSessionId()) > maxTargetID {
		return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: user_id or session_id longer than %d bytes", maxTargetID))
	}
	var targets []*session
	c.mu.Lock()
	switch t := req.GetTarget().(type) {
	case *corralv1.DisconnectRequest_SessionId:
		if s := c.live[t.SessionId]; s != nil {
			targets = append(targets, s)
		}
	case *corralv1.DisconnectRequest_UserId:
		for _, s := range c.live {
			if s.user == t.UserId {
				targets = append(targets, s)
			}
		}
	}
	c.mu.Unlock()
	if req.GetUserId() == "" && req.GetSessionId() == "" {
		return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: user_id or session_id is required"))
	}

	res := &corralv1.DisconnectResponse{}
	now := time.Now()
	for _, s := range targets {
		ep, ok := s.endpoint()
		if !ok {
			continue
		}
		c.api.recordKick(s, kick{code: code, reason: req.GetReason(), at: now})
		if protocol.AdviceOf(code) == protocol.AdviceStop {
			// The session ends: no grace window, the user leaves now.
			c.presenceDetach(s, true)
		}
		ep.link.close(ep.conn, code, req.GetReason(), jitter(req.GetDelayMs()))
		res.SessionIds = append(res.SessionIds, s.id)
	}
	slices.Sort(res.SessionIds)

	if protocol.AdviceOf(code) == protocol.AdviceStop {
		ids := res.SessionIds
		if id := req.GetSessionId(); id != "" && len(ids) == 0 {
			ids = []string{id} // not connected here: still end it
		}
		for _, id := range ids {
			if err := c.sess.Delete(ctx, id); err != nil {
				return nil, c.rpcError(err)
			}
		}
	}
	return res, nil
}

// jitter spreads a delay over [d, 1.5d].
func jitter(d uint32) uint32 {
	if d == 0 {
		return 0
	}
	return d + uint32(rand.Int64N(int64(d)/2+1))
}
