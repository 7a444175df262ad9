package state_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/state"
)

// TestRedisPublishes checks that every change is published on the room's
// channel, in position order, readable by ParseChange.
func TestRedisPublishes(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Start(t)
	client := redistest.Client(t, addr)
	s := state.NewRedis(client, state.RedisOptions{Prefix: redistest.Prefix(t)})
	got := make(chan []byte, 10)
	ready := make(chan struct{})
	sub, release := redistest.Client(t, addr).Dedicate()
	t.Cleanup(release)
	sub.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) { got <- []byte(m.Message) },
		OnSubscription: func(s rueidis.PubSubSubscription) {
			if s.Kind == "subscribe" {
				close(ready)
			}
		},
	})
	if err := sub.Do(ctx, sub.B().Subscribe().Channel(s.Channel("r")).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	<-ready
	res, err := s.Set(ctx, "r", state.Set{Key: "k", Value: []byte("a\nb"), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, "r", "k", false, 0); err != nil {
		t.Fatal(err)
	}
	for i, want := range []state.Change{
		{Position: 1, Key: "k", Value: []byte("a\nb"), Version: 1},
		{Position: 2, Key: "k", Version: 1, Deleted: true},
	} {
		epoch, c, err := state.ParseChange(<-got)
		if err != nil || epoch != res.Epoch || c.Position != want.Position || string(c.Value) != string(want.Value) ||
			c.Deleted != want.Deleted || c.Version != want.Version {
			t.Fatalf("publication %d: %s %+v %v, want %+v", i, epoch, c, err, want)
		}
	}
	if _, _, err := state.ParseChange([]byte("\x001\ne\n9\n1\n0\nk\nv")); err == nil {
		t.Fatal("ParseChange took an unknown kind")
	}
}

// TestRedisLost checks that a state lost in Redis (flushed) comes back
// under a new epoch, and a reader of the old one is told to snapshot.
func TestRedisLost(t *testing.T) {
	ctx := context.Background()
	srv := redistest.StartProcess(t, 0)
	client := redistest.Client(t, srv.Addr())
	s := state.NewRedis(client, state.RedisOptions{Prefix: redistest.Prefix(t)})
	old, err := s.Set(ctx, "r", state.Set{Key: "k", Value: []byte("1")})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Do(ctx, client.B().Flushall().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	now, err := s.Set(ctx, "r", state.Set{Key: "j"})
	if err != nil {
		t.Fatal(err)
	}
	if now.Epoch == old.Epoch || now.Position != 1 {
		t.Fatalf("after the loss: %+v (before %+v)", now, old)
	}
	if _, err := s.Since(ctx, "r", old.Epoch, old.Position, 0); !errors.Is(err, state.ErrTooOld) {
		t.Fatalf("since in the lost epoch: %v", err)
	}
}

// TestRedisFeed checks that a Feed brings the changes of the rooms added
// to it, with their epoch, and none of the others; a room removed stops.
func TestRedisFeed(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Start(t)
	s := state.NewRedis(redistest.Client(t, addr), state.RedisOptions{Prefix: redistest.Prefix(t)})
	type got struct {
		room, epoch string
		c           state.Change
	}
	ch := make(chan got, 10)
	f, err := s.Follow(ctx, state.FeedOptions{OnChange: func(room, epoch string, c state.Change) { ch <- got{room, epoch, c} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	if err := f.Add(ctx, "doc{1}"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set(ctx, "other", state.Set{Key: "k", Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Set(ctx, "doc{1}", state.Set{Key: "title", Value: []byte(`"Plan"`)})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-ch:
		if g.room != "doc{1}" || g.epoch != res.Epoch || g.c.Position != 1 || string(g.c.Value) != `"Plan"` {
			t.Fatalf("feed brought %+v, want doc{1}'s set at 1 in %s", g, res.Epoch)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no change from the feed")
	}
	if n := f.RemoveIf(func(room string) bool { return room == "doc{1}" }); n != 1 {
		t.Fatalf("RemoveIf removed %d rooms, want 1", n)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
