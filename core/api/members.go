package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect/v2"
	"github.com/corral-rt/corral/core/everycore"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// Who is in a room (Members) and the end of a user's or a session's
// connections (Disconnect).

// Members lists the room's members attached to this core, from the room's
// live state: members whose join finished (Joined was sent); and the
// room's presence from the presence store (every core).
func (s *Service) Members(ctx context.Context, req *corralv1.MembersRequest) (*corralv1.MembersResponse, error) {
	if err := s.o.Door.ValidRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	if req.GetEveryCore() {
		res, err := s.every.Members(ctx, req)
		if errors.Is(err, everycore.ErrTooManyMembers) {
			return nil, tooManyMembers(s.cfg.MaxMembers)
		}
		if err != nil {
			return nil, s.boundary(err)
		}
		return res, nil
	}
	pres, err := s.core.Presence(ctx, req.GetRoom())
	if err != nil {
		return nil, s.rpcError(err)
	}
	limit := s.cfg.MaxMembers
	if len(pres) > limit {
		return nil, tooManyMembers(limit)
	}
	members, over := s.core.Members(req.GetRoom(), limit)
	if over {
		return nil, tooManyMembers(limit)
	}
	res := &corralv1.MembersResponse{Presence: pres, Members: members}
	for _, m := range members {
		slices.Sort(m.SessionIds)
		res.Connections += m.Connections
	}
	slices.SortFunc(res.Members, func(a, b *corralv1.Member) int { return strings.Compare(a.UserId, b.UserId) })
	return res, nil
}

// tooManyMembers refuses a Members call whose answer would pass max
// entries (Config.MaxMembers).
func tooManyMembers(limit int) *connect.Error {
	return connectErr(connect.CodeResourceExhausted, fmt.Errorf("core: the room has more than %d members, the most one Members call lists", limit))
}

// Bounds of a Disconnect (and of the other requests naming a user or a
// session): its reason, and the ids it names, in bytes.
const (
	maxReason   = 256
	maxTargetID = 256
)

// Disconnect closes the connections of a user or a session attached to
// this core, with the request's code, reason and (jittered) delay. For a
// STOP code the sessions are also deleted, so a resume is refused.
func (s *Service) Disconnect(ctx context.Context, req *corralv1.DisconnectRequest) (*corralv1.DisconnectResponse, error) {
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
	if req.GetUserId() == "" && req.GetSessionId() == "" {
		return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: user_id or session_id is required"))
	}
	// A STOP code ends the sessions: no grace window, the user leaves now.
	stop := protocol.AdviceOf(code) == protocol.AdviceStop
	res := &corralv1.DisconnectResponse{
		SessionIds: s.core.Kick(req.GetUserId(), req.GetSessionId(), code, req.GetReason(), req.GetDelayMs(), stop),
	}
	if stop {
		ids := res.SessionIds
		if id := req.GetSessionId(); id != "" && len(ids) == 0 {
			ids = []string{id} // not connected here: still end it
		}
		for _, id := range ids {
			if err := s.o.Sessions.Delete(ctx, id); err != nil {
				return nil, s.rpcError(err)
			}
		}
	}
	if req.GetEveryCore() {
		return s.every.Disconnect(ctx, req, res), nil
	}
	return res, nil
}
