package sessions_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/sessions"
)

// rejoinAll runs n clients at once, each creating a session, joining two
// rooms at a position, leaving one, touching and resuming it, and checks
// that every result is what the same calls give one by one.
func rejoinAll(t *testing.T, s sessions.Store, n int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if err := rejoinOne(ctx, s, i); err != nil {
				errs <- fmt.Errorf("client %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func rejoinOne(ctx context.Context, s sessions.Store, i int) error {
	user := "u" + strconv.Itoa(i)
	sess, err := s.Create(ctx, user)
	if err != nil {
		return err
	}
	room, other := "r"+strconv.Itoa(i%7), "x"+strconv.Itoa(i)
	pos := sessions.Position{Seq: uint64(i), Epoch: "e" + strconv.Itoa(i)}
	if err := s.SetRoom(ctx, sess.ID, room, pos); err != nil {
		return err
	}
	if err := s.SetRoom(ctx, sess.ID, other, pos); err != nil {
		return err
	}
	if err := s.DeleteRoom(ctx, sess.ID, other); err != nil {
		return err
	}
	if err := s.Touch(ctx, sess.ID); err != nil {
		return err
	}
	at := sessions.Attempt{Instance: "i" + user, N: 1}
	got, err := s.Resume(ctx, sess.ID, sess.Token, user, at)
	if err != nil {
		return err
	}
	if got.UserID != user || len(got.Rooms) != 1 || got.Rooms[room] != pos || got.Created.UnixMilli() != sess.Created.UnixMilli() {
		return fmt.Errorf("resumed %+v, want user %s in %s at %v", got, user, room, pos)
	}
	if _, err := s.Resume(ctx, sess.ID, got.Token, user, at); !errors.Is(err, sessions.ErrStale) {
		return fmt.Errorf("resume with the same attempt: %v, want ErrStale", err)
	}
	if _, err := s.Resume(ctx, sess.ID, got.Token, "someone", sessions.Attempt{}); !errors.Is(err, sessions.ErrUserMismatch) {
		return fmt.Errorf("resume as another user: %v, want ErrUserMismatch", err)
	}
	if _, err := s.Resume(ctx, sess.ID, "nope", user, sessions.Attempt{}); !errors.Is(err, sessions.ErrTokenMismatch) {
		return fmt.Errorf("resume with a wrong token: %v, want ErrTokenMismatch", err)
	}
	if err := s.Touch(ctx, "gone"+strconv.Itoa(i)); !errors.Is(err, sessions.ErrNotFound) {
		return fmt.Errorf("touch of an unknown session: %v, want ErrNotFound", err)
	}
	return nil
}

func TestRedisConcurrentWrites(t *testing.T) {
	for name, client := range redistest.Topologies() {
		t.Run(name, func(t *testing.T) {
			s := sessions.NewRedis(client(t), sessions.Options{FlushInterval: time.Hour, Prefix: redistest.Prefix(t)})
			t.Cleanup(func() { s.Close() })
			rejoinAll(t, s, 500)
		})
	}
}

// pauseRedis holds every write in Redis with CLIENT PAUSE after one op
// (a Touch of blocker) has gone in flight, so that the ops queued next go
// together in the next batch. It returns the Touch's result channel and
// the function that lets Redis go on.
func pauseRedis(t *testing.T, s *sessions.Redis, admin rueidis.Client, blocker string) (<-chan error, func()) {
	t.Helper()
	ctx := context.Background()
	if err := admin.Do(ctx, admin.B().ClientPause().Timeout(20000).Write().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Touch(ctx, blocker) }()
	waitInFlight(t, s, 1)
	unpaused := false
	unpause := func() {
		if unpaused {
			return
		}
		unpaused = true
		if err := admin.Do(ctx, admin.B().ClientUnpause().Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(unpause)
	return done, unpause
}

func waitInFlight(t *testing.T, s *sessions.Redis, n int64) {
	t.Helper()
	eventually.True(t, 5*time.Second, func() bool { return sessions.InFlight(s) == n }, "%d calls in flight", n)
}

// TestRedisBatchCoalesces checks that the ops queued behind a batch in
// flight go in as few write.lua calls as maxBatch (128) allows, with the
// results they have one by one.
func TestRedisBatchCoalesces(t *testing.T) {
	s, _, addr := newRedis(t, sessions.Options{FlushInterval: time.Hour})
	admin := redistest.Client(t, addr)
	blocker := mustCreate(t, s, "b")
	const n = 300
	all := make([]*sessions.Session, n)
	for i := range all {
		all[i] = mustCreate(t, s, "u"+strconv.Itoa(i))
	}
	done, unpause := pauseRedis(t, s, admin, blocker.ID)
	before := sessions.Batches(s)
	ctx := context.Background()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, sess := range all {
		wg.Go(func() {
			errs[i] = s.SetRoom(ctx, sess.ID, "r", sessions.Position{Seq: uint64(i), Epoch: "e"})
		})
	}
	waitInFlight(t, s, n+1)
	unpause()
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatalf("blocked Touch: %v", err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("SetRoom %d: %v", i, err)
		}
	}
	if got, want := sessions.Batches(s)-before, int64((n+127)/128); got != want {
		t.Fatalf("%d ops queued behind a batch went in %d write.lua calls, want %d", n, got, want)
	}
	for i, sess := range all {
		if got := mustResume(t, s, sess).Rooms["r"]; got.Seq != uint64(i) || got.Epoch != "e" {
			t.Fatalf("session %d in r at %v, want %d", i, got, i)
		}
	}
}

// TestRedisBatchOpError checks that an op that fails in Redis (its key
// holds a string) fails alone: the others in its batch succeed.
func TestRedisBatchOpError(t *testing.T) {
	s, _, addr := newRedis(t, sessions.Options{FlushInterval: time.Hour, Prefix: "operr"})
	admin := redistest.Client(t, addr)
	ctx := context.Background()
	if err := admin.Do(ctx, admin.B().Set().Key("operr:session:bad").Value("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	blocker := mustCreate(t, s, "b")
	a := mustCreate(t, s, "a")
	done, unpause := pauseRedis(t, s, admin, blocker.ID)
	before := sessions.Batches(s)
	var bad, good error
	var resumed *sessions.Session
	var wg sync.WaitGroup
	wg.Go(func() { bad = s.SetRoom(ctx, "bad", "r", sessions.Position{Seq: 1}) })
	wg.Go(func() { good = s.SetRoom(ctx, a.ID, "r", sessions.Position{Seq: 2, Epoch: "e"}) })
	waitInFlight(t, s, 3)
	wg.Go(func() {
		var err error
		if resumed, err = s.Resume(ctx, a.ID, a.Token, "a", sessions.Attempt{}); err != nil {
			t.Errorf("Resume beside a failing op: %v", err)
		}
	})
	waitInFlight(t, s, 4)
	unpause()
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatalf("blocked Touch: %v", err)
	}
	if got := sessions.Batches(s) - before; got != 1 {
		t.Fatalf("three queued ops went in %d write.lua calls, want 1", got)
	}
	if rerr := (*rueidis.RedisError)(nil); !errors.As(bad, &rerr) || !strings.HasPrefix(rerr.Error(), "WRONGTYPE") {
		t.Fatalf("SetRoom on a string key: %v, want WRONGTYPE", bad)
	}
	if good != nil {
		t.Fatalf("SetRoom beside a failing op: %v", good)
	}
	if resumed != nil && resumed.Rooms["r"] != (sessions.Position{Seq: 2, Epoch: "e"}) {
		t.Fatalf("resumed rooms %v", resumed.Rooms)
	}
}

// TestRedisBatchCancel checks that a caller whose ctx ends while its op is
// queued gets ctx.Err() at once, that the op is never written, and that
// the batch goes on for the others.
func TestRedisBatchCancel(t *testing.T) {
	s, _, addr := newRedis(t, sessions.Options{FlushInterval: time.Hour})
	admin := redistest.Client(t, addr)
	ctx := context.Background()
	blocker := mustCreate(t, s, "b")
	a := mustCreate(t, s, "a")
	b := mustCreate(t, s, "b")
	done, unpause := pauseRedis(t, s, admin, blocker.ID)
	cctx, cancel := context.WithCancel(ctx)
	cancelled := make(chan error, 1)
	go func() { cancelled <- s.SetRoom(cctx, a.ID, "r", sessions.Position{Seq: 1}) }()
	other := make(chan error, 1)
	go func() { other <- s.SetRoom(ctx, b.ID, "r", sessions.Position{Seq: 2}) }()
	waitInFlight(t, s, 3)
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled SetRoom: %v, want context.Canceled", err)
	}
	unpause()
	if err := <-done; err != nil {
		t.Fatalf("blocked Touch: %v", err)
	}
	if err := <-other; err != nil {
		t.Fatalf("SetRoom queued beside a cancelled one: %v", err)
	}
	waitInFlight(t, s, 0)
	if got := mustResume(t, s, a).Rooms; len(got) != 0 {
		t.Fatalf("a cancelled SetRoom was written: %v", got)
	}
	if got := mustResume(t, s, b).Rooms["r"]; got.Seq != 2 {
		t.Fatalf("b in r at %v, want 2", got)
	}
}

// TestRedisBatchBusy checks the queue's bound: with MaxInFlight 3, one op
// in flight and two queued, the next fails at once with ErrBusy.
func TestRedisBatchBusy(t *testing.T) {
	s, _, addr := newRedis(t, sessions.Options{MaxInFlight: 3, FlushInterval: time.Hour})
	admin := redistest.Client(t, addr)
	ctx := context.Background()
	a := mustCreate(t, s, "a")
	done, unpause := pauseRedis(t, s, admin, a.ID)
	queued := make(chan error, 2)
	for range 2 {
		go func() { queued <- s.Touch(ctx, a.ID) }()
	}
	waitInFlight(t, s, 3)
	if err := s.SetRoom(ctx, a.ID, "r", sessions.Position{}); !errors.Is(err, sessions.ErrBusy) {
		t.Fatalf("SetRoom past the bound: %v, want ErrBusy", err)
	}
	unpause()
	for range 2 {
		if err := <-queued; err != nil {
			t.Fatalf("queued Touch: %v", err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("blocked Touch: %v", err)
	}
	if err := s.SetRoom(ctx, a.ID, "r", sessions.Position{}); err != nil {
		t.Fatalf("SetRoom after the queue drained: %v", err)
	}
}

// TestRedisSetRoomsOneCall: SetRooms writes a session's rooms with one
// write.lua call (a resume's positions cost one round trip, not one per
// room), and a session in more rooms than one op carries (1,024) with one
// call per 1,024, every room stored.
func TestRedisSetRoomsOneCall(t *testing.T) {
	s, _, _ := newRedis(t, sessions.Options{FlushInterval: time.Hour, Prefix: "setrooms"})
	ctx := context.Background()
	for _, tc := range []struct {
		rooms int
		calls int64
	}{{1, 1}, {5, 1}, {1024, 1}, {2500, 3}} {
		a := mustCreate(t, s, "a")
		rooms := make(map[string]sessions.Position, tc.rooms)
		for i := range tc.rooms {
			rooms["room"+strconv.Itoa(i)] = sessions.Position{Seq: uint64(i), Epoch: "e" + strconv.Itoa(i%3)}
		}
		before := sessions.Batches(s)
		if err := s.SetRooms(ctx, a.ID, rooms); err != nil {
			t.Fatalf("%d rooms: %v", tc.rooms, err)
		}
		if got := sessions.Batches(s) - before; got != tc.calls {
			t.Errorf("%d rooms went in %d write.lua calls, want %d", tc.rooms, got, tc.calls)
		}
		got := mustResume(t, s, a).Rooms
		if len(got) != len(rooms) {
			t.Fatalf("%d rooms: %d stored", tc.rooms, len(got))
		}
		for room, pos := range rooms {
			if got[room] != pos {
				t.Fatalf("%d rooms: %s stored at %v, want %v", tc.rooms, room, got[room], pos)
			}
		}
	}
}
