package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// The connections this core holds, as the internal API describes them
// (RoomService.Connections): by user or by session, page by page, each
// with its edge, rooms and the frames waiting in its work queue. It reads
// the session table, then each session and its queue under their own
// locks, one at a time.

// Bounds of Connections.
const (
	maxConnectionsPage = 100
	// maxListedRooms bounds the rooms listed per connection: a connection
	// may be in more (--max-rooms-per-conn), the page stays bounded.
	maxListedRooms = 1000
)

// Connections lists the connections of a user or a session on this core.
func (c *Core) Connections(ctx context.Context, req *corralv1.ConnectionsRequest) (*corralv1.ConnectionsResponse, error) {
	if len(req.GetUserId()) > maxTargetID || len(req.GetSessionId()) > maxTargetID {
		return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: user_id or session_id longer than %d bytes", maxTargetID))
	}
	var found []*session
	switch t := req.GetTarget().(type) {
	case *corralv1.ConnectionsRequest_SessionId:
		if s := c.attached.Lookup(t.SessionId); s != nil {
			found = append(found, s)
		}
	case *corralv1.ConnectionsRequest_UserId:
		found = c.attached.OfUser(t.UserId)
	}
	if req.GetUserId() == "" && req.GetSessionId() == "" {
		return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: user_id or session_id is required"))
	}
	after, err := decodePageToken(req.GetPageToken())
	if err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	limit := int(req.GetLimit())
	if limit <= 0 || limit > maxConnectionsPage {
		limit = maxConnectionsPage
	}
	slices.SortFunc(found, func(a, b *session) int { return cmp.Compare(a.id, b.id) })
	res := &corralv1.ConnectionsResponse{}
	for _, s := range found {
		if s.id <= after {
			continue
		}
		info, ok := s.describe()
		if !ok {
			continue // detached meanwhile
		}
		if len(res.Connections) == limit {
			res.NextPageToken = encodePageToken(res.Connections[limit-1].GetSessionId())
			break
		}
		res.Connections = append(res.Connections, info)
	}
	if req.GetEveryCore() {
		return c.every.Connections(ctx, req, res, limit), nil
	}
	return res, nil
}

// describe returns what Connections lists of s; false once s is gone.
func (s *session) describe() (*corralv1.ConnectionInfo, bool) {
	s.mu.Lock()
	if s.gone {
		s.mu.Unlock()
		return nil, false
	}
	info := &corralv1.ConnectionInfo{SessionId: s.id, UserId: s.user, Protocol: s.protocol, AttachedMs: s.attached.UnixMilli()}
	if s.ep.link != nil {
		info.EdgeId = s.ep.link.edge
	}
	for name := range s.rooms {
		info.Rooms = append(info.Rooms, name)
	}
	s.mu.Unlock()
	slices.Sort(info.Rooms)
	if len(info.Rooms) > maxListedRooms {
		info.Rooms = info.Rooms[:maxListedRooms]
	}
	if s.work != nil {
		info.Queued = uint32(s.work.depth())
	}
	return info, true
}

// depth is how many frames and tasks wait in w's queue.
func (w *connWork) depth() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}
