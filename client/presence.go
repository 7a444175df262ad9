package client

import (
	"context"
	"errors"
	"slices"
	"strings"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// JoinPresence enters room with presence: the user is shown to the room's
// members with state (nil: none), and the connection receives the room's
// Presence frames, a snapshot first. Feed them to a [Roster].
func (c *Conn) JoinPresence(ctx context.Context, room string, state []byte) (*corralv1.Joined, error) {
	f, err := c.request(ctx, c.joinWait, room, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{
		Room: room, Presence: true, PresenceState: state,
	}}})
	return f.GetJoined(), err
}

// SetPresence replaces the user's presence state in a room joined with
// presence. The server answers only a refusal (an Error frame).
func (c *Conn) SetPresence(ctx context.Context, room string, state []byte) error {
	return c.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_SetPresence{SetPresence: &corralv1.SetPresence{
		Room: room, State: state,
	}}})
}

// QueryPresence reads one page of a joined room's members, ordered by user
// id, after the given user id ("" for the first page; then
// PresencePage.next). One query per room at a time. A refusal (CODE_NOT_JOINED
// before the room is joined) is a *ServerError from a server that names the
// refused frame (Error.frame); an older server's refusal reaches Frames only.
func (c *Conn) QueryPresence(ctx context.Context, room, after string, limit uint32) (*corralv1.PresencePage, error) {
	f, err := c.request(ctx, c.pageWait, room, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_PresenceQuery{PresenceQuery: &corralv1.PresenceQuery{
		Room: room, After: after, Limit: limit,
	}}})
	return f.GetPresencePage(), err
}

// Roster is one room's presence as a client sees it: apply each Presence
// frame of the room in order. The zero value is empty. Not safe for
// concurrent use.
type Roster struct {
	members map[string]*corralv1.PresenceMember
	// Members and Connections are the room's counts from the latest frame.
	Members, Connections int
	// CountsOnly is true while the room is too large for per-member
	// diffs: Members lists nobody; page with QueryPresence.
	CountsOnly bool
}

// Apply updates the roster with one Presence frame of its room.
func (r *Roster) Apply(p *corralv1.Presence) {
	if r.members == nil || p.GetSnapshot() {
		r.members = make(map[string]*corralv1.PresenceMember)
	}
	for _, m := range p.GetJoins() {
		r.members[m.GetUserId()] = m
	}
	for _, m := range p.GetUpdates() {
		r.members[m.GetUserId()] = m
	}
	for _, u := range p.GetLeaves() {
		delete(r.members, u)
	}
	r.Members, r.Connections = int(p.GetMembers()), int(p.GetConnections())
	r.CountsOnly = p.GetCountsOnly()
	if r.CountsOnly {
		clear(r.members)
	}
}

// Get returns a member, or nil.
func (r *Roster) Get(user string) *corralv1.PresenceMember { return r.members[user] }

// List returns the members ordered by user id.
func (r *Roster) List() []*corralv1.PresenceMember {
	out := make([]*corralv1.PresenceMember, 0, len(r.members))
	for _, m := range r.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *corralv1.PresenceMember) int { return strings.Compare(a.GetUserId(), b.GetUserId()) })
	return out
}

// JoinPresence is [Session.Join] with presence (see [Conn.JoinPresence]):
// the Session keeps the flag and the latest state across reconnects, so a
// resume keeps the user shown and a new session shows it again. Presence
// frames arrive as EventFrame events; feed them to a [Roster] (a snapshot
// after each connect resets it).
func (s *Session) JoinPresence(ctx context.Context, room string, state []byte) (*corralv1.Joined, error) {
	return s.join(ctx, room, true, state)
}

// SetPresence replaces the user's presence state in a room joined with
// JoinPresence. The state is kept for rejoins; while disconnected it is
// sent with the next join.
func (s *Session) SetPresence(ctx context.Context, room string, state []byte) error {
	s.mu.Lock()
	st := s.rooms[room]
	if st == nil || !st.presence {
		s.mu.Unlock()
		return errors.New("client: set presence: room not joined with presence")
	}
	st.state = state
	c := s.conn
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	return s.send(ctx, c, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_SetPresence{SetPresence: &corralv1.SetPresence{
		Room: room, State: state,
	}}})
}
