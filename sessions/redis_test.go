package sessions_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/sessions"
)

func TestRedis(t *testing.T) {
	client := redistest.Client(t, redistest.Start(t))
	testStore(t, func(t *testing.T, opts sessions.Options) sessions.Store {
		opts.Prefix = redistest.Prefix(t)
		s := sessions.NewRedis(client, opts)
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestRedisCluster runs the store suite on a 3-node Redis Cluster: every
// command names one session's key (or is split by slot by the client).
func TestRedisCluster(t *testing.T) {
	client := redistest.StartCluster(t).Client(t)
	testStore(t, func(t *testing.T, opts sessions.Options) sessions.Store {
		opts.Prefix = redistest.Prefix(t)
		s := sessions.NewRedis(client, opts)
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func newRedis(t *testing.T, opts sessions.Options) (*sessions.Redis, rueidis.Client, string) {
	t.Helper()
	addr := redistest.Start(t)
	client := redistest.Client(t, addr)
	if opts.Prefix == "" {
		opts.Prefix = redistest.Prefix(t)
	}
	s := sessions.NewRedis(client, opts)
	t.Cleanup(func() { s.Close() })
	return s, client, addr
}

func TestRedisTTL(t *testing.T) {
	s, client, _ := newRedis(t, sessions.Options{TTL: time.Second, Prefix: "ttl"})
	ctx := context.Background()
	pttl := func(id string) time.Duration {
		t.Helper()
		ms, err := client.Do(ctx, client.B().Pttl().Key("ttl:session:"+id).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(ms) * time.Millisecond
	}
	// Each step waits for the TTL to run down a little, then sees Touch
	// and Resume raise it, and at last for both keys to expire.
	ranDown := func(id string) func() bool {
		return func() bool { return pttl(id) < 800*time.Millisecond }
	}
	a := mustCreate(t, s, "u")
	b := mustCreate(t, s, "u")
	eventually.True(t, 5*time.Second, ranDown(a.ID), "the TTL of a to run down")
	before := pttl(a.ID)
	if err := s.Touch(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if d := pttl(a.ID); d <= before {
		t.Fatalf("Touch left the TTL at %v (was %v)", d, before)
	}
	eventually.True(t, 5*time.Second, ranDown(a.ID), "the TTL of a to run down")
	before = pttl(a.ID)
	mustResume(t, s, a)
	if d := pttl(a.ID); d <= before {
		t.Fatalf("Resume left the TTL at %v (was %v)", d, before)
	}
	eventually.True(t, 5*time.Second, func() bool {
		n, err := client.Do(ctx, client.B().Exists().Key("ttl:session:"+a.ID, "ttl:session:"+b.ID).Build()).AsInt64()
		return err == nil && n == 0
	}, "both sessions to expire in Redis")
	for _, sess := range []*sessions.Session{a, b} {
		if _, err := s.Resume(ctx, sess.ID, sess.Token, sess.UserID, sessions.Attempt{}); !errors.Is(err, sessions.ErrNotFound) {
			t.Fatalf("Resume of an expired session: %v", err)
		}
		if err := s.Touch(ctx, sess.ID); !errors.Is(err, sessions.ErrNotFound) {
			t.Fatalf("Touch of an expired session: %v", err)
		}
	}
}

// TestRedisAckWrites checks that acks are coalesced: one write per session
// per flush, whatever the number of acks and rooms.
func TestRedisAckWrites(t *testing.T) {
	s, _, _ := newRedis(t, sessions.Options{FlushInterval: time.Hour})
	ctx := context.Background()
	var all []*sessions.Session
	for range 3 {
		sess := mustCreate(t, s, "u")
		for _, room := range []string{"a", "b"} {
			if err := s.SetRoom(ctx, sess.ID, room, sessions.Position{Epoch: "e"}); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, sess)
	}
	before := sessions.AckWrites(s)
	for seq := range uint64(1000) {
		for _, sess := range all {
			for _, room := range []string{"a", "b"} {
				if err := s.Ack(ctx, sess.ID, room, seq+1); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sessions.AckWrites(s) - before; got != int64(len(all)) {
		t.Fatalf("%d writes for 6000 acks in %d sessions, want %d", got, len(all), len(all))
	}
	for _, sess := range all {
		if got := mustResume(t, s, sess).Rooms; got["a"].Seq != 1000 || got["b"].Seq != 1000 {
			t.Fatalf("rooms %v", got)
		}
	}
	if err := s.Flush(ctx); err != nil || sessions.AckWrites(s)-before != int64(len(all)) {
		t.Fatalf("an empty flush wrote: %v", err)
	}
}

func TestRedisBackgroundFlush(t *testing.T) {
	s, _, _ := newRedis(t, sessions.Options{FlushInterval: 10 * time.Millisecond})
	ctx := context.Background()
	a := mustCreate(t, s, "u")
	if err := s.SetRoom(ctx, a.ID, "r", sessions.Position{Epoch: "e"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(ctx, a.ID, "r", 7); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 5*time.Second, func() bool { return mustResume(t, s, a).Rooms["r"].Seq == 7 }, "the ack to be flushed")
}

func TestRedisCloseFlushes(t *testing.T) {
	addr := redistest.Start(t)
	client := redistest.Client(t, addr)
	opts := sessions.Options{FlushInterval: time.Hour, Prefix: redistest.Prefix(t)}
	s := sessions.NewRedis(client, opts)
	ctx := context.Background()
	a := mustCreate(t, s, "u")
	if err := s.SetRoom(ctx, a.ID, "r", sessions.Position{Epoch: "e"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(ctx, a.ID, "r", 9); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Create(ctx, "u"); err == nil {
		t.Fatal("Create after Close succeeded")
	}
	other := sessions.NewRedis(client, opts)
	defer other.Close()
	if got := mustResume(t, other, a).Rooms["r"]; got.Seq != 9 {
		t.Fatalf("after Close the position is %v, want 9", got)
	}
}

// TestRedisTokenNotStored checks that Redis holds a hash of the token only.
func TestRedisTokenNotStored(t *testing.T) {
	s, client, _ := newRedis(t, sessions.Options{Prefix: "tok"})
	a := mustCreate(t, s, "u")
	fields, err := client.Do(context.Background(), client.B().Hgetall().Key("tok:session:"+a.ID).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	if len(fields) == 0 {
		t.Fatal("no session hash")
	}
	for f, v := range fields {
		if v == a.Token {
			t.Fatalf("field %q holds the token", f)
		}
	}
}

// TestRedisBusy blocks one call inside Redis (CLIENT PAUSE) with
// MaxInFlight 1: the next call fails at once with ErrBusy.
func TestRedisBusy(t *testing.T) {
	s, _, addr := newRedis(t, sessions.Options{MaxInFlight: 1})
	admin := redistest.Client(t, addr)
	ctx := context.Background()
	a := mustCreate(t, s, "u")
	if err := admin.Do(ctx, admin.B().ClientPause().Timeout(10000).Write().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Touch(ctx, a.ID) }()
	eventually.True(t, 5*time.Second, func() bool { return sessions.InFlight(s) == 1 }, "Touch to go in flight")
	start := time.Now()
	if _, err := s.Create(ctx, "u"); !errors.Is(err, sessions.ErrBusy) {
		t.Fatalf("Create past the bound: %v, want ErrBusy", err)
	}
	if _, err := s.Resume(ctx, a.ID, a.Token, a.UserID, sessions.Attempt{}); !errors.Is(err, sessions.ErrBusy) {
		t.Fatalf("Resume past the bound: %v, want ErrBusy", err)
	}
	if err := s.SetRoom(ctx, a.ID, "r", sessions.Position{}); !errors.Is(err, sessions.ErrBusy) {
		t.Fatalf("SetRoom past the bound: %v, want ErrBusy", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("ErrBusy took %v", d)
	}
	if err := admin.Do(ctx, admin.B().ClientUnpause().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("blocked Touch: %v", err)
	}
	mustResume(t, s, a)
}

// TestRedisTouchLater checks that a buffered touch is written by the next
// Flush (as one PEXPIRE beside the acks), never creates a session, and is
// forgotten by Delete.
func TestRedisTouchLater(t *testing.T) {
	for name, open := range redistest.Topologies() {
		t.Run(name, func(t *testing.T) {
			client := open(t)
			prefix := redistest.Prefix(t)
			s := sessions.NewRedis(client, sessions.Options{TTL: time.Minute, FlushInterval: time.Hour, Prefix: prefix})
			t.Cleanup(func() { s.Close() })
			ctx := context.Background()
			key := func(id string) string { return prefix + ":session:" + id }
			pttl := func(id string) time.Duration {
				t.Helper()
				ms, err := client.Do(ctx, client.B().Pttl().Key(key(id)).Build()).AsInt64()
				if err != nil {
					t.Fatal(err)
				}
				return time.Duration(ms) * time.Millisecond
			}
			shorten := func(id string) {
				t.Helper()
				if err := client.Do(ctx, client.B().Pexpire().Key(key(id)).Milliseconds(1000).Build()).Error(); err != nil {
					t.Fatal(err)
				}
			}
			a, b := mustCreate(t, s, "u"), mustCreate(t, s, "u")
			shorten(a.ID)
			shorten(b.ID)
			s.TouchLater(a.ID)
			s.TouchLater(b.ID)
			s.TouchLater("no-such-session")
			if err := s.Delete(ctx, b.ID); err != nil {
				t.Fatal(err)
			}
			if d := pttl(a.ID); d > time.Second {
				t.Fatalf("TTL %v before the flush: the touch was not buffered", d)
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if d := pttl(a.ID); d < 50*time.Second {
				t.Fatalf("TTL %v after the flush, want about a minute", d)
			}
			for _, id := range []string{b.ID, "no-such-session"} {
				if n, err := client.Do(ctx, client.B().Exists().Key(key(id)).Build()).AsInt64(); err != nil || n != 0 {
					t.Fatalf("session %s exists after a buffered touch (%d, %v)", id, n, err)
				}
			}
		})
	}
}
