package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect/v2"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/history"
)

// The internal API's growing messages (docs/MESSAGES.md): thin RPCs that
// check, call the grower (grow.go) and map its errors. They are methods of
// growRPC, embedded in Core, so that Core's own methods do not grow.

// rpcDefaults answers the RoomService methods Core does not implement
// (unimplemented). It is embedded one level deeper than growRPC, whose
// methods win.
type rpcDefaults struct {
	corralv1connect.UnimplementedRoomServiceHandler
}

// growRPC is RoomService.Append and GetMessage.
type growRPC struct {
	g grower
}

// Append applies each AppendRequest of the stream in order, as a
// client's Append frame (without the client's door: the API is trusted),
// and answers when the stream ends with the last chunk's position. A
// refused chunk ends the call with its error (the chunks before it
// stay): invalid_argument for a bad field or a message past the class's
// growing.max-bytes, failed_precondition for a final message (4412) or a
// version more than one ahead (4106), the message saying which.
func (a growRPC) Append(ctx context.Context, stream corralv1connect.RoomServiceAppendServerStream) (*corralv1.AppendResponse, error) {
	c := a.g.c
	if _, ok := c.hist.(history.Grower); !ok {
		return nil, connect.NewError(connect.CodeUnimplemented, "core: this server's history store keeps no growing messages")
	}
	out := &corralv1.AppendResponse{}
	var held *room
	defer func() {
		if held != nil {
			c.releaseRoom(held)
		}
	}()
	for {
		req, err := stream.Receive()
		if isEOF(err) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		name := req.GetRoom()
		if err := c.door.ValidRoom(name); err != nil {
			return nil, connectErr(connect.CodeInvalidArgument, err)
		}
		cl := c.class(name)
		switch {
		case req.GetId() == "" || len(req.GetId()) > maxGrowID:
			return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: a growing message needs an id of 1 to %d bytes", maxGrowID))
		case len(req.GetData()) > cl.Growing.MaxBytes:
			return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: the chunk exceeds the room's growing message size (its class's growing.max-bytes)"))
		}
		if err := c.validPublish(name, nil, "", req.GetSender()); err != nil {
			return nil, connectErr(connect.CodeInvalidArgument, err)
		}
		if reason, retry, over := c.overloaded(); over {
			return nil, c.refuseOverloaded(reason, retry)
		}
		if held == nil || held.name != name {
			if held != nil {
				c.releaseRoom(held)
				held = nil
			}
			if held, err = c.acquireRoom(ctx, name, false); err != nil {
				return nil, c.rpcError(err)
			}
		}
		msg := &corralv1.Message{Room: name, Sender: req.GetSender(), TimeMs: time.Now().UnixMilli(), Id: req.GetId(),
			Chunk: &corralv1.MessageChunk{Data: req.GetData(), Replace: req.GetReplace(), Final: req.GetFinal(),
				Version: req.GetVersion()}}
		res, err := a.g.grow(ctx, held, msg, cl)
		if err != nil {
			if code, text, ok := a.g.refusal(err); ok {
				cc := connect.CodeFailedPrecondition
				if code == corralv1.Code_CODE_TOO_LARGE {
					cc = connect.CodeInvalidArgument
				}
				return nil, connect.NewError(cc, fmt.Sprintf("core: %s (%d %s)", text, int32(code), code))
			}
			return nil, c.rpcError(err)
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
func (a growRPC) GetMessage(ctx context.Context, req *corralv1.GetMessageRequest) (*corralv1.GetMessageResponse, error) {
	c := a.g.c
	if err := c.door.ValidRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	if req.GetId() == "" || len(req.GetId()) > maxGrowID {
		return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: a growing message needs an id of 1 to %d bytes", maxGrowID))
	}
	gr, ok := c.hist.(history.Grower)
	if !ok {
		return nil, connect.NewError(connect.CodeUnimplemented, "core: this server's history store keeps no growing messages")
	}
	done := c.metrics.storeOp("assembled")
	m, st, err := gr.Assembled(ctx, req.GetRoom(), req.GetId())
	if errors.Is(err, history.ErrNotFound) {
		done(nil)
		return nil, connect.NewError(connect.CodeNotFound, "core: no such growing message in the room's current epoch")
	}
	done(err)
	if err != nil {
		return nil, c.rpcError(err)
	}
	return &corralv1.GetMessageResponse{Message: m, Epoch: st.Epoch}, nil
}
