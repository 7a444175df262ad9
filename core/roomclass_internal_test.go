package core

import (
	"context"
	"github.com/corral-rt/corral/core/eventlog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"github.com/corral-rt/corral/events"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/roomclass"
)

// TestClassPublishRate: a class's publish-rate refuses publishes past its
// burst with CODE_RATE_LIMITED and a delay; other classes are not limited;
// a swapped table applies to the same connection at once.
func TestClassPublishRate(t *testing.T) {
	ctx := context.Background()
	live := oneClass("slow:*", func(c *roomclass.Class) { c.PublishRate, c.PublishBurst = 0.5, 2 })
	c := newTestCore(t, Config{Classes: live})
	l := fakeLink(c)
	id := &corralv1.Identity{UserId: "u", Join: []string{"*"}, Publish: []string{"*"}}
	s := c.life.Attach(ctx, l, 1, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{}})
	frames(t, l, 1) // Welcome
	for _, room := range []string{"slow:1", "fast"} {
		c.handleClient(ctx, s, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: room}}})
		frames(t, l, 1)
	}
	answer := func(room, id string) *corralv1.ServerFrame {
		t.Helper()
		c.handleClient(ctx, s, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: room, Id: id, Payload: []byte("1")}}})
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			for _, f := range frames(t, l, 1) {
				if f.GetPublished() != nil || f.GetError() != nil {
					return f
				}
			}
		}
		t.Fatal("no answer")
		return nil
	}
	for i, id := range []string{"a", "b"} {
		if f := answer("slow:1", id); f.GetPublished() == nil {
			t.Fatalf("publish %d within the burst: %v", i, f)
		}
	}
	f := answer("slow:1", "c")
	if e := f.GetError(); e.GetCode() != corralv1.Code_CODE_RATE_LIMITED || e.GetRetryAfterMs() == 0 {
		t.Fatalf("publish past the class's burst: %v, want CODE_RATE_LIMITED with a delay", f)
	}
	for i := range 5 {
		if f := answer("fast", string(rune('a'+i))); f.GetPublished() == nil {
			t.Fatalf("a default-class room is limited: %v", f)
		}
	}
	// A reload without the rate: the same connection publishes at once.
	live.Swap(roomclass.NewTable(roomclass.Default(), nil))
	if f := answer("slow:1", "d"); f.GetPublished() == nil {
		t.Fatalf("after the swap: %v", f)
	}
}

// TestClassPublishRateOutlivesConnections: a class's publish budget is the
// user's in the room, not the connection's: a user who spent it and
// reconnects (a new session, or a second connection beside the first)
// is refused at once, while another room of the class and another user
// have their own.
func TestClassPublishRateOutlivesConnections(t *testing.T) {
	ctx := context.Background()
	live := oneClass("slow:*", func(c *roomclass.Class) { c.PublishRate, c.PublishBurst = 0.01, 2 })
	c := newTestCore(t, Config{Classes: live})
	l := fakeLink(c)
	connect := func(conn uint64, user string) *session {
		t.Helper()
		id := &corralv1.Identity{UserId: user, Join: []string{"*"}, Publish: []string{"*"}}
		s := c.life.Attach(ctx, l, conn, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{}})
		frames(t, l, 1) // Welcome
		for _, room := range []string{"slow:1", "slow:2"} {
			c.handleClient(ctx, s, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: room}}})
			frames(t, l, 1)
		}
		return s
	}
	answer := func(s *session, room, id string) *corralv1.ServerFrame {
		t.Helper()
		c.handleClient(ctx, s, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: room, Id: id, Payload: []byte("1")}}})
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			for _, f := range frames(t, l, 1) {
				if f.GetPublished() != nil || f.GetError() != nil {
					return f
				}
			}
		}
		t.Fatal("no answer")
		return nil
	}
	limited := func(f *corralv1.ServerFrame) bool {
		return f.GetError().GetCode() == corralv1.Code_CODE_RATE_LIMITED && f.GetError().GetRetryAfterMs() > 0
	}
	first := connect(1, "u")
	for _, id := range []string{"a", "b"} {
		if f := answer(first, "slow:1", id); f.GetPublished() == nil {
			t.Fatalf("publish %s within the burst: %v", id, f)
		}
	}
	if f := answer(first, "slow:1", "c"); !limited(f) {
		t.Fatalf("publish past the burst: %v, want CODE_RATE_LIMITED", f)
	}
	c.life.Detach(first, l, 1, true)
	again := connect(2, "u") // reconnected: a new connection and session
	if f := answer(again, "slow:1", "d"); !limited(f) {
		t.Fatalf("after a reconnect the spent budget came back: %v", f)
	}
	beside := connect(3, "u") // a second connection of the user
	if f := answer(beside, "slow:1", "e"); !limited(f) {
		t.Fatalf("a second connection has a budget of its own: %v", f)
	}
	if f := answer(again, "slow:2", "f"); f.GetPublished() == nil {
		t.Fatalf("another room of the class shares the budget: %v", f)
	}
	other := connect(4, "v")
	if f := answer(other, "slow:1", "g"); f.GetPublished() == nil {
		t.Fatalf("another user shares the budget: %v", f)
	}
	if n := c.pubRates.Len(); n != 3 {
		t.Fatalf("the core holds %d budgets, want 3 (u in slow:1 and slow:2, v in slow:1)", n)
	}
}

