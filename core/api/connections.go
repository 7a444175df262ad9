package api

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// maxConnectionsPage bounds the connections of one Connections page.
const maxConnectionsPage = 100

// Connections lists the connections of a user or a session on this core.
func (s *Service) Connections(ctx context.Context, req *corralv1.ConnectionsRequest) (*corralv1.ConnectionsResponse, error) {
	if len(req.GetUserId()) > maxTargetID || len(req.GetSessionId()) > maxTargetID {
		return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: user_id or session_id longer than %d bytes", maxTargetID))
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
	// One more than the page: it says there is a next one.
	found := s.core.Connections(req.GetUserId(), req.GetSessionId(), after, limit+1)
	res := &corralv1.ConnectionsResponse{Connections: found}
	if len(found) > limit {
		res.Connections = found[:limit]
		res.NextPageToken = encodePageToken(found[limit-1].GetSessionId())
	}
	if req.GetEveryCore() {
		return s.every.Connections(ctx, req, res, limit), nil
	}
	return res, nil
}
