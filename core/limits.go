package core

import (
	"context"
	"errors"
	"slices"
	"time"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/grants"
)

// Room grants of the core. A session may join a room when its token or a
// run-time grant allows it (package grants); it may publish and signal
// when, beside that, the room is not read-only for clients
// (Config.ReadOnlyRooms). door.go applies these rules to every join,
// resumed room, publish and signal. Run-time grants change
// through Grant and Revoke; a revoked join removes the user's sessions from
// the rooms it matches, on every core sharing the grants store. Every
// refusal is counted in corral_core_refused_total by reason.

// Reasons of corral_core_refused_total.
const (
	refusedJoin      = "forbidden_join"
	refusedPublish   = "forbidden_publish"
	refusedReadOnly  = "read_only"
	refusedRooms     = "rooms_per_conn"
	refusedTooLarge  = "payload_too_large"
	refusedRevoked   = "join_revoked"
	refusedGrantsErr = "grants_unavailable"
	refusedInvalid   = "invalid_argument"
	refusedNotJoined = "not_joined"
	// refusedBacklog: a connection's work queue overflowed (connwork.go).
	refusedBacklog = "conn_backlog"
	// A refreshed token does not grant a room the session is in.
	refusedRefreshGrant = "refresh_no_grant"
	// A refresh for another user than the session's (the edge checks
	// this first; counted here when an edge did not).
	refusedRefreshUser = "refresh_other_user"
)

// granted applies the token's and the run-time grants.
func (c *Core) granted(ctx context.Context, user string, id *corralv1.Identity, kind grants.Kind, room string) (bool, error) {
	token := id.GetJoin()
	if kind == grants.Publish {
		token = id.GetPublish()
	}
	g, err := c.grants.Get(ctx, user)
	if err != nil {
		c.metrics.refused.WithLabelValues(refusedGrantsErr).Inc()
		return false, err
	}
	return grants.Allows(g, kind, token, room), nil
}

// Grant adds run-time grants for a user.
func (c *Core) Grant(ctx context.Context, req *corralv1.GrantRequest) (*corralv1.GrantResponse, error) {
	if err := c.grants.Grant(ctx, req.GetUserId(), req.GetJoin(), req.GetPublish()); err != nil {
		return nil, c.grantsError(err)
	}
	return &corralv1.GrantResponse{}, nil
}

// Revoke takes grants away from a user and removes the user's sessions on
// this core from the rooms they may no longer be in; other cores do the
// same when the store announces the change.
func (c *Core) Revoke(ctx context.Context, req *corralv1.RevokeRequest) (*corralv1.RevokeResponse, error) {
	// Under enforceMu the announcement of this change, which grantsLoop
	// handles, cannot remove the memberships before this call counts them.
	c.enforceMu.Lock()
	defer c.enforceMu.Unlock()
	if err := c.grants.Revoke(ctx, req.GetUserId(), req.GetJoin(), req.GetPublish()); err != nil {
		return nil, c.grantsError(err)
	}
	ids, n := c.enforceGrants(ctx, req.GetUserId())
	return &corralv1.RevokeResponse{SessionIds: ids, RoomsLeft: uint32(n)}, nil
}

func (c *Core) grantsError(err error) *connect.Error {
	if errors.Is(err, grants.ErrInvalid) {
		return connectErr(connect.CodeInvalidArgument, err)
	}
	return c.rpcError(err)
}

// enforceGrants removes user's live sessions from every room their grants
// no longer allow: each gets Left with CODE_FORBIDDEN. It returns the
// sessions concerned and how many memberships ended.
func (c *Core) enforceGrants(ctx context.Context, user string) ([]string, int) {
	c.mu.Lock()
	var mine []*session
	for _, s := range c.live {
		if s.user == user {
			mine = append(mine, s)
		}
	}
	c.mu.Unlock()
	var ids []string
	left := 0
	for _, s := range mine {
		if n := c.enforceSession(ctx, s, refusedRevoked, "the join grant was revoked"); n > 0 {
			ids = append(ids, s.id)
			left += n
		}
	}
	slices.Sort(ids)
	return ids, left
}

// enforceSession removes s from every room its grants (its identity's and
// the run-time ones) no longer allow: each gets Left with CODE_FORBIDDEN
// and reason, counted under metric. It returns how many memberships
// ended. A grants store that cannot answer removes no one.
func (c *Core) enforceSession(ctx context.Context, s *session, metric, reason string) int {
	s.mu.Lock()
	names := make([]string, 0, len(s.rooms))
	for name := range s.rooms {
		names = append(names, name)
	}
	s.mu.Unlock()
	left := 0
	for _, name := range names {
		ok, err := c.granted(ctx, s.user, s.ident.Load(), grants.Join, name)
		if ok || err != nil {
			continue
		}
		s.mu.Lock()
		r := s.rooms[name]
		delete(s.rooms, name)
		s.mu.Unlock()
		if r == nil {
			continue
		}
		c.metrics.refused.WithLabelValues(metric).Inc()
		r.leave(s, &corralv1.Left{Room: name, Code: corralv1.Code_CODE_FORBIDDEN, Reason: reason})
		c.emitLeft(s, name)
		c.presenceLeave(s, name, true)
		c.releaseMember(r)
		if err := c.sess.DeleteRoom(ctx, s.id, name); err != nil {
			c.cfg.Logger.Warn("session store: delete room failed", "session", s.id, "room", name, "err", err)
		}
		left++
	}
	return left
}

// grantsLoop applies the changes the grants store announces (from this
// core or another) to this core's sessions, one user at a time. The
// store's callback only records the user, so it never blocks.
func (c *Core) grantsLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.grantsWake:
		}
		c.grantsMu.Lock()
		users := c.grantsDirty
		c.grantsDirty = make(map[string]struct{})
		c.grantsMu.Unlock()
		if _, any := users[grants.AnyUser]; any {
			// Announcements may have been missed: every live user.
			delete(users, grants.AnyUser)
			c.mu.Lock()
			for _, s := range c.live {
				users[s.user] = struct{}{}
			}
			c.mu.Unlock()
		}
		for user := range users {
			ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
			c.enforceMu.Lock()
			c.enforceGrants(ctx, user)
			c.enforceMu.Unlock()
			cancel()
		}
	}
}

// grantsChanged records that user's grants changed.
func (c *Core) grantsChanged(user string) {
	c.grantsMu.Lock()
	c.grantsDirty[user] = struct{}{}
	c.grantsMu.Unlock()
	select {
	case c.grantsWake <- struct{}{}:
	default:
	}
}
