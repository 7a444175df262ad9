package core

import (
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// The constructors of the frames the core sends an edge: each says what it
// is (proto/corral/link/v1/link.proto CoreFrame), and those the edge keeps
// positions from state the position, so the edge never reads it from the
// ServerFrame it forwards.

// liveFrame is a room's live message or Reset; the room is then at (seq,
// epoch).
func liveFrame(room string, seq uint64, epoch string, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Live{Live: &linkv1.RoomLive{Room: room, Seq: seq, Epoch: epoch, Frame: f}}}
}

// signalsFrame is a room's signal flush.
func signalsFrame(room string, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Signals{Signals: &linkv1.RoomSignals{Room: room, Frame: f}}}
}

// presenceFrame is a room's presence change.
func presenceFrame(room string, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Presence{Presence: &linkv1.RoomPresence{Room: room, Frame: f}}}
}

// replayFrame is a batch of messages conn missed in room; it is then at
// (seq, epoch).
func replayFrame(conn uint64, room string, seq uint64, epoch string, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Replay{Replay: &linkv1.ConnReplay{Conn: conn, Room: room, Seq: seq, Epoch: epoch, Frame: f}}}
}

// snapshotFrame is room's signal values for conn going live.
func snapshotFrame(conn uint64, room string, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Snapshot{Snapshot: &linkv1.ConnSnapshot{Conn: conn, Room: room, Frame: f}}}
}

// positionFrame states conn is at (seq, epoch) in room, with f (Joined,
// Reset or ReplayEnd) for its client.
func positionFrame(conn uint64, room string, seq uint64, epoch string, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Position{Position: &linkv1.ConnPosition{Conn: conn, Room: room, Seq: seq, Epoch: epoch, Frame: f}}}
}

// leftFrame says conn left room, with its Left.
func leftFrame(conn uint64, left *corralv1.Left) *linkv1.CoreFrame {
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Left{Left: &linkv1.ConnLeft{
		Conn: conn, Room: left.GetRoom(), Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Left{Left: left}},
	}}}
}

// sessionFrame names conn's session, with its Welcome (f).
func sessionFrame(conn uint64, f *corralv1.ServerFrame) *linkv1.CoreFrame {
	w := f.GetWelcome()
	return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Session{Session: &linkv1.ConnSession{
		Conn: conn, SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken(), Frame: f,
	}}}
}
