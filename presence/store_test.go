package presence_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/pubsub"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/presence"
	"github.com/redis/rueidis"
)

// recorder collects changes.
type recorder struct {
	mu  sync.Mutex
	chs []presence.Change
}

func (r *recorder) add(ch presence.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.chs = append(r.chs, ch)
}

// waitUser waits for a change of kind for user and returns every change
// recorded until then.
func (r *recorder) waitUser(t *testing.T, user string, kind presence.Kind) []presence.Change {
	t.Helper()
	var got []presence.Change
	if !eventually.Within(10*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		got = append([]presence.Change(nil), r.chs...)
		return slices.ContainsFunc(got, func(ch presence.Change) bool { return ch.Member.User == user && ch.Kind == kind })
	}) {
		t.Fatalf("no %v of %s among %+v", kind, user, got)
	}
	return got
}

func (r *recorder) wait(t *testing.T, n int) []presence.Change {
	t.Helper()
	var got []presence.Change
	if !eventually.Within(10*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		got = append([]presence.Change(nil), r.chs...)
		return len(got) >= n
	}) {
		t.Fatalf("got %d changes, want %d: %+v", len(got), n, got)
	}
	return got
}

func redisClient(t *testing.T) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Start(t)}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// clients returns a client of each kind of Redis deployment: one server,
// and a 3-node Redis Cluster.
func clients(t *testing.T) map[string]rueidis.Client {
	return map[string]rueidis.Client{
		"redis":   redisClient(t),
		"cluster": redistest.StartCluster(t).Client(t),
	}
}

// stores returns a fresh store of each kind with its recorders.
func stores(t *testing.T) map[string]func(onChange, onCommit *recorder) presence.Store {
	cluster := redistest.StartCluster(t).Client(t)
	return map[string]func(onChange, onCommit *recorder) presence.Store{
		"memory": func(onChange, onCommit *recorder) presence.Store {
			return presence.NewMemory(presence.Options{OnChange: onChange.add, OnCommit: onCommit.add})
		},
		"redis": func(onChange, onCommit *recorder) presence.Store {
			return newRedisStore(t, redisClient(t), onChange, onCommit)
		},
		"cluster": func(onChange, onCommit *recorder) presence.Store {
			return newRedisStore(t, cluster, onChange, onCommit)
		},
	}
}

