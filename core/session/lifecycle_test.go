package session_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corral-rt/corral/core/linkserver"
	croom "github.com/corral-rt/corral/core/room"
	"github.com/corral-rt/corral/core/session"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/linktest"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/sessions"
)

// ports are a Lifecycle's ports as fakes that record their calls, in
// order, as one line each.
type ports struct {
	t     *testing.T
	mu    sync.Mutex // guards the following fields
	calls []string
	table map[string]*session.Session
	rooms map[string]*session.Room

	hist *history.Memory
	opts *croom.Options[*session.Session]
}

func (p *ports) record(call string) {
	p.mu.Lock()
	p.calls = append(p.calls, call)
	p.mu.Unlock()
}

// took returns the calls recorded since the last took.
func (p *ports) took() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.calls
	p.calls = nil
	return c
}

// table

func (p *ports) Attach(s *session.Session) (*session.Session, time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.table[s.SessionID()]
	p.table[s.SessionID()] = s
	p.calls = append(p.calls, "table.Attach")
	return old, time.Time{}, false
}

func (p *ports) Detach(s *session.Session, clean bool, at time.Time) bool {
	p.record("table.Detach")
	return true
}

func (p *ports) Sweep(time.Time) int { return 0 }

func (p *ports) All() []*session.Session {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Values(p.table))
}

// rooms: "bad" fails; every other room is made on its first acquire.

type roomsPort struct{ *ports }

func (p roomsPort) Acquire(ctx context.Context, name string) (*session.Room, error) {
	p.record("Acquire " + name)
	if name == "bad" {
		return nil, errors.New("store down")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.rooms[name]
	if r == nil {
		p.hist.Hold(name)
		r = croom.New(name, p.opts)
		if err := r.Load(ctx, true); err != nil {
			p.t.Error(err)
		}
		p.rooms[name] = r
	}
	return r, nil
}

func (p roomsPort) Release(r *session.Room)       { p.record("Release " + r.Name()) }
func (p roomsPort) ReleaseMember(r *session.Room) { p.record("ReleaseMember " + r.Name()) }

func (p roomsPort) Failed(_ context.Context, _ *session.Session, q *session.JoinReq, _ error) {
	p.record("Failed " + q.Name)
}

// door: admits all.

type doorPort struct{ *ports }

func (p doorPort) Admit(_ context.Context, _ *session.Session, reqs []*session.JoinReq) []*session.JoinReq {
	p.record("Admit " + names(reqs))
	return reqs
}

func (p doorPort) RefuseFull(_ context.Context, _ *session.Session, q *session.JoinReq) {
	p.record("RefuseFull " + q.Name)
}

// reads

type readsPort struct{ *ports }

func (p readsPort) Missed(_ context.Context, qs []*session.JoinReq) { p.record("Missed " + names(qs)) }
func (p readsPort) Open(_ context.Context, qs []*session.JoinReq)   { p.record("Open " + names(qs)) }
func (p readsPort) Old(_ context.Context, qs []*session.JoinReq)    { p.record("Old " + names(qs)) }

// presence and events

type presencePort struct{ *ports }

func (p presencePort) Join(_ context.Context, _ *session.Session, r *session.Room, _ []byte) {
	p.record("presence.Join " + r.Name())
}
func (p presencePort) Leave(_ *session.Session, room string, _ bool) {
	p.record("presence.Leave " + room)
}
func (p presencePort) Detach(_ *session.Session, clean bool) {
	p.record("presence.Detach " + map[bool]string{true: "clean", false: "unclean"}[clean])
}

type eventsPort struct{ *ports }

func (p eventsPort) EmitJoined(_ *session.Session, room string, _ bool) { p.record("Joined " + room) }
func (p eventsPort) EmitDisconnected(_ *session.Session, rooms map[string]*session.Room, _ bool) {
	p.record("Disconnected " + join(slices.Sorted(maps.Keys(rooms))))
}

func names(qs []*session.JoinReq) string {
	var n []string
	for _, q := range qs {
		n = append(n, q.Name)
	}
	return join(n)
}

func join(n []string) string {
	out := "["
	for i, s := range n {
		if i > 0 {
			out += " "
		}
		out += s
	}
	return out + "]"
}

// newLifecycle is a Lifecycle on a memory session store and fake ports;
// classes is the room class table (nil: the default class only).
func newLifecycle(t *testing.T, classes []roomclass.Class) (*session.Lifecycle, *ports) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	store := sessions.NewMemory(sessions.Options{TTL: time.Minute})
	t.Cleanup(func() { store.Close() })
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := &ports{t: t, table: map[string]*session.Session{}, rooms: map[string]*session.Room{},
		hist: history.NewMemory(history.MemoryOptions{})}
	p.opts = &croom.Options[*session.Session]{
		History:      p.hist,
		Classes:      roomclass.NewLive(roomclass.NewTable(roomclass.Default(), classes)),
		Ctx:          ctx,
		Logger:       logger,
		Metrics:      croom.NopMetrics(),
		PresenceTick: 500 * time.Millisecond,
		StateGapWait: croom.GapWait,
		Go:           func(fn func()) { go fn() },
		Held:         func(*session.Room) bool { return true },
	}
	f := &session.Lifecycle{
		Store:    store,
		Table:    p,
		Rooms:    roomsPort{p},
		Door:     doorPort{p},
		Reads:    readsPort{p},
		Presence: presencePort{p},
		Events:   eventsPort{p},
		Metrics: session.FlowMetrics{
			StoreOp:     func(op string) func(error) { p.record("StoreOp " + op); return func(error) {} },
			StaleResume: func() { p.record("StaleResume") },
			Reconnected: func(time.Duration) { p.record("Reconnected") },
			Resumed:     func() { p.record("Resumed") },
		},
		Logger:    logger,
		Heartbeat: 25 * time.Second,
		TTL:       time.Minute,
	}
	return f, p
}

