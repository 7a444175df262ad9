package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/history"
)

// The internal API's growing messages (docs/MESSAGES.md): Append and
// GetMessage check, hand each chunk or read to the core (Core.Grow,
// Core.Assembled) and map its errors.

// MaxGrowID bounds a growing message's id in bytes.
const MaxGrowID = 128

// ErrNoGrowing: the core's history store keeps no growing messages.
var ErrNoGrowing = errors.New("core: this server's history store keeps no growing messages")

// RefusedError is a chunk the room refused, as a client's would be (a
// final message, a version ahead, a body past the class's bound): Code
// says which, Text why.
type RefusedError struct {
	Code corralv1.Code
	Text string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("core: %s (%d %s)", e.Text, int32(e.Code), e.Code)
}

// growRPCs serves Append and GetMessage for s (a concept of its own, so
// that Service's methods stay few); its own methods shadow the
// unimplemented handler it embeds.
type growRPCs struct {
	corralv1connect.UnimplementedRoomServiceHandler
	s *Service
}

// Append applies each AppendRequest of the stream in order, as a
// client's Append frame (without the client's door: the API is trusted),
// and answers when the stream ends with the last chunk's position. A
// refused chunk ends the call with its error (the chunks before it
// stay): invalid_argument for a bad field or a message past the class's
// growing.max-bytes, failed_precondition for a final message (4412) or a
// version more than one ahead (4106), the message saying which.
func (a growRPCs) Append(ctx context.Context, stream corralv1connect.RoomServiceAppendServerStream) (*corralv1.AppendResponse, error) {
	s := a.s
	out := &corralv1.AppendResponse{}
	for {
		req, err := stream.Receive()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		name := req.GetRoom()
		if err := s.o.Door.ValidRoom(name); err != nil {
			return nil, connectErr(connect.CodeInvalidArgument, err)
		}
		if req.GetId() == "" || len(req.GetId()) > MaxGrowID {
			return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: a growing message needs an id of 1 to %d bytes", MaxGrowID))
		}
		if err := s.validPublish(name, nil, "", req.GetSender()); err != nil {
			return nil, connectErr(connect.CodeInvalidArgument, err)
		}
		if reason, retry, over := s.overloaded(); over {
			return nil, s.refuseOverloaded(reason, retry)
		}
		msg := &corralv1.Message{Room: name, Sender: req.GetSender(), TimeMs: time.Now().UnixMilli(), Id: req.GetId(),
			Chunk: &corralv1.MessageChunk{Data: req.GetData(), Replace: req.GetReplace(), Final: req.GetFinal(),
				Version: req.GetVersion()}}
		res, err := s.core.Grow(ctx, msg)
		if err != nil {
			return nil, a.growError(err)
		}
		out.Seq, out.Epoch, out.Final = res.Seq, res.Epoch, req.GetFinal()
		if res.Duplicate {
			out.Version = req.GetVersion()
			continue
		}
		out.Version = msg.GetChunk().GetVersion()
		out.Chunks++
	}
}

// GetMessage reads a growing message as assembled so far.
func (a growRPCs) GetMessage(ctx context.Context, req *corralv1.GetMessageRequest) (*corralv1.GetMessageResponse, error) {
	s := a.s
	if err := s.o.Door.ValidRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	if req.GetId() == "" || len(req.GetId()) > MaxGrowID {
		return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: a growing message needs an id of 1 to %d bytes", MaxGrowID))
	}
	m, st, err := s.core.Assembled(ctx, req.GetRoom(), req.GetId())
	if errors.Is(err, history.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound, "core: no such growing message in the room's current epoch")
	}
	if err != nil {
		return nil, a.growError(err)
	}
	return &corralv1.GetMessageResponse{Message: m, Epoch: st.Epoch}, nil
}

// growError maps a chunk's or a read's error at the RPC boundary.
func (a growRPCs) growError(err error) *connect.Error {
	if errors.Is(err, ErrNoGrowing) {
		return connect.NewError(connect.CodeUnimplemented, ErrNoGrowing.Error())
	}
	if re, ok := errors.AsType[*RefusedError](err); ok {
		if re.Code == corralv1.Code_CODE_TOO_LARGE {
			return connect.NewError(connect.CodeInvalidArgument, re.Error())
		}
		return connect.NewError(connect.CodeFailedPrecondition, re.Error())
	}
	return a.s.rpcError(err)
}
