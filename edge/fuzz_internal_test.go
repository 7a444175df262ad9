package edge

import (
	"io"
	"log/slog"
	"testing"

	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
	"google.golang.org/protobuf/proto"
)

// FuzzLinkResponse feeds a LinkResponse decoded from arbitrary bytes to a
// link's dispatch, as if the core sent it, with two attached connections
// (one per encoding) that have no socket. Whatever the core sends must not
// crash the edge, and whatever the edge queues for a browser must decode.
func FuzzLinkResponse(f *testing.F) {
	for _, seed := range linkResponseSeeds() {
		b, err := proto.Marshal(seed)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var resp linkv1.LinkResponse
		if proto.Unmarshal(data, &resp) != nil {
			return
		}
		cfg := (&Config{QueueFrames: 64, QueueBytes: 64 << 10, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Cores: make([]linkv1connect.LinkServiceClient, 1)}).withDefaults() // a link needs a core; this one never dials
		e := &Edge{cfg: cfg, metrics: newMetrics(nil), conns: make(map[*conn]struct{}), users: make(map[string]int)}
		l := newLink(e, 0)
		conns := []*conn{fuzzConn(e, l, 1, protocol.JSON), fuzzConn(e, l, 2, protocol.Proto)}
		l.dispatch(resp.GetFrames())
		// A second time: the state the first left behind (members,
		// positions, closes) must hold too.
		l.dispatch(resp.GetFrames())
		for _, c := range conns {
			c.mu.Lock()
			q := append([][]byte(nil), c.queue...)
			c.mu.Unlock()
			for _, b := range q {
				var sf corralv1.ServerFrame
				if err := protocol.DecodeServer(c.enc, b, &sf); err != nil {
					t.Fatalf("queued %s frame does not decode: %v: %q", c.enc, err, b)
				}
			}
		}
	})
}

// fuzzConn is an attached connection with no socket and no writer.
func fuzzConn(e *Edge, l *link, id uint64, enc protocol.Encoding) *conn {
	c := &conn{e: e, enc: enc, id: id, link: l}
	c.ended = true // no writer goroutine
	c.attach = &linkv1.Attach{Identity: &corralv1.Identity{UserId: "u"}}
	l.conns[id] = c
	return c
}

func linkResponseSeeds() []*linkv1.LinkResponse {
	msg := func(room string, seq uint64, payload string) *corralv1.ServerFrame {
		return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: &corralv1.Message{
			Room: room, Seq: seq, Payload: []byte(payload), Sender: "s", Id: "m", TimeMs: 1,
		}}}
	}
	conn := func(id uint64, f *corralv1.ServerFrame) *linkv1.CoreFrame {
		return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Conn{Conn: &linkv1.ConnFrame{Conn: id, Frame: f}}}
	}
	live := func(name string, seq uint64, f *corralv1.ServerFrame) *linkv1.CoreFrame {
		return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Live{Live: &linkv1.RoomLive{Room: name, Seq: seq, Epoch: "e", Frame: f}}}
	}
	position := func(id uint64, name string, seq uint64, epoch string, f *corralv1.ServerFrame) *linkv1.CoreFrame {
		return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Position{Position: &linkv1.ConnPosition{Conn: id, Room: name, Seq: seq, Epoch: epoch, Frame: f}}}
	}
	member := func(id uint64, name string, in bool) *linkv1.CoreFrame {
		return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Membership{Membership: &linkv1.Membership{Conn: id, Room: name, Member: in}}}
	}
	signals := &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{Frames: []*corralv1.ServerFrame{
		{Kind: &corralv1.ServerFrame_Signal{Signal: &corralv1.SignalEvent{Room: "r", Key: "k", Payload: []byte(`{"x":1}`)}}},
	}}}}
	return []*linkv1.LinkResponse{
		{},
		{Frames: []*linkv1.CoreFrame{
			{Kind: &linkv1.CoreFrame_Session{Session: &linkv1.ConnSession{Conn: 1, SessionId: "s", ResumeToken: "t", Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{SessionId: "s", ResumeToken: "t", UserId: "u"}}}}}},
			position(1, "r", 3, "e", &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Joined{Joined: &corralv1.Joined{Room: "r", Seq: 3, Epoch: "e"}}}),
			member(1, "r", true), member(2, "r", true),
			live("r", 4, msg("r", 4, `{"a":1}`)),
			{Kind: &linkv1.CoreFrame_Presence{Presence: &linkv1.RoomPresence{Room: "r", Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Presence{Presence: &corralv1.Presence{Room: "r", Members: 1}}}}}},
			{Kind: &linkv1.CoreFrame_Signals{Signals: &linkv1.RoomSignals{Room: "r", Frame: signals}}},
			{Kind: &linkv1.CoreFrame_Signals{Signals: &linkv1.RoomSignals{Room: "r", Frame: signals}}},
			{Kind: &linkv1.CoreFrame_Snapshot{Snapshot: &linkv1.ConnSnapshot{Conn: 2, Room: "r", Frame: signals}}},
			{Kind: &linkv1.CoreFrame_Replay{Replay: &linkv1.ConnReplay{Conn: 2, Room: "r", Seq: 3, Epoch: "e", Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{Frames: []*corralv1.ServerFrame{msg("r", 2, `1`), msg("r", 3, `"x"`)}}}}}}},
			{Kind: &linkv1.CoreFrame_Left{Left: &linkv1.ConnLeft{Conn: 1, Room: "r", Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Left{Left: &corralv1.Left{Room: "r", Code: corralv1.Code_CODE_FORBIDDEN}}}}}},
			member(1, "r", false),
		}},
		{Frames: []*linkv1.CoreFrame{
			position(2, "r", 9, "f", &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Reset_{Reset_: &corralv1.Reset{Room: "r", Seq: 9, Epoch: "f"}}}),
			conn(2, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Error{Error: &corralv1.Error{Code: corralv1.Code_CODE_RATE_LIMITED, RetryAfterMs: 10}}}),
			{Kind: &linkv1.CoreFrame_Close{Close: &linkv1.CloseConn{Conn: 2, Hint: &corralv1.ReconnectHint{Code: corralv1.Code_CODE_GOING_AWAY, DelayMs: 5}}}},
			conn(99, msg("x", 1, `1`)),
			live("nobody", 1, msg("nobody", 1, `1`)),
		}},
	}
}
