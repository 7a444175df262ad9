package core

import (
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// The frames the core sends on a link (see link.go): every place that
// builds a CoreFrame, or a ServerFrame more than one concept sends, calls
// one of these.

// resetFrame tells a client that its position in room is gone: it
// continues after seq in epoch.
func resetFrame(room string, seq uint64, epoch string) *corralv1.ServerFrame {
	return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Reset_{Reset_: &corralv1.Reset{Room: room, Seq: seq, Epoch: epoch}}}
}

// connFrame carries f to one connection.
func connFrame(conn uint64, f *corralv1.ServerFrame) *corralv1.CoreFrame {
	return &corralv1.CoreFrame{Kind: &corralv1.CoreFrame_Conn{Conn: &corralv1.ConnFrame{Conn: conn, Frame: f}}}
}

// roomFrame carries f to every member of room on a link: built once per
// room and message, enqueued on each link.
func roomFrame(room string, f *corralv1.ServerFrame) *corralv1.CoreFrame {
	return &corralv1.CoreFrame{Kind: &corralv1.CoreFrame_Room{Room: &corralv1.RoomFrame{Room: room, Frame: f}}}
}

// presenceRoomFrame carries a presence diff to the room's presence
// members on a link.
func presenceRoomFrame(room string, p *corralv1.Presence) *corralv1.CoreFrame {
	return &corralv1.CoreFrame{Kind: &corralv1.CoreFrame_Room{Room: &corralv1.RoomFrame{
		Room:     room,
		Frame:    &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Presence{Presence: p}},
		Presence: true,
	}}}
}

// membershipFrame tells the edge that conn starts (member) or stops
// receiving room's frames.
func membershipFrame(conn uint64, room string, member bool) *corralv1.CoreFrame {
	return &corralv1.CoreFrame{Kind: &corralv1.CoreFrame_Membership{Membership: &corralv1.Membership{
		Conn: conn, Room: room, Member: member,
	}}}
}

// presenceMembershipFrame tells the edge that conn, a member of room,
// now receives the room's presence frames too.
func presenceMembershipFrame(conn uint64, room string) *corralv1.CoreFrame {
	return &corralv1.CoreFrame{Kind: &corralv1.CoreFrame_Membership{Membership: &corralv1.Membership{
		Conn: conn, Room: room, Member: true, Presence: true,
	}}}
}
