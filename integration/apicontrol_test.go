package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// The server-side control API (issue 20, item 4): Subscribe, Unsubscribe,
// Batch, Rooms and Info.

// nextRoomFrame waits for the next Joined, Left, Message or Error frame.
func nextRoomFrame(t *testing.T, c *client.Conn) *corralv1.ServerFrame {
	t.Helper()
	return nextFrame(t, c, func(f *corralv1.ServerFrame) bool {
		return f.GetJoined() != nil || f.GetLeft() != nil || f.GetMessage() != nil || f.GetError() != nil
	})
}

// TestSubscribe: a Subscribe joins a live connection to a room (Joined,
// then the room's messages), a second one leaves it as it is, and an
// Unsubscribe removes it with Left and CODE_UNSUBSCRIBED: nothing more of
// the room reaches it.
func TestSubscribe(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			alice := dial(t, d, "alice", protocol.JSON)
			bystander := dial(t, d, "bob", protocol.Proto)

			res, err := d.api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "alice", Rooms: []string{"news", "sport"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.GetConnections() != 1 || res.GetPending() != 0 || len(res.GetResults()) != 2 {
				t.Fatalf("subscribe: %v", res)
			}
			for i, want := range []string{"news", "sport"} {
				if r := res.GetResults()[i]; r.GetRoom() != want || r.GetJoined() != 1 || r.GetAlready() != 0 || r.GetRefused() != 0 {
					t.Fatalf("result %d: %v", i, r)
				}
			}
			got := map[string]bool{}
			for range 2 {
				f := nextRoomFrame(t, alice)
				if f.GetJoined() == nil || f.GetJoined().GetResumed() {
					t.Fatalf("want Joined, got %v", f)
				}
				got[f.GetJoined().GetRoom()] = true
			}
			if !got["news"] || !got["sport"] {
				t.Fatalf("joined %v", got)
			}

			for i := 1; i <= 3; i++ {
				if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "news", Payload: payload(i)}); err != nil {
					t.Fatal(err)
				}
				m := nextRoomFrame(t, alice).GetMessage()
				if m.GetRoom() != "news" || m.GetSeq() != uint64(i) {
					t.Fatalf("message %d: %v", i, m)
				}
			}

			again, err := d.api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "alice", Rooms: []string{"news"}})
			if err != nil {
				t.Fatal(err)
			}
			if r := again.GetResults()[0]; r.GetAlready() != 1 || r.GetJoined() != 0 {
				t.Fatalf("second subscribe: %v", again)
			}

			un, err := d.api.Unsubscribe(ctx, &corralv1.UnsubscribeRequest{UserId: "alice", Rooms: []string{"news", "never"}})
			if err != nil {
				t.Fatal(err)
			}
			if un.GetConnections() != 1 || un.GetResults()[0].GetLeft() != 1 || un.GetResults()[1].GetLeft() != 0 {
				t.Fatalf("unsubscribe: %v", un)
			}
			left := nextRoomFrame(t, alice).GetLeft()
			if left.GetRoom() != "news" || left.GetCode() != corralv1.Code_CODE_UNSUBSCRIBED || left.GetReason() == "" {
				t.Fatalf("left: %v", left)
			}
			if protocol.AdviceOf(left.GetCode()) != protocol.AdviceStop {
				t.Fatalf("CODE_UNSUBSCRIBED advice %v, want stop", protocol.AdviceOf(left.GetCode()))
			}
			// After the Left nothing of news arrives: the next message is
			// sport's, published after news's.
			if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "news", Payload: payload(4)}); err != nil {
				t.Fatal(err)
			}
			if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "sport", Payload: payload(5)}); err != nil {
				t.Fatal(err)
			}
			if m := nextRoomFrame(t, alice).GetMessage(); m.GetRoom() != "sport" {
				t.Fatalf("after unsubscribe got %v, want sport's message", m)
			}
			// A user with no connection: nothing reached, no error.
			none, err := d.api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "nobody", Rooms: []string{"news"}})
			if err != nil || none.GetConnections() != 0 {
				t.Fatalf("subscribe of an absent user: %v %v", none, err)
			}
			// The bystander saw nothing.
			select {
			case f := <-bystander.Frames():
				t.Fatalf("bystander got %v", f)
			default:
			}
		})
	}
}

