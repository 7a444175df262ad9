package core

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/corral-rt/corral/core/api"
	"github.com/corral-rt/corral/core/linkserver"
	croom "github.com/corral-rt/corral/core/room"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/buildinfo"
	"github.com/corral-rt/corral/state"
	"google.golang.org/protobuf/proto"
)

// apiCore is what the internal API (package core/api) sees of the core:
// api.Core's operations and snapshots over the core's tables, each read
// under the lock of the table, room or session it reads, one at a time.
// Its methods are safe for concurrent use.
type apiCore struct{ *Core }

var _ api.Core = apiCore{}

// Publish publishes one message of an internal service to a valid room.
func (c apiCore) Publish(ctx context.Context, msg *corralv1.Message, dedupe string, order history.Sender) (history.AppendResult, error) {
	r, err := c.acquireRoom(ctx, msg.GetRoom(), false)
	if err != nil {
		return history.AppendResult{}, err
	}
	defer c.releaseRoom(r)
	return r.Publish(ctx, msg, dedupe, order)
}

// Backlog sums every link's queue toward its edge and the bytes its edge
// last reported in its connections' send queues; fullLink when one link
// holds half of Config.LinkQueue frames.
func (c apiCore) Backlog() (coreBytes, edgeBytes uint64, fullLink bool) {
	c.links.Each(func(l *linkserver.Link) {
		frames, b, e := l.Backlog()
		coreBytes += uint64(b)
		edgeBytes += e
		fullLink = fullLink || frames >= c.cfg.LinkQueue/2
	})
	return coreBytes, edgeBytes, fullLink
}

// Presence lists room's presence from the presence store.
func (c apiCore) Presence(ctx context.Context, room string) ([]*corralv1.PresenceMember, error) {
	snap, err := c.pres.store.List(ctx, room)
	if err != nil {
		return nil, err
	}
	var out []*corralv1.PresenceMember
	for _, m := range snap.Members {
		out = append(out, croom.PresenceMember(m))
	}
	return out, nil
}

// Members lists room's members here by user, from the room's live state:
// members whose join finished (Joined was sent).
func (c apiCore) Members(room string, limit int) ([]*corralv1.Member, bool) {
	r := c.rooms.get(room)
	if r == nil {
		return nil, false
	}
	members, ok := r.Members(limit)
	if !ok {
		return nil, true
	}
	byUser := make(map[string]*corralv1.Member)
	for _, s := range members {
		m := byUser[s.UserID()]
		if m == nil {
			m = &corralv1.Member{UserId: s.UserID()}
			byUser[s.UserID()] = m
		}
		m.SessionIds = append(m.SessionIds, s.SessionID())
		m.Connections++
	}
	out := make([]*corralv1.Member, 0, len(byUser))
	for _, m := range byUser {
		out = append(out, m)
	}
	return out, false
}

// Rooms lists the first n rooms with members here after after that keep
// keeps, by name.
func (c apiCore) Rooms(after string, keep func(string) bool, n int) []*corralv1.RoomInfo {
	var cands []*room
	for _, r := range c.rooms.all() {
		if r.Name() > after && keep(r.Name()) {
			cands = append(cands, r)
		}
	}
	slices.SortFunc(cands, func(a, b *room) int { return cmp.Compare(a.Name(), b.Name()) })
	var out []*corralv1.RoomInfo
	for _, r := range cands {
		members, last, epoch := r.Info()
		info := &corralv1.RoomInfo{Name: r.Name(), Members: uint32(members), LastSeq: last, Epoch: epoch}
		if info.Members == 0 {
			continue // publishes or joins in flight only
		}
		if len(out) == n {
			break
		}
		out = append(out, info)
	}
	return out
}

