package core

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
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
	id := &corralv1.Identity{UserId: "u", Join: []string{"*"}, Publish: []string{"*"}}
	s := c.attach(ctx, l, 1, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{}})
	welcome := frames(t, l, 1)[0].GetWelcome()
	var rooms []*corralv1.RoomPosition
	for i := range n {
		room := fmt.Sprintf("r%d", i)
		c.handleClient(ctx, s, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: room}}})
		joined := frames(t, l, 1)[0].GetJoined()
		rooms = append(rooms, &corralv1.RoomPosition{Room: room, Epoch: joined.GetEpoch()})
	}
	c.detach(s, l, 1, false)
	for i := range n {
		for range i { // room ri misses i messages
			if _, err := apiPublish(ctx, c, fmt.Sprintf("r%d", i), []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	store.reset()

	s2 := c.attach(ctx, l, 2, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{Resume: &corralv1.Resume{
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
