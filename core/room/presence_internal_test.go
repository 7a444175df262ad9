package room

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corral-rt/corral/core/linkserver"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/presence"
)

// TestPresenceViewApply: a loaded view applies changes in version order,
// ignores old ones, and turns a gap into a reload instead of a wrong view.
func TestPresenceViewApply(t *testing.T) {
	f := newFixture(t)
	r := New("r", f.opts)
	v := r.Presence()
	r.mu.Lock()
	v.initLocked()
	v.loaded = true
	r.mu.Unlock()

	change := func(kind presence.Kind, version uint64, user string) {
		v.Change(presence.Change{Room: "r", Kind: kind, Version: version, Member: presence.Member{User: user, Conns: 1}})
	}
	change(presence.Joined, 1, "a")
	change(presence.Joined, 2, "b")
	change(presence.Joined, 2, "c") // an old version: ignored
	change(presence.Left, 3, "a")
	members, ok := v.List()
	if !ok || len(members) != 1 || members[0].User != "b" {
		t.Fatalf("view lists %v, want [b]", members)
	}
	change(presence.Joined, 5, "d") // version 4 missed: reload, not apply
	r.mu.Lock()
	_, applied := v.now["d"]
	reloading := v.loading || v.version != 3
	r.mu.Unlock()
	if applied || !reloading {
		t.Fatalf("a change after a gap was applied (%v) or no reload began (%v)", applied, reloading)
	}
}

// TestPresenceLeaveEndsSubscription: two members subscribed to a room's
// presence each get a snapshot at the next flush; once one leaves, the
// next change goes to the other member's link only, with no frame left
// for the one that left (the room ends its subscription in removeLocked,
// under the same lock as the leave).
func TestPresenceLeaveEndsSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFixture(t)
		var r *testRoom
		store := presence.NewMemory(presence.Options{OnChange: func(ch presence.Change) { r.Presence().Change(ch) }})
		f.opts.PresenceList = store.List
		r = f.loaded(t, "r")
		la, lb := fakeLink(), fakeLink()
		a, b := &member{id: "a"}, &member{id: "b"}
		for _, m := range []struct {
			m  *member
			ep Endpoint
		}{{a, Endpoint{Link: la, Conn: 1}}, {b, Endpoint{Link: lb, Conn: 2}}} {
			j := &Join{}
			if !r.BeginJoin(m.m, m.ep, j) {
				t.Fatal("join refused")
			}
			if _, live := r.GoLive(m.m, m.ep, j, &joinHooks{}); !live {
				t.Fatal("not live")
			}
		}
		if err := store.Add(ctx, "r", "ua", nil, nil); err != nil {
			t.Fatal(err)
		}
		r.Presence().EnsureLoaded(ctx)
		r.Presence().Subscribe(a)
		r.Presence().Subscribe(b)
		time.Sleep(f.opts.PresenceTick)
		synctest.Wait()
		for name, l := range map[string]*linkserver.Link{"a": la, "b": lb} {
			if n := presenceFrames(l); n != 1 {
				t.Fatalf("member %s got %d presence frames at the first flush, want its snapshot", name, n)
			}
		}

		if !r.Leave(b, nil) {
			t.Fatal("b was not in the room")
		}
		lb.Take(1<<20, 1<<30)
		if err := store.Add(ctx, "r", "ub", nil, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(f.opts.PresenceTick)
		synctest.Wait()
		if n := presenceFrames(la); n != 1 {
			t.Fatalf("the member still there got %d presence frames of the join, want 1", n)
		}
		if n, _, _ := lb.Backlog(); n != 0 {
			t.Fatalf("the member that left has %d frames queued after its leave, want none", n)
		}
		r.mu.Lock()
		subs, links := len(r.pres.subs), len(r.pres.links)
		r.mu.Unlock()
		if subs != 1 || links != 1 {
			t.Fatalf("after the leave: %d subscribers on %d links, want 1 on 1", subs, links)
		}
	})
}

// presenceFrames counts the Presence frames queued on l (to the room's
// links, or to one connection) and takes everything queued.
func presenceFrames(l *linkserver.Link) int {
	n := 0
	for _, f := range l.Take(1<<20, 1<<30) {
		var sf *corralv1.ServerFrame
		switch k := f.GetKind().(type) {
		case *linkv1.CoreFrame_Presence:
			sf = k.Presence.GetFrame()
		case *linkv1.CoreFrame_Conn:
			sf = k.Conn.GetFrame()
		}
		if sf.GetPresence() != nil {
			n++
		}
	}
	return n
}