// TestClassEventsStream: a class with events-stream false keeps its
// rooms' member events out of the log.
func TestClassEventsStream(t *testing.T) {
	log := events.NewMemory(events.MemoryOptions{})
	c := newTestCore(t, Config{Classes: oneClass("quiet:*", func(c *roomclass.Class) { c.EventsStream = false })})
	e := eventlog.New[*session](eventlog.Options{Store: logSource{log}, Limit: 10, Logger: c.cfg.Logger,
		Keep: func(room string) bool { return c.class(room).EventsStream }})
	s := testSession("s1", "u")
	e.EmitJoined(s, "quiet:1", false)
	e.EmitJoined(s, "loud", false)
	e.EmitLeft(s, "quiet:1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	head, _ := log.Head(context.Background())
	evs, err := log.Read(context.Background(), head, 10, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Wait a little for anything that should not be there.
	more, _ := log.Read(context.Background(), evs[len(evs)-1].GetPosition(), 10, 200*time.Millisecond)
	evs = append(evs, more...)
	if len(evs) != 1 || evs[0].GetRoom() != "loud" {
		t.Fatalf("log holds %v, want only loud's joined", evs)
	}
}

// TestClassMaxPayloadAPI: the internal API's publishes obey their room's
// class max-payload, as clients' do — below the default for a small
// class, above it for a large one — in Publish, Broadcast and Batch.
func TestClassMaxPayloadAPI(t *testing.T) {
	ctx := context.Background()
	big, small := roomclass.Default(), roomclass.Default()
	big.Name, big.Match, big.MaxPayload = "big", roomclass.Patterns{"big:*"}, 256<<10
	small.Name, small.Match, small.MaxPayload = "small", roomclass.Patterns{"small:*"}, 10
	live := roomclass.NewLive(roomclass.NewTable(roomclass.Default(), []roomclass.Class{big, small}))
	c := newTestCore(t, Config{Classes: live})
	payload := func(n int) []byte { return []byte(`"` + strings.Repeat("x", n-2) + `"`) }
	for _, tc := range []struct {
		room string
		size int
		ok   bool
	}{
		{"small:1", 10, true}, {"small:1", 11, false},
		{"lobby", 64 << 10, true}, {"lobby", 64<<10 + 1, false},
		{"big:1", 200 << 10, true}, {"big:1", 256<<10 + 1, false},
	} {
		_, err := c.api.Publish(ctx, &corralv1.PublishRequest{Room: tc.room, Payload: payload(tc.size)})
		if (err == nil) != tc.ok {
			t.Errorf("Publish %d bytes to %s: %v, want ok %v", tc.size, tc.room, err, tc.ok)
		}
		if !tc.ok && connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("Publish %d bytes to %s: %v, want invalid_argument", tc.size, tc.room, err)
		}
	}
	if _, err := c.api.Broadcast(ctx, &corralv1.BroadcastRequest{Rooms: []string{"lobby", "small:2"}, Payload: payload(11)}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("Broadcast of 11 bytes to a room of max-payload 10: %v, want invalid_argument", err)
	}
	res, err := c.api.Batch(ctx, &corralv1.BatchRequest{Publishes: []*corralv1.PublishRequest{
		{Room: "small:3", Payload: payload(11)}, {Room: "big:3", Payload: payload(100 << 10)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.GetResults(); len(r) != 2 || r[0].GetErrorCode() != "invalid_argument" || r[1].GetErrorCode() != "" {
		t.Errorf("Batch results %v, want the small room's refused and the big room's published", r)
	}
}
