package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/roompattern"
)

// What the core holds, as the internal API describes it: Rooms lists the
// rooms with members here, page by page; Info names this core (its node
// id and build) and the edges linked to it; Connections and Signals are
// in their own files.

// Bounds of Rooms.
const (
	maxRoomsPage   = 1000
	maxRoomPattern = 256
)

// Rooms lists the rooms with members on this core, by name.
func (s *Service) Rooms(ctx context.Context, req *corralv1.RoomsRequest) (*corralv1.RoomsResponse, error) {
	pattern := req.GetPattern()
	if len(pattern) > maxRoomPattern {
		return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: pattern longer than %d bytes", maxRoomPattern))
	}
	if pattern != "" {
		if err := roompattern.Check(pattern); err != nil {
			return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: pattern: %w", err))
		}
	}
	after, err := decodePageToken(req.GetPageToken())
	if err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	limit := int(req.GetLimit())
	if limit <= 0 || limit > maxRoomsPage {
		limit = maxRoomsPage
	}
	keep := func(string) bool { return true }
	if pattern != "" {
		patterns := []string{pattern}
		keep = func(name string) bool { return roompattern.Match(patterns, name) }
	}
	// One more than the page: it says there is a next one.
	rooms := s.core.Rooms(after, keep, limit+1)
	res := &corralv1.RoomsResponse{Rooms: rooms}
	if len(rooms) > limit {
		res.Rooms = rooms[:limit]
		res.NextPageToken = encodePageToken(rooms[limit-1].GetName())
	}
	if req.GetEveryCore() {
		return s.every.Rooms(ctx, req, res, limit), nil
	}
	return res, nil
}

// A page token is the last name of the previous page, opaque to callers.
func encodePageToken(name string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(name))
}

func decodePageToken(tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) == 0 || len(b) > 1024 {
		return "", errors.New("core: page_token is not one this server returned")
	}
	return string(b), nil
}

// Info describes this core and the edges linked to it.
func (s *Service) Info(ctx context.Context, req *corralv1.InfoRequest) (*corralv1.InfoResponse, error) {
	res := &corralv1.InfoResponse{Nodes: s.core.Nodes()}
	if req.GetEveryCore() {
		return s.every.Info(ctx, res), nil
	}
	return res, nil
}
