package edge

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// TestReattachPositions: what the core tells a connection about its rooms
// (Joined, Reset, replays, Left, membership with presence, room messages)
// is what the edge resumes with after its link fails and comes back.
func TestReattachPositions(t *testing.T) {
	position := func(room string, seq uint64, epoch string, f *corralv1.ServerFrame) *linkv1.CoreFrame {
		return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Position{Position: &linkv1.ConnPosition{Conn: 1, Room: room, Seq: seq, Epoch: epoch, Frame: f}}}
	}
	joined := func(room string, seq uint64, epoch string) *linkv1.CoreFrame {
		return position(room, seq, epoch, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Joined{Joined: &corralv1.Joined{Room: room, Seq: seq, Epoch: epoch}}})
	}
	left := func(room string) *linkv1.CoreFrame {
		return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Left{Left: &linkv1.ConnLeft{Conn: 1, Room: room, Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Left{Left: &corralv1.Left{Room: room}}}}}}
	}
	member := func(room string, in, presence bool) *linkv1.CoreFrame {
		return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Membership{Membership: &linkv1.Membership{Conn: 1, Room: room, Member: in, Presence: presence}}}
	}
	msg := func(room string, seq uint64) *corralv1.ServerFrame {
		return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: &corralv1.Message{Room: room, Seq: seq}}}
	}
	welcome := &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Session{Session: &linkv1.ConnSession{Conn: 1, SessionId: "s", ResumeToken: "t", Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{SessionId: "s", ResumeToken: "t"}}}}}}

	tests := map[string]struct {
		frames []*linkv1.CoreFrame
		want   []string // room:seq:epoch:presence, sorted
	}{
		"joined": {
			frames: []*linkv1.CoreFrame{joined("a", 3, "e1"), member("a", true, false)},
			want:   []string{"a:3:e1:false"},
		},
		"live messages move a member on": {
			frames: []*linkv1.CoreFrame{
				joined("a", 3, "e1"), member("a", true, true),
				{Kind: &linkv1.CoreFrame_Live{Live: &linkv1.RoomLive{Room: "a", Seq: 7, Epoch: "e1", Frame: msg("a", 7)}}},
			},
			want: []string{"a:7:e1:true"},
		},
		"reset and replay": {
			frames: []*linkv1.CoreFrame{
				joined("a", 3, "e1"),
				position("a", 10, "e2", &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Reset_{Reset_: &corralv1.Reset{Room: "a", Seq: 10, Epoch: "e2"}}}),
				{Kind: &linkv1.CoreFrame_Replay{Replay: &linkv1.ConnReplay{Conn: 1, Room: "a", Seq: 12, Epoch: "e2", Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{Frames: []*corralv1.ServerFrame{msg("a", 11), msg("a", 12)}}}}}}},
				joined("b", 1, "eb"),
			},
			want: []string{"a:12:e2:false", "b:1:eb:false"},
		},
		"left rooms are not resumed": {
			frames: []*linkv1.CoreFrame{
				joined("a", 3, "e1"), member("a", true, true), joined("b", 5, "eb"), member("b", true, false),
				left("a"),
				member("a", false, false),
			},
			want: []string{"b:5:eb:false"},
		},
		"rejoined after a leave": {
			frames: []*linkv1.CoreFrame{
				joined("a", 3, "e1"), member("a", true, true),
				left("a"),
				member("a", false, false),
				joined("a", 4, "e1"), member("a", true, false),
			},
			want: []string{"a:4:e1:false"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := (&Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Cores: make([]linkv1connect.LinkServiceClient, 1)}).withDefaults()
			e := &Edge{cfg: cfg, metrics: newMetrics(nil), conns: make(map[*conn]struct{}), users: make(map[string]int)}
			l := newLink(e, 0)
			fuzzConn(e, l, 1, protocol.JSON)
			l.dispatch(append([]*linkv1.CoreFrame{welcome}, tc.frames...))
			l.down()
			l.mu.Lock()
			l.reattachLocked()
			l.mu.Unlock()
			sent := l.queue.Take(10, 1<<20)
			if len(sent) != 1 {
				t.Fatalf("%d frames sent on reattach, want one Reattach", len(sent))
			}
			r := sent[0].GetReattach()
			if r.GetSessionId() != "s" || r.GetResumeToken() != "t" {
				t.Fatalf("reattach of session %q with token %q, want s, t", r.GetSessionId(), r.GetResumeToken())
			}
			var got []string
			for _, p := range r.GetRooms() {
				got = append(got, fmt.Sprintf("%s:%d:%s:%v", p.GetRoom(), p.GetSeq(), p.GetEpoch(), p.GetPresence()))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("resumed rooms %q, want %q", got, tc.want)
			}
		})
	}
}