// TestSubscribeAtPosition: a Subscribe with a position replays what the
// connection missed since it, then goes live.
func TestSubscribeAtPosition(t *testing.T) {
	d := start(t, "serve", nil, nil)
	ctx := testCtx(t)
	var epoch string
	for i := 1; i <= 5; i++ {
		p, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "log", Payload: payload(i)})
		if err != nil {
			t.Fatal(err)
		}
		epoch = p.GetEpoch()
	}
	c := dial(t, d, "reader", protocol.Proto)
	if _, err := d.api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "reader", Rooms: []string{"log"},
		Since: []*corralv1.RoomPosition{{Room: "log", Seq: 2, Epoch: epoch}}}); err != nil {
		t.Fatal(err)
	}
	j := nextRoomFrame(t, c).GetJoined()
	if j.GetSeq() != 2 || !j.GetReplay() {
		t.Fatalf("joined %v, want seq 2 with replay", j)
	}
	for want := uint64(3); want <= 5; want++ {
		if m := nextRoomFrame(t, c).GetMessage(); m.GetSeq() != want {
			t.Fatalf("replayed %v, want seq %d", m, want)
		}
	}
}

// TestSubscribeResumeKeepsRoom: the session store remembers a room joined
// by Subscribe, so a resume that names no rooms rejoins it and replays
// what was missed.
func TestSubscribeResumeKeepsRoom(t *testing.T) {
	for _, mode := range []string{"serve", "redis"} {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			c := dial(t, d, "carol", protocol.Proto)
			if _, err := d.api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "carol", Rooms: []string{"desk"}}); err != nil {
				t.Fatal(err)
			}
			if j := nextRoomFrame(t, c).GetJoined(); j.GetRoom() != "desk" {
				t.Fatalf("joined %v", j)
			}
			w := c.Welcome()
			before := attached(t, d)
			c.CloseNow()
			for i := 1; i <= 3; i++ {
				if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "desk", Payload: payload(i)}); err != nil {
					t.Fatal(err)
				}
			}
			// Let the core see the drop before the resume (either order
			// must work; this one exercises the stored rooms).
			waitDetached(t, d, before)
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			back, err := client.Dial(rctx, d.wsURL, client.Options{Token: "carol", Encoding: protocol.Proto, Resume: &corralv1.Resume{
				SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken(),
			}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(back.CloseNow)
			j := nextRoomFrame(t, back).GetJoined()
			if j.GetRoom() != "desk" || !j.GetResumed() {
				t.Fatalf("after resume: %v, want Joined desk resumed", j)
			}
			for want := uint64(1); want <= 3; want++ {
				if m := nextRoomFrame(t, back).GetMessage(); m.GetSeq() != want {
					t.Fatalf("after resume got %v, want seq %d", m, want)
				}
			}
		})
	}
}

