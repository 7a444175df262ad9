package core

import (
	"context"
	"fmt"
	"sync"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
)

// room is one room's live state: its position in history and its members.
type room struct {
	core *Core
	name string

	refs int // guarded by core.mu

	mu      sync.Mutex // guards the following fields
	loaded  bool
	last    uint64 // newest seq delivered to members
	epoch   string
	members map[*session]endpoint
	// links counts members per link: a room frame goes once to each link.
	links map[*link]int
}

// endpoint is where a member's frames go: a connection on a link.
type endpoint struct {
	link *link
	conn uint64
}

func newRoom(c *Core, name string) *room {
	return &room{
		core:    c,
		name:    name,
		members: make(map[*session]endpoint),
		links:   make(map[*link]int),
	}
}

// load reads the room's state from history once.
func (r *room) load(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.loaded {
		return nil
	}
	st, err := r.core.hist.State(ctx, r.name)
	if err != nil {
		return fmt.Errorf("core: load room %q: %w", r.name, err)
	}
	r.last, r.epoch, r.loaded = st.Last, st.Epoch, true
	return nil
}

// publish appends msg to history and fans it out to every member link, all
// under the room lock so that fan-out order is seq order.
func (r *room) publish(ctx context.Context, msg *corralv1.Message, dedupe string) (history.AppendResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res, err := r.core.hist.Append(ctx, r.name, msg, dedupe)
	if err != nil {
		return res, err
	}
	if res.Duplicate {
		return res, nil
	}
	if res.Epoch != r.epoch && r.epoch != "" {
		// History was lost under us (store flushed): members must refetch.
		r.resetMembersLocked(res)
	}
	r.last, r.epoch = res.Seq, res.Epoch
	r.core.metrics.published.Inc()
	if len(r.links) == 0 {
		return res, nil
	}
	f := &corralv1.CoreFrame{Kind: &corralv1.CoreFrame_Room{Room: &corralv1.RoomFrame{
		Room:  r.name,
		Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: msg}},
	}}}
	for l := range r.links {
		l.enqueue(f)
	}
	return res, nil
}

// signal fans an ephemeral signal out to every member link.
func (r *room) signal(ev *corralv1.SignalEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.links) == 0 {
		return
	}
	f := &corralv1.CoreFrame{Kind: &corralv1.CoreFrame_Room{Room: &corralv1.RoomFrame{
		Room:  r.name,
		Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Signal{Signal: ev}},
	}}}
	for l := range r.links {
		l.enqueue(f)
	}
}

// resetMembersLocked tells every member that the room's history changed
// epoch. Lock must be held.
func (r *room) resetMembersLocked(res history.AppendResult) {
	reset := &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Reset_{Reset_: &corralv1.Reset{
		Room: r.name, Seq: res.Seq - 1, Epoch: res.Epoch,
	}}}
	f := &corralv1.CoreFrame{Kind: &corralv1.CoreFrame_Room{Room: &corralv1.RoomFrame{Room: r.name, Frame: reset}}}
	for l := range r.links {
		l.enqueue(f)
	}
}

// join makes s a member reached at ep. With since > 0 (or resumed), the
// messages after since that history still holds are sent first; if history
// no longer holds them, or epoch names another history, a Reset is sent
// instead. It returns the position the member continues from.
func (r *room) join(ctx context.Context, s *session, ep endpoint, since uint64, epoch string, resumed bool) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.members[s]; ok {
		r.removeLocked(s, old)
	}
	send := func(f *corralv1.ServerFrame) {
		ep.link.enqueue(connFrame(ep.conn, f))
	}
	from := r.last
	switch {
	case since == 0 && !resumed:
		// A plain join: live messages from now on.
	case epoch != "" && epoch != r.epoch, since > r.last:
		// Another history, or a position this history never reached.
		send(resetFrame(r.name, r.last, r.epoch))
	default:
		frames, ok, err := r.missedLocked(ctx, since)
		if err != nil {
			return 0, err
		}
		if !ok {
			send(resetFrame(r.name, r.last, r.epoch))
			break
		}
		from = since
		send(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Joined{Joined: &corralv1.Joined{
			Room: r.name, Seq: from, Epoch: r.epoch, Resumed: resumed,
		}}})
		for _, m := range frames {
			send(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: m}})
		}
		r.addLocked(s, ep)
		return r.last, nil
	}
	send(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Joined{Joined: &corralv1.Joined{
		Room: r.name, Seq: from, Epoch: r.epoch, Resumed: resumed,
	}}})
	r.addLocked(s, ep)
	return r.last, nil
}

// missedLocked reads the messages after since up to r.last. ok is false when
// history no longer holds all of them. Lock must be held.
func (r *room) missedLocked(ctx context.Context, since uint64) (_ []*corralv1.Message, ok bool, _ error) {
	var out []*corralv1.Message
	after := since
	for after < r.last {
		page, err := r.core.hist.Read(ctx, history.Query{Room: r.name, After: after, Limit: int(min(r.last-after, history.MaxPage))})
		if err != nil {
			return nil, false, fmt.Errorf("core: read history of %q: %w", r.name, err)
		}
		if page.Epoch != r.epoch || len(page.Messages) == 0 || page.Messages[0].GetSeq() != after+1 {
			return nil, false, nil
		}
		for _, m := range page.Messages {
			if m.GetSeq() > r.last {
				break
			}
			out = append(out, m)
			after = m.GetSeq()
		}
		if !page.More && after < r.last {
			return nil, false, nil
		}
	}
	return out, true, nil
}

func (r *room) addLocked(s *session, ep endpoint) {
	r.members[s] = ep
	r.links[ep.link]++
}

func (r *room) removeLocked(s *session, ep endpoint) {
	delete(r.members, s)
	if n := r.links[ep.link] - 1; n > 0 {
		r.links[ep.link] = n
	} else {
		delete(r.links, ep.link)
	}
}

// leave removes s. With notify, the member's connection gets a Left frame.
// It reports whether s was a member.
func (r *room) leave(s *session, notify *corralv1.Left) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ep, ok := r.members[s]
	if !ok {
		return false
	}
	r.removeLocked(s, ep)
	if notify != nil {
		ep.link.enqueue(connFrame(ep.conn, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Left{Left: notify}}))
	}
	return true
}

// memberCount reports the number of members.
func (r *room) memberCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.members)
}

func resetFrame(room string, seq uint64, epoch string) *corralv1.ServerFrame {
	return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Reset_{Reset_: &corralv1.Reset{Room: room, Seq: seq, Epoch: epoch}}}
}

func connFrame(conn uint64, f *corralv1.ServerFrame) *corralv1.CoreFrame {
	return &corralv1.CoreFrame{Kind: &corralv1.CoreFrame_Conn{Conn: &corralv1.ConnFrame{Conn: conn, Frame: f}}}
}
