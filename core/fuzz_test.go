package core_test

import (
	"context"
	"github.com/corral-rt/corral/config"
	"io"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connectinprocess"
	"github.com/corral-rt/corral/core"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"google.golang.org/protobuf/proto"
)

// FuzzLinkRequest sends a LinkRequest decoded from arbitrary bytes to a
// core over a real Link stream, as a confused or hostile edge would, then
// checks that the core still serves an honest publish. Whatever an edge
// sends must not crash the core nor stop it serving others.
func FuzzLinkRequest(f *testing.F) {
	for _, seed := range linkRequestSeeds() {
		b, err := proto.Marshal(seed)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		var req linkv1.LinkRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		c := core.New(core.Config{Logger: logger, Core: config.Core{SignalTick: time.Millisecond}})
		defer c.Close()
		srv := connect.NewServer()
		linkv1connect.RegisterLinkServiceHandler(srv, c)
		api := linkv1connect.NewLinkServiceClient(connect.NewClient(connectinprocess.New(srv)))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stream, err := api.Link(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Close()
		// Twice, as the frames of a second batch may find the state the
		// first left behind.
		for range 2 {
			if err := stream.Send(&req); err != nil {
				break
			}
		}
		// Let the connections' workers run before the edge goes away.
		time.Sleep(time.Millisecond)
		stream.CloseSend()
		for {
			if _, err := stream.Receive(); err != nil {
				break
			}
		}
		if _, err := c.API().Publish(ctx, &corralv1.PublishRequest{Room: "honest", Payload: []byte(`1`)}); err != nil {
			t.Fatalf("the core stopped serving: %v", err)
		}
	})
}

func linkRequestSeeds() []*linkv1.LinkRequest {
	id := &corralv1.Identity{UserId: "u", Join: []string{"*"}, Publish: []string{"*"}}
	attach := func(conn uint64, hello *corralv1.Hello) *linkv1.EdgeFrame {
		return &linkv1.EdgeFrame{Conn: conn, Kind: &linkv1.EdgeFrame_Attach{Attach: &linkv1.Attach{Hello: hello, Identity: id, Protocol: "json"}}}
	}
	frame := func(conn uint64, f *corralv1.ClientFrame) *linkv1.EdgeFrame {
		return &linkv1.EdgeFrame{Conn: conn, Kind: &linkv1.EdgeFrame_Frame{Frame: f}}
	}
	join := func(room string, since uint64) *corralv1.ClientFrame {
		return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: room, SinceSeq: since}}}
	}
	publish := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "r", Id: "1", Payload: []byte(`{"a":1}`)}}}
	signal := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{Room: "r", Key: "k", Payload: []byte(`1`)}}}
	leave := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Leave{Leave: &corralv1.Leave{Room: "r"}}}
	ack := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ack{Ack: &corralv1.Ack{Room: "r", Seq: 1}}}
	ping := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Id: 7}}}
	hello := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{}}}
	detach := &linkv1.EdgeFrame{Conn: 1, Kind: &linkv1.EdgeFrame_Detach{Detach: &linkv1.Detach{Clean: true}}}
	return []*linkv1.LinkRequest{
		{},
		{Frames: []*linkv1.EdgeFrame{
			attach(1, &corralv1.Hello{Client: "fuzz"}),
			frame(1, join("r", 0)), frame(1, publish), frame(1, signal), frame(1, ack), frame(1, ping),
			frame(1, hello), frame(1, join("r", 1)), frame(1, leave), frame(1, leave), detach,
		}},
		{Frames: []*linkv1.EdgeFrame{
			attach(1, &corralv1.Hello{}), attach(2, &corralv1.Hello{Resume: &corralv1.Resume{SessionId: "s", ResumeToken: "t",
				Rooms: []*corralv1.RoomPosition{{Room: "r", Seq: 5, Epoch: "e"}}}}),
			frame(2, publish), attach(1, &corralv1.Hello{}), frame(1, join("", 0)), frame(3, ping),
			{Conn: 1, Kind: &linkv1.EdgeFrame_Attach{Attach: &linkv1.Attach{}}},
			frame(1, &corralv1.ClientFrame{}), frame(1, join("r\x00", 0)),
		}},
		// An edge reattaching sessions after its link came back: a known
		// identity with a session the store does not hold, then none.
		{Frames: []*linkv1.EdgeFrame{
			{Conn: 4, Kind: &linkv1.EdgeFrame_Reattach{Reattach: &linkv1.Reattach{SessionId: "s", ResumeToken: "t", Identity: id,
				Rooms: []*corralv1.RoomPosition{{Room: "r", Seq: 5, Epoch: "e", Presence: true}}, Protocol: "json"}}},
			frame(4, publish),
			{Conn: 5, Kind: &linkv1.EdgeFrame_Reattach{Reattach: &linkv1.Reattach{}}},
			frame(5, ping),
		}},
	}
}