// TestSubscribeAcrossCores: with two cores sharing Redis, a Subscribe and
// an Unsubscribe through one core reach a connection of the other.
func TestSubscribeAcrossCores(t *testing.T) {
	var redisURL, prefix string
	a := start(t, "redis", nil, func(o *server.Options) { redisURL, prefix = o.RedisURL, o.RedisPrefix })
	b := start(t, "serve", nil, func(o *server.Options) { o.RedisURL, o.RedisPrefix = redisURL, prefix })
	ctx := testCtx(t)
	c := dial(t, b, "dan", protocol.JSON)
	res, err := a.api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "dan", Rooms: []string{"stage"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetConnections() != 0 || res.GetOtherCores() < 1 {
		t.Fatalf("core a has no connection of dan and one other core: %v", res)
	}
	if j := nextRoomFrame(t, c).GetJoined(); j.GetRoom() != "stage" {
		t.Fatalf("joined %v", j)
	}
	if _, err := a.api.Publish(ctx, &corralv1.PublishRequest{Room: "stage", Payload: payload(1)}); err != nil {
		t.Fatal(err)
	}
	if m := nextRoomFrame(t, c).GetMessage(); m.GetSeq() != 1 {
		t.Fatalf("message %v", m)
	}
	if _, err := a.api.Unsubscribe(ctx, &corralv1.UnsubscribeRequest{UserId: "dan", Rooms: []string{"stage"}, Reason: "show over"}); err != nil {
		t.Fatal(err)
	}
	left := nextRoomFrame(t, c).GetLeft()
	if left.GetRoom() != "stage" || left.GetCode() != corralv1.Code_CODE_UNSUBSCRIBED || left.GetReason() != "show over" {
		t.Fatalf("left: %v", left)
	}
}

// TestSubscribeThroughTheDoor: a Subscribe passes the same door as a
// Join: a room the token does not grant is refused (the connection gets
// the refused join's error) until a Grant allows it.
func TestSubscribeThroughTheDoor(t *testing.T) {
	d := start(t, "serve", grantsAuth(t), nil)
	ctx := testCtx(t)
	c := dialAs(t, d.wsURL, "eve", []string{"home"}, []string{})
	res, err := d.api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "eve", Rooms: []string{"home", "vip"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.GetResults(); r[0].GetJoined() != 1 || r[1].GetRefused() != 1 {
		t.Fatalf("subscribe: %v", res)
	}
	seen := map[string]*corralv1.ServerFrame{}
	for range 2 {
		f := nextRoomFrame(t, c)
		seen[f.GetJoined().GetRoom()+f.GetError().GetRoom()] = f
	}
	if seen["home"].GetJoined() == nil || seen["vip"].GetError().GetCode() != corralv1.Code_CODE_FORBIDDEN {
		t.Fatalf("frames: %v", seen)
	}
	if _, err := d.api.Grant(ctx, &corralv1.GrantRequest{UserId: "eve", Join: []string{"vip"}}); err != nil {
		t.Fatal(err)
	}
	res, err = d.api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "eve", Rooms: []string{"vip"}})
	if err != nil || res.GetResults()[0].GetJoined() != 1 {
		t.Fatalf("subscribe after grant: %v %v", res, err)
	}
}

// TestControlLimits: bad requests of Subscribe, Unsubscribe, Batch and
// Rooms are refused with invalid_argument and do nothing.
func TestControlLimits(t *testing.T) {
	d := start(t, "serve", nil, func(o *server.Options) { o.Core.API.MaxBatch = 10 })
	ctx := testCtx(t)
	c := dial(t, d, "frank", protocol.JSON)
	many := make([]string, 129)
	for i := range many {
		many[i] = fmt.Sprintf("r%d", i)
	}
	items := func(n int) []*corralv1.PublishRequest {
		out := make([]*corralv1.PublishRequest, n)
		for i := range out {
			out[i] = &corralv1.PublishRequest{Room: "x", Payload: payload(i)}
		}
		return out
	}
	for name, call := range map[string]func() error{
		"subscribe no user": func() error {
			_, err := d.api.Subscribe(ctx, &corralv1.SubscribeRequest{Rooms: []string{"a"}})
			return err
		},
		"subscribe no rooms": func() error { _, err := d.api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "frank"}); return err },
		"subscribe 129 rooms": func() error {
			_, err := d.api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "frank", Rooms: many})
			return err
		},
		"subscribe bad room": func() error {
			_, err := d.api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "frank", Rooms: []string{"ok", "bad\x00"}})
			return err
		},
		"subscribe room twice": func() error {
			_, err := d.api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "frank", Rooms: []string{"a", "a"}})
			return err
		},
		"subscribe since another room": func() error {
			_, err := d.api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "frank", Rooms: []string{"a"},
				Since: []*corralv1.RoomPosition{{Room: "b", Seq: 1}}})
			return err
		},
		"unsubscribe long reason": func() error {
			_, err := d.api.Unsubscribe(ctx, &corralv1.UnsubscribeRequest{UserId: "frank", Rooms: []string{"a"}, Reason: strings.Repeat("x", 257)})
			return err
		},
		"batch empty":     func() error { _, err := d.api.Batch(ctx, &corralv1.BatchRequest{}); return err },
		"batch over max":  func() error { _, err := d.api.Batch(ctx, &corralv1.BatchRequest{Publishes: items(11)}); return err },
		"rooms bad token": func() error { _, err := d.api.Rooms(ctx, &corralv1.RoomsRequest{PageToken: "!!"}); return err },
		"rooms bad pattern": func() error {
			_, err := d.api.Rooms(ctx, &corralv1.RoomsRequest{Pattern: "a\x00*"})
			return err
		},
	} {
		if err := call(); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%s: %v, want invalid_argument", name, err)
		}
	}
	// Nothing was joined, nothing published.
	res, err := d.api.Batch(ctx, &corralv1.BatchRequest{Publishes: items(10)})
	if err != nil || res.GetFailed() != 0 || res.GetResults()[0].GetSeq() != 1 {
		t.Fatalf("a batch at the limit: %v %v", res, err)
	}
	select {
	case f := <-c.Frames():
		t.Fatalf("a refused call reached the connection: %v", f)
	default:
	}
}