// closes is the connections closed on l, and with which code, in order;
// the client frames queued are dropped.
func closes(l *linkserver.Link) map[uint64]corralv1.Code {
	out := map[uint64]corralv1.Code{}
	for _, f := range l.Take(1<<20, 1<<30) {
		if c, ok := f.GetKind().(*linkv1.CoreFrame_Close); ok {
			out[c.Close.GetConn()] = c.Close.GetHint().GetCode()
		}
	}
	return out
}

// TestLifecycleJoin: Join acquires each admitted room; a room whose
// acquire failed is answered (Failed) and a full one refused
// (RefuseFull), and neither is read nor released; the joins that began
// are read in one batch per read, in order, go live (Joined, presence)
// and are released after, their positions stored once.
func TestLifecycleJoin(t *testing.T) {
	ctx := context.Background()
	full := roomclass.Default()
	full.Name, full.Match, full.MaxMembers = "full", roomclass.Patterns{"full*"}, 1
	f, p := newLifecycle(t, []roomclass.Class{full})
	l := linkserver.Unserved(linkserver.Options{})
	id := &corralv1.Identity{UserId: "u"}
	other := f.Attach(ctx, l, 9, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{}})
	f.Join(ctx, other, []*session.JoinReq{{Name: "full"}})
	s := f.Attach(ctx, l, 1, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{}})
	p.took()

	reqs := []*session.JoinReq{{Name: "a", Presence: true}, {Name: "bad"}, {Name: "full"}, {Name: "b"}}
	f.Join(ctx, s, reqs)
	want := []string{
		"Acquire a", "Acquire bad", "Failed bad", "Acquire full", "RefuseFull full", "Acquire b",
		"Missed [a b]", "Open [a b]", "Old [a b]",
		"Joined a", "presence.Join a", "Joined b", "presence.Leave b",
		"Release a", "Release b",
	}
	if got := p.took(); !slices.Equal(got, want) {
		t.Errorf("calls\n got %q\nwant %q", got, want)
	}
	if got := s.RoomNames(); !slices.Contains(got, "a") || !slices.Contains(got, "b") {
		t.Errorf("rooms %q: want a and b in them", got)
	}
	var joined []string
	for _, fr := range l.Take(1<<20, 1<<30) {
		if j := linktest.ServerFrame(fr).GetJoined(); j != nil {
			joined = append(joined, j.GetRoom())
		}
	}
	if !slices.Contains(joined, "a") || !slices.Contains(joined, "b") {
		t.Errorf("Joined frames for %q: want a and b", joined)
	}
}

