package session

import (
	croom "github.com/corral-rt/corral/core/room"
)

// JoinReq is one room a session joins or resumes: the room's part
// (croom.Join: the position, what the room and the history read fill in)
// and the core's. A JoinReq belongs to the connection's work that made
// it (and, while its replay page waits, to the session's paged joins):
// it is not shared.
type JoinReq struct {
	croom.Join
	Name string
	Room *Room
	// Stored: the session store lists the room (a resumed room).
	Stored bool
	// Presence: count the session in the room's presence, with State.
	Presence bool
	State    []byte
	Bytes    int // of Msgs, as croom.CatchupSize counts them
	Limit    int // messages to read for the next page; 0: a whole page
}