func newRedisStore(t *testing.T, client rueidis.Client, onChange, onCommit *recorder) presence.Store {
	s, err := presence.NewRedis(context.Background(), client, presence.RedisOptions{
		Options: presence.Options{OnChange: onChange.add, OnCommit: onCommit.add},
		Prefix:  redistest.Prefix(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestStoreCounts: connections of one user are one member; joined on the
// first, left on the last, updated in between; versions are consecutive.
func TestStoreCounts(t *testing.T) {
	for name, mk := range stores(t) {
		t.Run(name, func(t *testing.T) {
			var changes, commits recorder
			s := mk(&changes, &commits)
			ctx := context.Background()
			if err := s.Watch(ctx, "r"); err != nil {
				t.Fatal(err)
			}
			steps := []func() error{
				func() error { return s.Add(ctx, "r", "alice", []byte(`{"c":"red"}`), nil) },
				func() error { return s.Add(ctx, "r", "alice", nil, nil) },
				func() error { return s.SetState(ctx, "r", "alice", []byte(`{"c":"blue"}`)) },
				func() error { return s.SetState(ctx, "r", "alice", []byte(`{"c":"blue"}`)) }, // no change
				func() error { return s.Remove(ctx, "r", "alice") },
				func() error { return s.Remove(ctx, "r", "alice") },
				func() error { return s.Remove(ctx, "r", "alice") }, // nothing left: no change
			}
			for i, step := range steps {
				if err := step(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			// zed comes and goes last: its two changes come after a
			// change too many of alice's would have.
			if err := s.Add(ctx, "r", "zed", nil, nil); err != nil {
				t.Fatal(err)
			}
			if err := s.Remove(ctx, "r", "zed"); err != nil {
				t.Fatal(err)
			}
			want := []struct {
				kind  presence.Kind
				conns int
				state string
			}{
				{presence.Joined, 1, `{"c":"red"}`},
				{presence.Updated, 2, `{"c":"red"}`},
				{presence.Updated, 2, `{"c":"blue"}`},
				{presence.Updated, 1, `{"c":"blue"}`},
				{presence.Left, 0, `{"c":"blue"}`},
			}
			for _, rec := range []*recorder{&changes, &commits} {
				all := rec.waitUser(t, "zed", presence.Left)
				if len(all) != len(want)+2 {
					t.Fatalf("%d changes, want %d and zed's two: %+v", len(all), len(want), all)
				}
				got := all[:len(want)]
				for i, w := range want {
					g := got[i]
					if g.Kind != w.kind || g.Member.Conns != w.conns || string(g.Member.State) != w.state || g.Member.User != "alice" {
						t.Fatalf("change %d: %+v, want %+v", i, g, w)
					}
					if i > 0 && g.Version != got[i-1].Version+1 {
						t.Fatalf("change %d: version %d after %d", i, g.Version, got[i-1].Version)
					}
				}
			}
			snap, err := s.List(ctx, "r")
			if err != nil || len(snap.Members) != 0 {
				t.Fatalf("list after all left: %+v %v", snap, err)
			}
		})
	}
}

// TestStoreList lists members ordered by user with state and counts.
func TestStoreList(t *testing.T) {
	for name, mk := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(&recorder{}, &recorder{})
			ctx := context.Background()
			for _, u := range []string{"carol", "alice", "bob", "alice"} {
				if err := s.Add(ctx, "r", u, []byte(`"`+u+`"`), nil); err != nil {
					t.Fatal(err)
				}
			}
			snap, err := s.List(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			if snap.Version != 4 || len(snap.Members) != 3 {
				t.Fatalf("snapshot %+v", snap)
			}
			for i, w := range []struct {
				user  string
				conns int
			}{{"alice", 2}, {"bob", 1}, {"carol", 1}} {
				m := snap.Members[i]
				if m.User != w.user || m.Conns != w.conns || string(m.State) != `"`+w.user+`"` {
					t.Fatalf("member %d: %+v", i, m)
				}
			}
		})
	}
}

// TestRedisSweepDeadCore: the connections of a core that stops
// heartbeating are removed by another core's sweep; each member it alone
// held leaves once, whoever sweeps and however often.
func TestRedisSweepDeadCore(t *testing.T) {
	for name, client := range clients(t) {
		t.Run(name, func(t *testing.T) { testSweepDeadCore(t, client) })
	}
}

func testSweepDeadCore(t *testing.T, client rueidis.Client) {
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	var aCommits, bCommits, bChanges recorder
	opts := func(commits, changes *recorder) presence.RedisOptions {
		return presence.RedisOptions{
			Options:   presence.Options{OnCommit: commits.add, OnChange: changes.add},
			Prefix:    prefix,
			Heartbeat: 50 * time.Millisecond,
			DeadAfter: 300 * time.Millisecond,
		}
	}
	a, err := presence.NewRedis(ctx, client, opts(&aCommits, &recorder{}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := presence.NewRedis(ctx, client, opts(&bCommits, &bChanges))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Watch(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "alice", "bob"} {
		if err := a.Add(ctx, "r", u, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Add(ctx, "r", "bob", nil, nil); err != nil {
		t.Fatal(err)
	}
	a.Close() // a crash, for presence: no removals, no heartbeat
	// alice leaves; bob stays with b's connection. wait bounds the sweep.
	got := bChanges.wait(t, 6)
	tail := got[4:]
	left, updated := 0, 0
	for _, ch := range tail {
		switch {
		case ch.Kind == presence.Left && ch.Member.User == "alice":
			left++
		case ch.Kind == presence.Updated && ch.Member.User == "bob" && ch.Member.Conns == 1:
			updated++
		}
	}
	if left != 1 || updated != 1 {
		t.Fatalf("sweep changes %+v", tail)
	}
	// Sweeping again finds nothing.
	if err := b.Sweep(ctx, a.CoreID()); err != nil {
		t.Fatal(err)
	}
	// zed comes and goes after the sweep: its commits follow any the
	// second sweep would have made.
	if err := b.Add(ctx, "r", "zed", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(ctx, "r", "zed"); err != nil {
		t.Fatal(err)
	}
	if n := len(bCommits.waitUser(t, "zed", presence.Left)) - 2; n != 3 { // b's add + the sweep's two
		t.Fatalf("b committed %d changes, want 3", n)
	}
	snap, err := b.List(ctx, "r")
	if err != nil || len(snap.Members) != 1 || snap.Members[0].User != "bob" {
		t.Fatalf("after sweep: %+v %v", snap, err)
	}
}

// TestRedisClusterSlotMove: a watched room's slot moves to another node;
// the store says so (a Change with only the room: read it again) and
// delivers the room's changes from the new node.
func TestRedisClusterSlotMove(t *testing.T) {
	cluster := redistest.StartCluster(t)
	ctx := context.Background()
	var changes recorder
	s, err := presence.NewRedis(ctx, cluster.Client(t), presence.RedisOptions{
		Options: presence.Options{OnChange: changes.add},
		Prefix:  redistest.Prefix(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	room := cluster.NameOn(0, "r")
	if err := s.Watch(ctx, room); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, room, "alice", nil, nil); err != nil {
		t.Fatal(err)
	}
	changes.wait(t, 1)
	cluster.MoveSlot(t, pubsub.Slot(room), 1)
	got := changes.wait(t, 2)
	if ch := got[1]; ch.Room != room || ch.Kind != 0 {
		t.Fatalf("after the move: %+v, want a read-again signal", ch)
	}
	if err := s.Add(ctx, room, "bob", nil, nil); err != nil {
		t.Fatal(err)
	}
	got = changes.wait(t, 3)
	if ch := got[2]; ch.Kind != presence.Joined || ch.Member.User != "bob" {
		t.Fatalf("change after the move: %+v", ch)
	}
}

// TestStoreInfo: a member's info is set by Add, kept by an Add without
// info and by SetState, carried in changes and lists, and gone with the
// member; members added without info have none.
func TestStoreInfo(t *testing.T) {
	for name, mk := range stores(t) {
		t.Run(name, func(t *testing.T) {
			var changes, commits recorder
			s := mk(&changes, &commits)
			ctx := context.Background()
			if err := s.Watch(ctx, "r"); err != nil {
				t.Fatal(err)
			}
			steps := []func() error{
				func() error { return s.Add(ctx, "r", "alice", []byte(`"s"`), []byte(`{"name":"Alice"}`)) },
				func() error { return s.Add(ctx, "r", "alice", nil, nil) },
				func() error { return s.SetState(ctx, "r", "alice", []byte(`"t"`)) },
				func() error { return s.Add(ctx, "r", "bob", nil, nil) },
				func() error { return s.Add(ctx, "r", "alice", nil, []byte(`{"name":"Al"}`)) },
			}
			for i, step := range steps {
				if err := step(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			// zed comes and goes last: its two changes come after a
			// change too many of alice's would have.
			if err := s.Add(ctx, "r", "zed", nil, nil); err != nil {
				t.Fatal(err)
			}
			if err := s.Remove(ctx, "r", "zed"); err != nil {
				t.Fatal(err)
			}
			want := []struct{ user, info string }{
				{"alice", `{"name":"Alice"}`}, {"alice", `{"name":"Alice"}`}, {"alice", `{"name":"Alice"}`},
				{"bob", ""}, {"alice", `{"name":"Al"}`},
			}
			for _, rec := range []*recorder{&changes, &commits} {
				got := rec.wait(t, len(want))
				for i, w := range want {
					if got[i].Member.User != w.user || string(got[i].Member.Info) != w.info {
						t.Fatalf("change %d: %s %q, want %s %q", i, got[i].Member.User, got[i].Member.Info, w.user, w.info)
					}
				}
			}
			snap, err := s.List(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Members) != 2 || string(snap.Members[0].Info) != `{"name":"Al"}` || snap.Members[0].Conns != 3 ||
				string(snap.Members[0].State) != `"t"` || snap.Members[1].Info != nil {
				t.Fatalf("list: %+v", snap.Members)
			}
			for range 3 {
				if err := s.Remove(ctx, "r", "alice"); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Add(ctx, "r", "alice", nil, nil); err != nil {
				t.Fatal(err)
			}
			snap, err = s.List(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range snap.Members {
				if m.Info != nil {
					t.Fatalf("info outlived the member: %+v", snap.Members)
				}
			}
		})
	}
}
