package session

import (
	"errors"
	"slices"
	"time"

	croom "github.com/corral-rt/corral/core/room"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/sessions"
)

// What a session's attach and resume decide without the core: the
// Welcome, how a resume the session store refused closes the
// connection, and which rooms a resume rejoins from where. The store
// calls, the take-over and the joins themselves are the core's
// (resume.go).

// Welcome is the frame that tells a client its session st, for the
// identity id: resumed or new, the heartbeat and the session's TTL.
func Welcome(st *sessions.Session, id *corralv1.Identity, resumed bool, heartbeat, ttl time.Duration) *corralv1.ServerFrame {
	return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{
		SessionId:    st.ID,
		ResumeToken:  st.Token,
		UserId:       st.UserID,
		Resumed:      resumed,
		HeartbeatMs:  uint32(heartbeat / time.Millisecond),
		SessionTtlMs: uint32(ttl / time.Millisecond),
		ExpiresUnix:  id.GetExpiresUnix(),
	}}}
}

// ResumeRefusal is how a connection is closed whose resume the session
// store refused with err (non-nil): the close code, its reason and the
// delay before a retry. known is false when the store failed rather than
// refused (its error is not one of package sessions' refusals): the
// caller logs err, which the client never sees.
func ResumeRefusal(err error) (code corralv1.Code, reason string, delayMs uint32, known bool) {
	switch {
	case errors.Is(err, sessions.ErrStale):
		// The client gave up on this attempt and holds the session on a
		// newer connection: leave that one alone.
		return corralv1.Code_CODE_SESSION_TAKEN_OVER, "a newer resume attempt of this client holds the session", 0, true
	case errors.Is(err, sessions.ErrNotFound):
		return corralv1.Code_CODE_SESSION_EXPIRED, "session unknown or expired: connect without resume", 0, true
	case errors.Is(err, sessions.ErrTokenMismatch):
		return corralv1.Code_CODE_RESUME_REFUSED, "resume token does not match (tokens rotate: use the latest Welcome's)", 0, true
	case errors.Is(err, sessions.ErrUserMismatch):
		return corralv1.Code_CODE_RESUME_REFUSED, "session belongs to another user", 0, true
	}
	return corralv1.Code_CODE_UNAVAILABLE, "session store unavailable", 1000, false
}

// ResumeJoins appends to reqs the rooms a resume rejoins, in the order
// they pass the door: the client's rooms (r.rooms) in its order, each
// once, at its positions (the client knows what it processed), then the
// rooms the session store holds (stored) that the client did not
// mention, by name, from their last ack. With room in reqs for
// len(r.rooms)+len(stored), the caller's slice stays where it made it (a
// resume of a few rooms allocates no slice on the heap).
func ResumeJoins(reqs []*JoinReq, r *corralv1.Resume, stored map[string]sessions.Position) []*JoinReq {
	seen := make(map[string]bool, len(r.GetRooms())+len(stored))
	for _, p := range r.GetRooms() {
		if seen[p.GetRoom()] {
			continue
		}
		seen[p.GetRoom()] = true
		_, inStore := stored[p.GetRoom()]
		reqs = append(reqs, &JoinReq{Name: p.GetRoom(), Join: croom.Join{Since: p.GetSeq(), Epoch: p.GetEpoch(),
			Position: true, Resumed: true, OpenPrefix: p.GetOpenPrefix(),
			StatePos: p.GetStatePosition(), StateEpoch: p.GetStateEpoch()}, Stored: inStore, Presence: p.GetPresence()})
	}
	rest := make([]string, 0, len(stored))
	for room := range stored {
		if !seen[room] {
			rest = append(rest, room)
		}
	}
	slices.Sort(rest)
	for _, room := range rest {
		pos := stored[room]
		reqs = append(reqs, &JoinReq{Name: room, Join: croom.Join{Since: pos.Seq, Epoch: pos.Epoch,
			Position: true, Resumed: true}, Stored: true})
	}
	return reqs
}