// TestBatch: 500 items to 50 rooms, each with its own payload, are
// delivered to a member of every room in item order; items for a bad room
// fail alone with invalid_argument, and a room's items after a failed one
// are aborted.
func TestBatch(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("parallel=%v", parallel), func(t *testing.T) {
			d := start(t, "redis", nil, nil)
			ctx := testCtx(t)
			const rooms, perRoom = 50, 10
			room := func(i int) string { return fmt.Sprintf("b%d", i%rooms) }
			member := dial(t, d, "member", protocol.Proto)
			for i := range rooms {
				if _, err := member.Join(ctx, room(i), 0, ""); err != nil {
					t.Fatal(err)
				}
			}
			var items []*corralv1.PublishRequest
			for i := range rooms * perRoom {
				items = append(items, &corralv1.PublishRequest{Room: room(i), Payload: payload(i), IdempotencyKey: fmt.Sprintf("k%d", i)})
			}
			// Bad items: a bad room name; in room b7 a payload too large,
			// which aborts b7's later items.
			items = append(items,
				&corralv1.PublishRequest{Room: "", Payload: payload(-1)},
				&corralv1.PublishRequest{Room: "b7", Payload: make([]byte, 65<<10)},
				&corralv1.PublishRequest{Room: "b7", Payload: payload(-2)})
			res, err := d.api.Batch(ctx, &corralv1.BatchRequest{Publishes: items, Parallel: parallel})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.GetResults()) != len(items) {
				t.Fatalf("%d results for %d items", len(res.GetResults()), len(items))
			}
			last := map[string]uint64{}
			for i, r := range res.GetResults() {
				switch {
				case i < rooms*perRoom:
					if r.GetErrorCode() != "" || r.GetRoom() != room(i) || r.GetSeq() != last[r.GetRoom()]+1 {
						t.Fatalf("item %d: %v (room's last seq %d)", i, r, last[r.GetRoom()])
					}
					last[r.GetRoom()] = r.GetSeq()
				case i == rooms*perRoom:
					if r.GetErrorCode() != "invalid_argument" {
						t.Fatalf("bad room: %v", r)
					}
				case i == rooms*perRoom+1:
					if r.GetErrorCode() != "invalid_argument" || r.GetRoom() != "b7" {
						t.Fatalf("payload too large: %v", r)
					}
				default:
					if r.GetErrorCode() != "aborted" {
						t.Fatalf("item after a failed one of its room: %v", r)
					}
				}
			}
			if res.GetFailed() != 3 {
				t.Fatalf("failed %d, want 3", res.GetFailed())
			}
			// The member gets every room's items in item order.
			next := map[string]int{}
			for n := 0; n < rooms*perRoom; n++ {
				m := nextFrame(t, member, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil }).GetMessage()
				var p struct{ N int }
				if err := json.Unmarshal(m.GetPayload(), &p); err != nil {
					t.Fatal(err)
				}
				r := m.GetRoom()
				idx, err := strconv.Atoi(r[1:])
				if err != nil {
					t.Fatalf("room %q", r)
				}
				if want := next[r]*rooms + idx; p.N != want {
					t.Fatalf("room %s: got item %d, want %d", r, p.N, want)
				}
				next[r]++
			}
		})
	}
}