// Nodes describes this core and, after it, the edges linked to it.
func (c apiCore) Nodes() []*corralv1.NodeInfo {
	now := time.Now()
	// Three snapshots, one table at a time: a link, session or room that
	// comes or goes meanwhile may be counted or not.
	links := c.links.All()
	sessions := c.attached.All()
	rooms := c.rooms.all()

	// An edge holds a few links to a core: one node per edge, its oldest
	// link first.
	slices.SortFunc(links, func(a, b *linkserver.Link) int { return a.Started().Compare(b.Started()) })
	var edges []*corralv1.NodeInfo
	byEdge := make(map[string]*corralv1.NodeInfo)
	nodeOf := make(map[*linkserver.Link]*corralv1.NodeInfo, len(links))
	for _, l := range links {
		n := byEdge[l.Edge()]
		if n == nil {
			n = &corralv1.NodeInfo{Id: l.Edge(), Role: "edge", Version: l.Version(), UptimeMs: uint64(now.Sub(l.Started()).Milliseconds())}
			byEdge[l.Edge()] = n
			edges = append(edges, n)
		}
		nodeOf[l] = n
	}
	for _, s := range sessions {
		if ep, ok := s.Endpoint(); ok {
			if n := nodeOf[ep.Link]; n != nil {
				n.Connections++
			}
		}
	}
	active := uint32(0)
	for _, r := range rooms {
		in := make(map[*corralv1.NodeInfo]bool, 1)
		// A link counts the room's members on it: the room has members
		// when it has links.
		links := r.Links()
		if len(links) > 0 {
			active++
		}
		for _, l := range links {
			if n := nodeOf[l]; n != nil {
				in[n] = true
			}
		}
		for n := range in {
			n.Rooms++
		}
	}
	return append([]*corralv1.NodeInfo{{
		Id:          c.id,
		Role:        "core",
		Version:     buildinfo.Version(),
		Connections: uint32(len(sessions)),
		Rooms:       active,
		UptimeMs:    uint64(now.Sub(c.started).Milliseconds()),
	}}, edges...)
}

// targets are the sessions attached here of user, or the one session
// when sessionID is not "".
func (c apiCore) targets(user, sessionID string) []*session {
	if sessionID != "" {
		if s := c.attached.Lookup(sessionID); s != nil {
			return []*session{s}
		}
		return nil
	}
	return c.attached.OfUser(user)
}

// Connections describes the first n connections of user (or session)
// here after after, by session id. It reads the session table, then each
// session and its queue under their own locks, one at a time.
func (c apiCore) Connections(user, sessionID, after string, n int) []*corralv1.ConnectionInfo {
	found := c.targets(user, sessionID)
	slices.SortFunc(found, func(a, b *session) int { return cmp.Compare(a.SessionID(), b.SessionID()) })
	var out []*corralv1.ConnectionInfo
	for _, s := range found {
		if s.SessionID() <= after {
			continue
		}
		info, ok := s.Describe()
		if !ok {
			continue // detached meanwhile
		}
		if len(out) == n {
			break
		}
		out = append(out, info)
	}
	return out
}

// Signals samples room's signals here: the latest value of each key,
// read under the room's signal lock, as a member joining now would be
// sent them; the first n by key, copied, so that nothing read later
// races with the room.
func (c apiCore) Signals(room string, n int) []*corralv1.SignalEvent {
	r := c.rooms.get(room)
	if r == nil {
		return nil
	}
	sigs := r.Signals().Values() // never changed once set: a new value is a new event
	slices.SortFunc(sigs, func(a, b *corralv1.SignalEvent) int { return cmp.Compare(a.GetKey(), b.GetKey()) })
	if len(sigs) > n {
		sigs = sigs[:n]
	}
	for i, ev := range sigs {
		sigs[i] = proto.CloneOf(ev)
	}
	return sigs
}

// Kick closes the connections of user (or session) here.
func (c apiCore) Kick(user, sessionID string, code corralv1.Code, reason string, delayMs uint32, stop bool) []string {
	var ids []string
	now := time.Now()
	for _, s := range c.targets(user, sessionID) {
		ep, ok := s.Endpoint()
		if !ok {
			continue
		}
		c.events.RecordKick(s, code, reason, now)
		if stop {
			c.pres.detach(s, true)
		}
		// Each connection's delay is spread over [d, 1.5d], so a user's
		// many connections do not come back at once.
		ep.Link.Close(ep.Conn, code, reason, delayMs+uint32(rand.N(int64(delayMs)/2+1)))
		ids = append(ids, s.SessionID())
	}
	slices.Sort(ids)
	return ids
}

