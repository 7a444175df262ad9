package api

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/safetext"
	"google.golang.org/protobuf/proto"
)

// Server-side control: Subscribe and Unsubscribe act on a user's live
// connections on every core: this core's at once (Core.SubscribeHere,
// Core.UnsubscribeHere), the others' through the control bus
// (Options.Control), whose commands from the other cores come in here too
// (onControl).

// maxControlRooms bounds the rooms of a Subscribe or Unsubscribe.
const maxControlRooms = 128

// Subscribe joins a user's live connections to rooms, on every core.
func (s *Service) Subscribe(ctx context.Context, req *corralv1.SubscribeRequest) (*corralv1.SubscribeResponse, error) {
	if err := s.validControl(req.GetUserId(), req.GetRooms()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	since, err := sincePositions(req)
	if err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	others, err := s.announce(ctx, controlSubscribe, req)
	if err != nil {
		return nil, err
	}
	res := s.core.SubscribeHere(ctx, req, since, true)
	res.OtherCores = uint32(others)
	return res, nil
}

// Unsubscribe removes a user's live connections from rooms, on every core.
func (s *Service) Unsubscribe(ctx context.Context, req *corralv1.UnsubscribeRequest) (*corralv1.UnsubscribeResponse, error) {
	if err := s.validControl(req.GetUserId(), req.GetRooms()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	if len(req.GetReason()) > maxReason {
		return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: reason longer than 256 bytes"))
	}
	others, err := s.announce(ctx, controlUnsubscribe, req)
	if err != nil {
		return nil, err
	}
	res := s.core.UnsubscribeHere(ctx, req, unsubscribeReason(req), true)
	res.OtherCores = uint32(others)
	return res, nil
}

// unsubscribeReason is Left.reason of an Unsubscribe: the request's, or
// a fixed text.
func unsubscribeReason(req *corralv1.UnsubscribeRequest) string {
	if r := req.GetReason(); r != "" {
		return r
	}
	return "the application removed this connection from the room"
}

// validControl checks the target and rooms of a Subscribe or Unsubscribe.
func (s *Service) validControl(user string, rooms []string) error {
	switch {
	case user == "":
		return errors.New("core: user_id is required")
	case len(user) > maxTargetID:
		return fmt.Errorf("core: user_id longer than %d bytes", maxTargetID)
	case len(rooms) == 0:
		return errors.New("core: no rooms")
	case len(rooms) > maxControlRooms:
		return fmt.Errorf("core: more than %d rooms", maxControlRooms)
	}
	seen := make(map[string]struct{}, len(rooms))
	for _, room := range rooms {
		if err := s.o.Door.ValidRoom(room); err != nil {
			return fmt.Errorf("room %s: %w", safetext.Quote(room), err)
		}
		if _, dup := seen[room]; dup {
			return fmt.Errorf("core: room %s appears twice", safetext.Quote(room))
		}
		seen[room] = struct{}{}
	}
	return nil
}

// sincePositions returns a Subscribe's positions by room; each must name
// one of its rooms, once.
func sincePositions(req *corralv1.SubscribeRequest) (map[string]*corralv1.RoomPosition, error) {
	out := make(map[string]*corralv1.RoomPosition, len(req.GetSince()))
	for _, p := range req.GetSince() {
		if !slices.Contains(req.GetRooms(), p.GetRoom()) {
			return nil, fmt.Errorf("core: since names room %s, which is not in rooms", safetext.Quote(p.GetRoom()))
		}
		if _, dup := out[p.GetRoom()]; dup {
			return nil, fmt.Errorf("core: since names room %s twice", safetext.Quote(p.GetRoom()))
		}
		out[p.GetRoom()] = p
	}
	return out, nil
}

// Kinds of commands on the control bus: the first byte of a command, the
// rest is the request in protobuf.
const (
	controlSubscribe   byte = 's'
	controlUnsubscribe byte = 'u'
)

// announce sends a command to the other cores and returns how many got
// it. Without a bus, this core is the only one.
func (s *Service) announce(ctx context.Context, kind byte, req proto.Message) (int, error) {
	if s.o.Control == nil {
		return 0, nil
	}
	b, err := proto.Marshal(req)
	if err != nil {
		return 0, s.rpcError(fmt.Errorf("core: encode command: %w", err))
	}
	n, err := s.o.Control.Publish(ctx, append([]byte{kind}, b...))
	if err != nil {
		return 0, s.rpcError(err)
	}
	return n, nil
}

// decodeControl decodes a command of another core.
func decodeControl(cmd []byte) (proto.Message, error) {
	if len(cmd) == 0 {
		return nil, errors.New("core: empty command")
	}
	var m proto.Message
	switch cmd[0] {
	case controlSubscribe:
		m = new(corralv1.SubscribeRequest)
	case controlUnsubscribe:
		m = new(corralv1.UnsubscribeRequest)
	default:
		return nil, fmt.Errorf("core: unknown command kind %q", cmd[0])
	}
	if err := proto.Unmarshal(cmd[1:], m); err != nil {
		return nil, fmt.Errorf("core: decode command: %w", err)
	}
	return m, nil
}

// onControl applies another core's command to this core's connections,
// without waiting for them. It runs on the bus's goroutine.
func (s *Service) onControl(cmd []byte) {
	m, err := decodeControl(cmd)
	if err != nil {
		s.o.Count(BadControl)
		s.o.Logger.Warn("control bus: bad command", "err", err)
		return
	}
	// The command was checked by the core that published it; checked
	// again, so that a confused publisher cannot bypass the bounds.
	switch req := m.(type) {
	case *corralv1.SubscribeRequest:
		since, perr := sincePositions(req)
		if s.validControl(req.GetUserId(), req.GetRooms()) != nil || perr != nil {
			s.o.Count(BadControl)
			return
		}
		s.core.SubscribeHere(s.o.Closing, req, since, false)
	case *corralv1.UnsubscribeRequest:
		if s.validControl(req.GetUserId(), req.GetRooms()) != nil || len(req.GetReason()) > maxReason {
			s.o.Count(BadControl)
			return
		}
		s.core.UnsubscribeHere(s.o.Closing, req, unsubscribeReason(req), false)
	}
}
