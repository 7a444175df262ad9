package api

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect/v2"
	"github.com/corral-rt/corral/core/eventlog"
	"github.com/corral-rt/corral/events"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
)

// Events streams the event log from a position, then live. See
// EventsRequest in proto/corral/v1/room_service.proto for the contract.
func (s *Service) Events(ctx context.Context, req *corralv1.EventsRequest, stream corralv1connect.RoomServiceEventsServerStream) error {
	log := s.o.Events
	if log == nil {
		return connect.NewError(connect.CodeUnimplemented, "core: this server keeps no event log")
	}
	f, err := eventlog.NewFilter(req)
	if err != nil {
		return connectErr(connect.CodeInvalidArgument, err)
	}
	// The stream ends when the core closes, too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.o.Closing, cancel)()

	pos := req.GetAfter()
	switch {
	case pos != "":
	case req.GetFromOldest():
		pos, err = log.Head(ctx)
	default:
		pos, err = log.Tail(ctx)
	}
	if err != nil {
		return s.eventsErr(ctx, err)
	}
	// The first read does not wait, so that a bad position fails the call
	// before any response; the first response, with no events, comes at
	// once and names the start.
	evs, err := log.Read(ctx, pos, events.MaxRead, 0)
	if err != nil {
		return s.eventsErr(ctx, err)
	}
	if err := stream.Send(&corralv1.EventsResponse{Position: pos}); err != nil {
		return err
	}
	heartbeat := s.cfg.EventsHeartbeat
	lastSend := time.Now()
	for {
		var out []*corralv1.Event
		if len(evs) > 0 {
			pos = evs[len(evs)-1].GetPosition()
			out = f.Keep(evs)
		}
		if len(out) > 0 || time.Since(lastSend) >= heartbeat {
			if err := stream.Send(&corralv1.EventsResponse{Events: out, Position: pos}); err != nil {
				return err
			}
			lastSend = time.Now()
		}
		wait := max(heartbeat-time.Since(lastSend), time.Millisecond)
		if evs, err = log.Read(ctx, pos, events.MaxRead, wait); err != nil {
			return s.eventsErr(ctx, err)
		}
	}
}

// eventsErr converts an event log error at the RPC boundary.
func (s *Service) eventsErr(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, events.ErrGap):
		return connectErr(connect.CodeOutOfRange, err)
	case errors.Is(err, events.ErrBadPosition):
		return connectErr(connect.CodeInvalidArgument, err)
	case s.o.Closing.Err() != nil:
		return connectErr(connect.CodeUnavailable, errClosed)
	case ctx.Err() != nil:
		return s.rpcError(ctx.Err())
	}
	return s.rpcError(err)
}
