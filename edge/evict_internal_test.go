package edge

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// TestLinkForgetsLeftRooms: a connection joining and leaving ever-new
// rooms, each with a message, leaves no trace of them on its link.
func TestLinkForgetsLeftRooms(t *testing.T) {
	cfg := (&Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Cores: make([]linkv1connect.LinkServiceClient, 1)}).withDefaults()
	e := &Edge{cfg: cfg, metrics: newMetrics(nil), conns: make(map[*conn]struct{}), users: make(map[string]int)}
	l := newLink(e, 0)
	c := fuzzConn(e, l, 1, protocol.JSON)
	member := func(room string, in bool) *linkv1.CoreFrame {
		return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Membership{Membership: &linkv1.Membership{Conn: 1, Room: room, Member: in, Presence: in}}}
	}
	l.dispatch([]*linkv1.CoreFrame{{Kind: &linkv1.CoreFrame_Session{Session: &linkv1.ConnSession{Conn: 1, SessionId: "s", ResumeToken: "t", Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{SessionId: "s", ResumeToken: "t"}}}}}}})
	for i := range 10_000 {
		room := fmt.Sprintf("r%d", i)
		l.dispatch([]*linkv1.CoreFrame{
			{Kind: &linkv1.CoreFrame_Position{Position: &linkv1.ConnPosition{Conn: 1, Room: room, Epoch: "e", Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Joined{Joined: &corralv1.Joined{Room: room, Epoch: "e"}}}}}},
			member(room, true),
			{Kind: &linkv1.CoreFrame_Live{Live: &linkv1.RoomLive{Room: room, Seq: 1, Epoch: "e", Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: &corralv1.Message{Room: room, Seq: 1}}}}}},
			{Kind: &linkv1.CoreFrame_Left{Left: &linkv1.ConnLeft{Conn: 1, Room: room, Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Left{Left: &corralv1.Left{Room: room}}}}}},
			member(room, false),
			// A frame still in flight after the leave.
			{Kind: &linkv1.CoreFrame_Live{Live: &linkv1.RoomLive{Room: room, Seq: 2, Epoch: "e", Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: &corralv1.Message{Room: room, Seq: 2}}}}}},
		})
		c.mu.Lock()
		c.queue = c.queue[:0] // nobody writes this connection
		c.mu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.rooms)+len(l.presence)+len(l.roomSeq)+len(c.rooms) != 0 {
		t.Fatalf("after 10,000 rooms joined and left the link holds %d rooms, %d presence rooms, %d room seqs, the connection %d rooms; want none",
			len(l.rooms), len(l.presence), len(l.roomSeq), len(c.rooms))
	}
}