// EnforceGrants removes user's sessions here from the rooms their grants
// no longer allow.
func (c apiCore) EnforceGrants(ctx context.Context, user string) ([]string, int) {
	return c.adm.enforceGrants(ctx, user)
}

// newAPI returns the internal API of c, which answers the other cores'
// every_core questions and applies their commands from now on: New calls
// it last, once c can answer.
func (c *Core) newAPI(cfg APIConfig) *api.Service {
	asker, _ := c.cfg.Control.(ControlAsker)
	return api.New(api.Options{
		Core: apiCore{c},
		Config: api.Config{
			MaxBroadcastRooms:    cfg.MaxBroadcastRooms,
			MaxMembers:           cfg.MaxMembers,
			MaxBatch:             cfg.MaxBatch,
			BroadcastConcurrency: cfg.BroadcastConcurrency,
			OverloadQueueBytes:   int(cfg.OverloadQueueBytes),
			EventsHeartbeat:      cfg.EventsHeartbeat,
		},
		Door:       c.door,
		MaxPayload: func(room string) int { return c.class(room).MaxPayload },
		History:    c.hist,
		Sessions:   c.sess,
		Events:     c.events.Store(),
		Control:    c.cfg.Control,
		Asker:      asker,
		NodeQuery:  c.cfg.NodeQuery,
		Closing:    c.ctx,
		Count:      c.metrics.countAPI,
		Logger:     c.cfg.Logger,
	})
}

// SetState writes one key of room's keyed state for the API.
func (c apiCore) SetState(ctx context.Context, room string, set state.Set) (state.Result, error) {
	return c.keyed.set(ctx, nil, room, set)
}

// DeleteState removes one key of room's keyed state for the API.
func (c apiCore) DeleteState(ctx context.Context, room, key string, cas bool, version uint64) (state.Result, error) {
	return c.keyed.delete(ctx, nil, room, key, cas, version)
}

// StateSnapshot reads room's keyed state from the store.
func (c apiCore) StateSnapshot(ctx context.Context, room string) (state.Snapshot, error) {
	return c.keyed.store.Snapshot(ctx, room)
}

// Grow applies one chunk of a growing message for the API, in its room's
// order (grow.go): the room held for the chunk, the class's bounds, no
// client's door.
func (c apiCore) Grow(ctx context.Context, msg *corralv1.Message) (history.AppendResult, error) {
	if _, ok := c.hist.(history.Grower); !ok {
		return history.AppendResult{}, api.ErrNoGrowing
	}
	cl := c.class(msg.GetRoom())
	if len(msg.GetChunk().GetData()) > cl.Growing.MaxBytes {
		return history.AppendResult{}, &api.RefusedError{Code: corralv1.Code_CODE_TOO_LARGE,
			Text: "the chunk exceeds the room's growing message size (its class's growing.max-bytes)"}
	}
	r, err := c.acquireRoom(ctx, msg.GetRoom(), false)
	if err != nil {
		return history.AppendResult{}, err
	}
	defer c.releaseRoom(r)
	res, err := c.grow.grow(ctx, r, msg, cl)
	if err != nil {
		if code, text, ok := c.grow.refusal(err); ok {
			return res, &api.RefusedError{Code: code, Text: text}
		}
	}
	return res, err
}

// Assembled reads a growing message as assembled so far, for the API.
func (c apiCore) Assembled(ctx context.Context, room, id string) (*corralv1.Message, history.State, error) {
	gr, ok := c.hist.(history.Grower)
	if !ok {
		return nil, history.State{}, api.ErrNoGrowing
	}
	done := c.metrics.storeOp("assembled")
	m, st, err := gr.Assembled(ctx, room, id)
	if errors.Is(err, history.ErrNotFound) {
		done(nil)
		return nil, st, err
	}
	done(err)
	return m, st, err
}