// TestLifecycleTakeOver: a resume of a session attached elsewhere takes
// it over: the old connection leaves its rooms and is closed
// SESSION_TAKEN_OVER, its presence kept for the grace (unclean detach);
// the old connection's detach, arriving after, changes nothing; the new
// one's detaches the session.
func TestLifecycleTakeOver(t *testing.T) {
	ctx := context.Background()
	f, p := newLifecycle(t, nil)
	l := linkserver.Unserved(linkserver.Options{})
	id := &corralv1.Identity{UserId: "u"}
	s := f.Attach(ctx, l, 1, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{}})
	welcome := linktest.Frames(t, l, 1)[0].GetWelcome()
	f.Join(ctx, s, []*session.JoinReq{{Name: "a"}})
	closes(l)
	p.took()

	s2 := f.Attach(ctx, l, 2, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{Resume: &corralv1.Resume{
		SessionId: welcome.GetSessionId(), ResumeToken: welcome.GetResumeToken(),
	}}})
	if s2 == nil {
		t.Fatal("resume refused")
	}
	want := []string{
		"StoreOp session_resume", "table.Attach", "ReleaseMember a", "presence.Detach unclean", "Resumed",
		"Admit [a]", "Acquire a", "Missed [a]", "Open [a]", "Old [a]", "Joined a", "presence.Leave a", "Release a",
	}
	if got := p.took(); !slices.Equal(got, want) {
		t.Errorf("resume's calls\n got %q\nwant %q", got, want)
	}
	if got := closes(l); got[1] != corralv1.Code_CODE_SESSION_TAKEN_OVER || len(got) != 1 {
		t.Errorf("closed %v: want conn 1 taken over, only", got)
	}

	f.Detach(s, l, 1, false)
	if got := p.took(); len(got) != 0 {
		t.Errorf("the taken-over connection's detach called %q: want nothing", got)
	}
	f.Detach(s2, l, 2, true)
	want = []string{"ReleaseMember a", "Disconnected [a]", "presence.Detach clean", "table.Detach"}
	if got := p.took(); !slices.Equal(got, want) {
		t.Errorf("detach's calls\n got %q\nwant %q", got, want)
	}
}

// TestLifecycleRefusals: an attach without a user, and a resume whose
// instance is too long or whose token is wrong, are closed before any
// session is attached.
func TestLifecycleRefusals(t *testing.T) {
	ctx := context.Background()
	f, p := newLifecycle(t, nil)
	l := linkserver.Unserved(linkserver.Options{})
	for _, c := range []struct {
		name string
		a    *linkv1.Attach
		want corralv1.Code
	}{
		{"no user", &linkv1.Attach{Identity: &corralv1.Identity{}, Hello: &corralv1.Hello{}}, corralv1.Code_CODE_UNAUTHENTICATED},
		{"long instance", &linkv1.Attach{Identity: &corralv1.Identity{UserId: "u"}, Hello: &corralv1.Hello{Resume: &corralv1.Resume{
			SessionId: "s", ResumeToken: "t", Instance: string(make([]byte, 65)),
		}}}, corralv1.Code_CODE_BAD_FRAME},
		{"unknown session", &linkv1.Attach{Identity: &corralv1.Identity{UserId: "u"}, Hello: &corralv1.Hello{Resume: &corralv1.Resume{
			SessionId: "s", ResumeToken: "t",
		}}}, corralv1.Code_CODE_SESSION_EXPIRED},
	} {
		t.Run(c.name, func(t *testing.T) {
			if s := f.Attach(ctx, l, 1, nil, c.a); s != nil {
				t.Fatal("attached")
			}
			if got := closes(l)[1]; got != c.want {
				t.Errorf("closed %v, want %v", got, c.want)
			}
			for _, call := range p.took() {
				if call == "table.Attach" {
					t.Error("a refused attach reached the session table")
				}
			}
		})
	}
}