// TestRooms: Rooms lists the rooms with members by pattern, in name order,
// one page at a time, with member counts and last seq.
func TestRooms(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			a := dial(t, d, "a", protocol.JSON)
			b := dial(t, d, "b", protocol.JSON)
			for i := 1; i <= 5; i++ {
				if _, err := a.Join(ctx, fmt.Sprintf("game:%d", i), 0, ""); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := b.Join(ctx, "game:3", 0, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Join(ctx, "chat", 0, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "game:3", Payload: payload(1)}); err != nil {
				t.Fatal(err)
			}
			var names []string
			tok := ""
			for pages := 0; ; pages++ {
				if pages > 5 {
					t.Fatal("paging does not end")
				}
				res, err := d.api.Rooms(ctx, &corralv1.RoomsRequest{Pattern: "game:*", PageToken: tok, Limit: 2})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.GetRooms()) > 2 {
					t.Fatalf("page of %d rooms, limit 2", len(res.GetRooms()))
				}
				for _, r := range res.GetRooms() {
					names = append(names, r.GetName())
					wantMembers, wantSeq := uint32(1), uint64(0)
					if r.GetName() == "game:3" {
						wantMembers, wantSeq = 2, 1
					}
					if r.GetMembers() != wantMembers || r.GetLastSeq() != wantSeq || r.GetEpoch() == "" {
						t.Fatalf("room %v, want %d members, last seq %d", r, wantMembers, wantSeq)
					}
				}
				if tok = res.GetNextPageToken(); tok == "" {
					break
				}
			}
			if got := strings.Join(names, ","); got != "game:1,game:2,game:3,game:4,game:5" {
				t.Fatalf("rooms %s", got)
			}
			all, err := d.api.Rooms(ctx, &corralv1.RoomsRequest{})
			if err != nil || len(all.GetRooms()) != 6 || all.GetRooms()[0].GetName() != "chat" || all.GetNextPageToken() != "" {
				t.Fatalf("every room: %v %v", all, err)
			}
			// A room whose last member left is not listed.
			b.CloseNow()
			var res *corralv1.RoomsResponse
			if !eventually.Within(10*time.Second, func() bool {
				var err error
				if res, err = d.api.Rooms(ctx, &corralv1.RoomsRequest{Pattern: "chat"}); err != nil {
					t.Fatal(err)
				}
				return len(res.GetRooms()) == 0
			}) {
				t.Fatalf("chat still listed after its member left: %v", res)
			}
		})
	}
}

// TestInfo: Info lists this core, then each edge linked to it, with their
// connections.
func TestInfo(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			a := dial(t, d, "a", protocol.JSON)
			dial(t, d, "b", protocol.Proto)
			if _, err := a.Join(ctx, "lobby", 0, ""); err != nil {
				t.Fatal(err)
			}
			res, err := d.api.Info(ctx, &corralv1.InfoRequest{})
			if err != nil {
				t.Fatal(err)
			}
			nodes := res.GetNodes()
			// The edge holds several links to the core: one node.
			if len(nodes) != 2 {
				t.Fatalf("want the core and its edge, got %v", nodes)
			}
			core := nodes[0]
			if core.GetRole() != "core" || core.GetId() == "" || core.GetVersion() == "" || core.GetConnections() != 2 || core.GetRooms() != 1 {
				t.Fatalf("core: %v", core)
			}
			if e := nodes[1]; e.GetRole() != "edge" || e.GetId() == "" || e.GetVersion() == "" || e.GetConnections() != 2 || e.GetRooms() != 1 {
				t.Fatalf("edge: %v", e)
			}
		})
	}
}

// TestSubscribePresence: a Subscribe with presence counts the user in the
// room's presence, as Join.presence does; an Unsubscribe takes it out.
func TestSubscribePresence(t *testing.T) {
	d := start(t, "serve", nil, nil)
	ctx := testCtx(t)
	c := dial(t, d, "gil", protocol.Proto)
	if _, err := d.api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "gil", Rooms: []string{"plaza"}, Presence: true}); err != nil {
		t.Fatal(err)
	}
	nextRoomFrame(t, c)
	present := func() bool {
		m, err := d.api.Members(ctx, &corralv1.MembersRequest{Room: "plaza"})
		if err != nil {
			t.Fatal(err)
		}
		return len(m.GetPresence()) == 1 && m.GetPresence()[0].GetUserId() == "gil"
	}
	waitUntil(t, "gil present", present)
	if _, err := d.api.Unsubscribe(ctx, &corralv1.UnsubscribeRequest{UserId: "gil", Rooms: []string{"plaza"}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "gil gone", func() bool { return !present() })
}
