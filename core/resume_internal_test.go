package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/corral-rt/corral/core/linkserver"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/sessions"
)

// positionWrites is a session store that counts the calls that write
// rooms' positions (SetRoom, SetRooms) and the rooms they carry.
type positionWrites struct {
	sessions.Store
	mu    sync.Mutex // guards the following fields
	calls int
	rooms map[string]sessions.Position
}

func (p *positionWrites) SetRoom(ctx context.Context, id, room string, pos sessions.Position) error {
	p.mu.Lock()
	p.calls++
	p.rooms[room] = pos
	p.mu.Unlock()
	return p.Store.SetRoom(ctx, id, room, pos)
}

func (p *positionWrites) SetRooms(ctx context.Context, id string, rooms map[string]sessions.Position) error {
	p.mu.Lock()
	p.calls++
	for room, pos := range rooms {
		p.rooms[room] = pos
	}
	p.mu.Unlock()
	return p.Store.SetRooms(ctx, id, rooms)
}

// reset forgets what was counted and returns it.
func (p *positionWrites) reset() (int, map[string]sessions.Position) {
	p.mu.Lock()
	defer p.mu.Unlock()
	calls, rooms := p.calls, p.rooms
	p.calls, p.rooms = 0, map[string]sessions.Position{}
	return calls, rooms
}

// TestResumeWritesPositionsOnce: a resume of a session in n rooms stores
// the n rooms' positions with one session store call (one round trip on
// Redis), not one call per room. Each room's stored position is the one
// it went live at, in its epoch.
func TestResumeWritesPositionsOnce(t *testing.T) {
	const n = 5
	ctx := context.Background()
	store := &positionWrites{Store: sessions.NewMemory(sessions.Options{TTL: time.Minute}), rooms: map[string]sessions.Position{}}
	t.Cleanup(func() { store.Close() })
	c := newTestCore(t, Config{Sessions: store})
	l := fakeLink(c)
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("r%d", i)
	}
	id, welcome, rooms := joinedThenDetached(t, c, l, names)
	for i := range n {
		for range i { // room ri misses i messages
			if _, err := apiPublish(ctx, c, fmt.Sprintf("r%d", i), []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	store.reset()

	s2 := c.life.Attach(ctx, l, 2, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{Resume: &corralv1.Resume{
		SessionId: welcome.GetSessionId(), ResumeToken: welcome.GetResumeToken(), Rooms: rooms,
	}}})
	if s2 == nil {
		t.Fatal("resume refused")
	}
	calls, got := store.reset()
	if calls != 1 {
		t.Errorf("the resume of %d rooms wrote positions with %d store calls, want 1", n, calls)
	}
	for i, p := range rooms {
		want := sessions.Position{Seq: uint64(i), Epoch: p.GetEpoch()}
		if got[p.GetRoom()] != want {
			t.Errorf("room %s stored at %+v, want %+v", p.GetRoom(), got[p.GetRoom()], want)
		}
	}
}

// downRooms is the memory history whose State fails for the rooms in down.
type downRooms struct {
	*history.Memory
	mu   sync.Mutex // guards down
	down map[string]bool
}

func (h *downRooms) State(ctx context.Context, room string) (history.State, error) {
	h.mu.Lock()
	down := h.down[room]
	h.mu.Unlock()
	if down {
		return history.State{}, errors.New("test: store down")
	}
	return h.Memory.State(ctx, room)
}

func (h *downRooms) set(room string, down bool) {
	h.mu.Lock()
	h.down[room] = down
	h.mu.Unlock()
}

// TestResumeStoreFailureAnswersLeft: every room a resume names is answered
// with Joined or Left. A room whose state the store cannot read is
// answered with Left CODE_UNAVAILABLE (it used to get an Error frame: the
// client, waiting for Joined or Left, waited for ever), and the session
// store keeps it: the next resume, once the store answers, rejoins it
// although the client did not name it.
func TestResumeStoreFailureAnswersLeft(t *testing.T) {
	ctx := context.Background()
	h := &downRooms{Memory: history.NewMemory(history.MemoryOptions{}), down: map[string]bool{}}
	t.Cleanup(func() { h.Close() })
	c := newTestCore(t, Config{History: h})
	l := fakeLink(c)
	rooms := []string{"r0", "r1", "r2"}
	id, w, _ := joinedThenDetached(t, c, l, rooms)
	h.set("r1", true)

	// answers resumes the session on conn naming named, and returns how
	// each room was answered: "joined", or Left's code.
	var last *session
	answers := func(conn uint64, named []string, want int) map[string]string {
		t.Helper()
		r := &corralv1.Resume{SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken()}
		for _, room := range named {
			r.Rooms = append(r.Rooms, &corralv1.RoomPosition{Room: room})
		}
		if last = c.life.Attach(ctx, l, conn, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{Resume: r}}); last == nil {
			t.Fatal("resume refused")
		}
		got := map[string]string{}
		for len(got) < want {
			for _, f := range frames(t, l, 1) {
				answer(t, f, got, &w)
			}
		}
		return got
	}
	got := answers(2, rooms, len(rooms))
	want := map[string]string{"r0": "joined", "r1": corralv1.Code_CODE_UNAVAILABLE.String(), "r2": "joined"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("resume with r1's store down: %v, want %v", got, want)
	}
	c.life.Detach(last, l, 2, false)
	h.set("r1", false)
	if got := answers(3, nil, len(rooms)); fmt.Sprint(got) != fmt.Sprint(map[string]string{"r0": "joined", "r1": "joined", "r2": "joined"}) {
		t.Fatalf("resume after the store came back: %v, want all three rooms joined (the store kept r1)", got)
	}
}

// answer records in got how f answered a resumed room ("joined", or
// Left's code), and in w a Welcome.
func answer(t *testing.T, f *corralv1.ServerFrame, got map[string]string, w **corralv1.Welcome) {
	t.Helper()
	switch {
	case f.GetWelcome() != nil:
		*w = f.GetWelcome()
	case f.GetJoined() != nil:
		got[f.GetJoined().GetRoom()] = "joined"
	case f.GetLeft() != nil:
		got[f.GetLeft().GetRoom()] = f.GetLeft().GetCode().String()
	case f.GetError() != nil:
		t.Fatalf("resume answered a room with an Error frame: %v", f.GetError())
	}
}

// joinedThenDetached attaches a new session of a user who may join
// anything on connection 1 of l, joins it to rooms, one after the other,
// and detaches it. It returns the user's identity, the session's Welcome
// and each room's position as a resume names it.
func joinedThenDetached(t *testing.T, c *Core, l *linkserver.Link, rooms []string) (*corralv1.Identity, *corralv1.Welcome, []*corralv1.RoomPosition) {
	t.Helper()
	ctx := context.Background()
	id := &corralv1.Identity{UserId: "u", Join: []string{"*"}, Publish: []string{"*"}}
	s := c.life.Attach(ctx, l, 1, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{}})
	w := frames(t, l, 1)[0].GetWelcome()
	var pos []*corralv1.RoomPosition
	for _, room := range rooms {
		c.handleClient(ctx, s, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: room}}})
		joined := frames(t, l, 1)[0].GetJoined()
		if joined == nil {
			t.Fatalf("join %s: not joined", room)
		}
		pos = append(pos, &corralv1.RoomPosition{Room: room, Epoch: joined.GetEpoch()})
	}
	c.life.Detach(s, l, 1, false)
	return id, w, pos
}
