package frame

import (
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/safetext"
)

// The frames the core sends on a link (package core/linkserver); see the
// package comment.

// Reset tells a client that its position in room is gone: it
// continues after seq in epoch.
func Reset(room string, seq uint64, epoch string) *corralv1.ServerFrame {
	return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Reset_{Reset_: &corralv1.Reset{Room: room, Seq: seq, Epoch: epoch}}}
}

// Conn carries f to one connection.
func Conn(conn uint64, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Conn{Conn: &linkv1.ConnFrame{Conn: conn, Frame: f}}}
}

// Close asks the edge to close conn with a reconnect hint.
func Close(conn uint64, code corralv1.Code, reason string, delayMs uint32) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Close{Close: &linkv1.CloseConn{
		Conn: conn,
		Hint: &corralv1.ReconnectHint{Code: code, Reason: safetext.Reason(reason), DelayMs: delayMs},
	}}}
}

// Membership tells the edge that conn starts (member) or stops
// receiving room's frames.
func Membership(conn uint64, room string, member bool) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Membership{Membership: &linkv1.Membership{
		Conn: conn, Room: room, Member: member,
	}}}
}

// PresenceMembership tells the edge that conn, a member of room,
// now receives the room's presence frames too.
func PresenceMembership(conn uint64, room string) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Membership{Membership: &linkv1.Membership{
		Conn: conn, Room: room, Member: true, Presence: true,
	}}}
}

// Live is a room's live message or Reset; the room is then at (seq,
// epoch).
func Live(room string, seq uint64, epoch string, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Live{Live: &linkv1.RoomLive{Room: room, Seq: seq, Epoch: epoch, Frame: f}}}
}

// Signals is a room's signal flush.
func Signals(room string, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Signals{Signals: &linkv1.RoomSignals{Room: room, Frame: f}}}
}

// Presence is a room's presence change.
func Presence(room string, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Presence{Presence: &linkv1.RoomPresence{Room: room, Frame: f}}}
}

// Replay is a batch of messages conn missed in room; it is then at
// (seq, epoch).
func Replay(conn uint64, room string, seq uint64, epoch string, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Replay{Replay: &linkv1.ConnReplay{Conn: conn, Room: room, Seq: seq, Epoch: epoch, Frame: f}}}
}

// ReplayAck is Replay whose page is followed by another: the edge reports
// it taken (EdgeFrame.replay_taken) and the core sends the next page.
func ReplayAck(conn uint64, room string, seq uint64, epoch string, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Replay{Replay: &linkv1.ConnReplay{Conn: conn, Room: room, Seq: seq, Epoch: epoch, Frame: f, Ack: true}}}
}

// Snapshot is room's signal values for conn going live.
func Snapshot(conn uint64, room string, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Snapshot{Snapshot: &linkv1.ConnSnapshot{Conn: conn, Room: room, Frame: f}}}
}

// Position states conn is at (seq, epoch) in room, with f (Joined,
// Reset or ReplayEnd) for its client.
func Position(conn uint64, room string, seq uint64, epoch string, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Position{Position: &linkv1.ConnPosition{Conn: conn, Room: room, Seq: seq, Epoch: epoch, Frame: f}}}
}

// Left says conn left room, with its Left.
func Left(conn uint64, left *corralv1.Left) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Left{Left: &linkv1.ConnLeft{
		Conn: conn, Room: left.GetRoom(), Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Left{Left: left}},
	}}}
}

// Session names conn's session, with its Welcome (f).
func Session(conn uint64, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	w := f.GetWelcome()
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Session{Session: &linkv1.ConnSession{
		Conn: conn, SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken(), Frame: f,
	}}}
}

// State is a room's keyed-state change (a StateChange, or a StateSnapshot
// replacing what the members hold).
func State(room string, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_State{State: &linkv1.RoomState{Room: room, Frame: f}}}
}
