package sessions_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/corral-rt/corral/sessions"
)

// newStoreFunc returns an empty store, closed when the test ends.
type newStoreFunc func(t *testing.T, opts sessions.Options) sessions.Store

// testStore runs the conformance suite every Store passes.
func testStore(t *testing.T, newStore newStoreFunc) {
	tests := map[string]func(*testing.T, sessions.Store){
		"CreateResume":                testCreateResume,
		"TokenMismatch":               testTokenMismatch,
		"StaleAttempt":                testStaleAttempt,
		"NotFound":                    testNotFound,
		"Rooms":                       testRooms,
		"SetRooms":                    testSetRooms,
		"AckCoalescing":               testAckCoalescing,
		"AckAfterLeave":               testAckAfterLeave,
		"ConcurrentAck":               testConcurrentAck,
		"Delete":                      testDelete,
		"Rotation":                    testRotation,
		"RefusedResumeChangesNothing": testRefusedResumeChangesNothing,
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			// A long interval: only explicit Flush calls write.
			fn(t, newStore(t, sessions.Options{FlushInterval: time.Hour}))
		})
	}
}

var urlSafe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func mustCreate(t *testing.T, s sessions.Store, user string) *sessions.Session {
	t.Helper()
	sess, err := s.Create(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

func mustResume(t *testing.T, s sessions.Store, sess *sessions.Session) *sessions.Session {
	t.Helper()
	got, err := s.Resume(context.Background(), sess.ID, sess.Token, sess.UserID, sessions.Attempt{})
	if err != nil {
		t.Fatal(err)
	}
	sess.Token = got.Token // rotated: the old one no longer resumes
	return got
}

func testCreateResume(t *testing.T, s sessions.Store) {
	a := mustCreate(t, s, "u1")
	b := mustCreate(t, s, "u1")
	if len(a.ID) < 22 || len(a.Token) < 43 || !urlSafe.MatchString(a.ID) || !urlSafe.MatchString(a.Token) {
		t.Fatalf("id %q, token %q: want URL-safe, 128 and 256 bits", a.ID, a.Token)
	}
	if a.ID == b.ID || a.Token == b.Token {
		t.Fatal("two sessions share id or token")
	}
	if a.UserID != "u1" || len(a.Rooms) != 0 || time.Since(a.Created) > time.Minute {
		t.Fatalf("created %+v", a)
	}
	old := a.Token
	got := mustResume(t, s, a)
	if got.ID != a.ID || got.Token == old || !urlSafe.MatchString(got.Token) || got.UserID != "u1" || len(got.Rooms) != 0 ||
		got.Created.UnixMilli() != a.Created.UnixMilli() {
		t.Fatalf("resumed %+v, created %+v", got, a)
	}
}

func testTokenMismatch(t *testing.T, s sessions.Store) {
	a := mustCreate(t, s, "u1")
	b := mustCreate(t, s, "u2")
	for name, token := range map[string]string{
		"empty":          "",
		"other session":  b.Token,
		"one char short": a.Token[:len(a.Token)-1],
	} {
		if _, err := s.Resume(context.Background(), a.ID, token, a.UserID, sessions.Attempt{}); !errors.Is(err, sessions.ErrTokenMismatch) {
			t.Errorf("%s: Resume = %v, want ErrTokenMismatch", name, err)
		}
	}
}

// testStaleAttempt: an attempt of the instance that last resumed the
// session resumes only when it is newer; another instance, or an unordered
// attempt, always resumes (a reloaded page is a new instance).
func testStaleAttempt(t *testing.T, s sessions.Store) {
	ctx := context.Background()
	a := mustCreate(t, s, "u1")
	resume := func(at sessions.Attempt) error {
		got, err := s.Resume(ctx, a.ID, a.Token, a.UserID, at)
		if err == nil {
			a.Token = got.Token
		}
		return err
	}
	steps := []struct {
		at    sessions.Attempt
		stale bool
	}{
		{sessions.Attempt{Instance: "i1", N: 2}, false},
		{sessions.Attempt{Instance: "i1", N: 1}, true}, // gave up, arrived late
		{sessions.Attempt{Instance: "i1", N: 2}, true}, // the same attempt twice
		{sessions.Attempt{Instance: "i1", N: 3}, false},
		{sessions.Attempt{}, false},                    // unordered: no check, no record
		{sessions.Attempt{Instance: "i1", N: 3}, true}, // i1's record survives it
		{sessions.Attempt{Instance: "i2", N: 1}, false},
		{sessions.Attempt{Instance: "i1", N: 4}, false}, // the record is now i2's
		{sessions.Attempt{Instance: "i1", N: 1}, true},
	}
	for i, st := range steps {
		err := resume(st.at)
		if st.stale != errors.Is(err, sessions.ErrStale) || (!st.stale && err != nil) {
			t.Fatalf("step %d: Resume(%+v) = %v, stale want %v", i, st.at, err, st.stale)
		}
	}
	// A wrong token is refused as such and records nothing.
	if _, err := s.Resume(ctx, a.ID, "guess", a.UserID, sessions.Attempt{Instance: "i1", N: 100}); !errors.Is(err, sessions.ErrTokenMismatch) {
		t.Fatalf("wrong token: %v", err)
	}
	if err := resume(sessions.Attempt{Instance: "i1", N: 5}); err != nil {
		t.Fatalf("after a refused guess: %v", err)
	}
}

func testNotFound(t *testing.T, s sessions.Store) {
	ctx := context.Background()
	a := mustCreate(t, s, "u1")
	tests := map[string]func() error{
		"resume":      func() error { _, err := s.Resume(ctx, "nope", a.Token, a.UserID, sessions.Attempt{}); return err },
		"resume ''":   func() error { _, err := s.Resume(ctx, "", a.Token, a.UserID, sessions.Attempt{}); return err },
		"touch":       func() error { return s.Touch(ctx, "nope") },
		"set room":    func() error { return s.SetRoom(ctx, "nope", "r", sessions.Position{Seq: 1, Epoch: "e"}) },
		"delete room": func() error { return s.DeleteRoom(ctx, "nope", "r") },
		"set rooms": func() error {
			return s.SetRooms(ctx, "nope", map[string]sessions.Position{"r": {Seq: 1, Epoch: "e"}})
		},
	}
	for name, call := range tests {
		if err := call(); !errors.Is(err, sessions.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	if err := s.Delete(ctx, "nope"); err != nil {
		t.Errorf("Delete of an unknown session: %v", err)
	}
	if err := s.Ack(ctx, "nope", "r", 1); err != nil {
		t.Errorf("Ack of an unknown session: %v", err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Errorf("Flush: %v", err)
	}
}

// mustOK fails the test at once on err.
func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testRooms(t *testing.T, s sessions.Store) {
	ctx := context.Background()
	a := mustCreate(t, s, "u1")
	mustOK(t, s.SetRoom(ctx, a.ID, "a", sessions.Position{Seq: 5, Epoch: "e1"}))
	mustOK(t, s.SetRoom(ctx, a.ID, "b:with:colons", sessions.Position{Epoch: "e2"}))
	got := mustResume(t, s, a).Rooms
	if len(got) != 2 || got["a"] != (sessions.Position{Seq: 5, Epoch: "e1"}) || got["b:with:colons"] != (sessions.Position{Epoch: "e2"}) {
		t.Fatalf("rooms %v", got)
	}
	mustOK(t, s.SetRoom(ctx, a.ID, "a", sessions.Position{Seq: 2, Epoch: "e3"}))
	mustOK(t, s.DeleteRoom(ctx, a.ID, "b:with:colons"))
	mustOK(t, s.DeleteRoom(ctx, a.ID, "never joined"))
	got = mustResume(t, s, a).Rooms
	if len(got) != 1 || got["a"] != (sessions.Position{Seq: 2, Epoch: "e3"}) {
		t.Fatalf("rooms %v", got)
	}
}

// testSetRooms: SetRooms records every room as SetRoom would, replaces
// their positions and buffered acks, leaves the other rooms alone, and
// writes nothing for no rooms.
func testSetRooms(t *testing.T, s sessions.Store) {
	ctx := context.Background()
	a := mustCreate(t, s, "u1")
	mustOK(t, s.SetRoom(ctx, a.ID, "kept", sessions.Position{Seq: 7, Epoch: "e0"}))
	mustOK(t, s.SetRoom(ctx, a.ID, "a", sessions.Position{Seq: 1, Epoch: "e0"}))
	mustOK(t, s.Ack(ctx, a.ID, "a", 90)) // buffered: SetRooms replaces it
	mustOK(t, s.SetRooms(ctx, a.ID, map[string]sessions.Position{
		"a": {Seq: 5, Epoch: "e1"}, "b:with:colons": {Epoch: "e2"}, "c": {Seq: 1 << 40, Epoch: ""},
	}))
	mustOK(t, s.SetRooms(ctx, a.ID, nil))
	mustOK(t, s.Flush(ctx))
	want := map[string]sessions.Position{
		"kept": {Seq: 7, Epoch: "e0"}, "a": {Seq: 5, Epoch: "e1"}, "b:with:colons": {Epoch: "e2"}, "c": {Seq: 1 << 40},
	}
	got := mustResume(t, s, a).Rooms
	if len(got) != len(want) {
		t.Fatalf("rooms %v, want %v", got, want)
	}
	for room, pos := range want {
		if got[room] != pos {
			t.Fatalf("rooms %v, want %v", got, want)
		}
	}
}

func testAckCoalescing(t *testing.T, s sessions.Store) {
	ctx := context.Background()
	a := mustCreate(t, s, "u1")
	if err := s.SetRoom(ctx, a.ID, "r", sessions.Position{Epoch: "e"}); err != nil {
		t.Fatal(err)
	}
	for _, seq := range rand.Perm(1000) {
		for _, room := range []string{"r", "not joined"} {
			if err := s.Ack(ctx, a.ID, room, uint64(seq/2+1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]sessions.Position{"r": {Seq: 500, Epoch: "e"}}
	if got := mustResume(t, s, a).Rooms; len(got) != 1 || got["r"] != want["r"] {
		t.Fatalf("rooms after acks %v, want %v", got, want)
	}
	// An ack never moves a position back.
	if err := s.Ack(ctx, a.ID, "r", 100); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustResume(t, s, a).Rooms["r"]; got != want["r"] {
		t.Fatalf("after a lower ack %v, want %v", got, want["r"])
	}
	// SetRoom replaces the position (a new epoch) and any buffered ack.
	if err := s.Ack(ctx, a.ID, "r", 900); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRoom(ctx, a.ID, "r", sessions.Position{Epoch: "e2"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(ctx, a.ID, "r", 3); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustResume(t, s, a).Rooms["r"]; got != (sessions.Position{Seq: 3, Epoch: "e2"}) {
		t.Fatalf("after a new epoch %v, want 3 in e2", got)
	}
}

func testAckAfterLeave(t *testing.T, s sessions.Store) {
	ctx := context.Background()
	a := mustCreate(t, s, "u1")
	if err := s.SetRoom(ctx, a.ID, "r", sessions.Position{Epoch: "e"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(ctx, a.ID, "r", 10); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRoom(ctx, a.ID, "r"); err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(ctx, a.ID, "r", 11); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustResume(t, s, a).Rooms; len(got) != 0 {
		t.Fatalf("acks brought back a room left: %v", got)
	}
}

func testConcurrentAck(t *testing.T, s sessions.Store) {
	ctx := context.Background()
	var all []*sessions.Session
	for range 4 {
		sess := mustCreate(t, s, "u")
		for _, room := range []string{"a", "b"} {
			if err := s.SetRoom(ctx, sess.ID, room, sessions.Position{Epoch: "e"}); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, sess)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for seq := range uint64(200) {
				sess := all[w%len(all)]
				if err := s.Ack(ctx, sess.ID, []string{"a", "b"}[seq%2], seq+1); err != nil {
					t.Error(err)
					return
				}
				if seq%50 == 0 {
					if err := s.Flush(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, sess := range all {
		got := mustResume(t, s, sess).Rooms
		if got["a"].Seq != 199 || got["b"].Seq != 200 {
			t.Errorf("session rooms %v, want a 199, b 200", got)
		}
	}
}

func testDelete(t *testing.T, s sessions.Store) {
	ctx := context.Background()
	a := mustCreate(t, s, "u1")
	if err := s.Delete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resume(ctx, a.ID, a.Token, a.UserID, sessions.Attempt{}); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("Resume after Delete: %v", err)
	}
}

// testRotation: every successful resume replaces the token; a used token
// is refused once its successor resumed, and a successor that never
// reached its client is refused once the used token resumed again.
func testRotation(t *testing.T, s sessions.Store) {
	ctx := context.Background()
	a := mustCreate(t, s, "u1")
	resume := func(token string) (string, error) {
		got, err := s.Resume(ctx, a.ID, token, "u1", sessions.Attempt{})
		if err != nil {
			return "", err
		}
		return got.Token, nil
	}
	t1 := a.Token
	t2, err := resume(t1)
	if err != nil || t2 == t1 {
		t.Fatalf("first resume: token %q, %v", t2, err)
	}
	t3, err := resume(t2)
	if err != nil || t3 == t2 {
		t.Fatalf("second resume: token %q, %v", t3, err)
	}
	if _, err := resume(t1); !errors.Is(err, sessions.ErrTokenMismatch) {
		t.Fatalf("replayed token: %v, want ErrTokenMismatch", err)
	}
	// The Welcome carrying t4 is lost: the client retries with t3.
	if _, err := resume(t3); err != nil {
		t.Fatal(err)
	}
	t5, err := resume(t3)
	if err != nil {
		t.Fatalf("retry after a lost Welcome: %v", err)
	}
	if _, err := resume(t5); err != nil {
		t.Fatal(err)
	}
	if _, err := resume(t3); !errors.Is(err, sessions.ErrTokenMismatch) {
		t.Fatalf("t3 after its successor resumed: %v, want ErrTokenMismatch", err)
	}
}

// testRefusedResumeChangesNothing: a resume refused for its user, token or
// attempt records nothing: Mallory presenting Alice's session with Alice's
// instance and the largest attempt leaves Alice able to resume (issue 17
// item 3).
func testRefusedResumeChangesNothing(t *testing.T, s sessions.Store) {
	ctx := context.Background()
	alice := mustCreate(t, s, "alice")
	at := sessions.Attempt{Instance: "alice-tab", N: 1}
	got, err := s.Resume(ctx, alice.ID, alice.Token, "alice", at)
	if err != nil {
		t.Fatal(err)
	}
	alice.Token = got.Token
	evil := sessions.Attempt{Instance: "alice-tab", N: 4294967295}
	if _, err := s.Resume(ctx, alice.ID, alice.Token, "mallory", evil); !errors.Is(err, sessions.ErrUserMismatch) {
		t.Fatalf("Mallory with Alice's token: %v, want ErrUserMismatch", err)
	}
	if _, err := s.Resume(ctx, alice.ID, "guess", "alice", evil); !errors.Is(err, sessions.ErrTokenMismatch) {
		t.Fatalf("a guessed token: %v, want ErrTokenMismatch", err)
	}
	// Alice's next attempt, and her token, still work.
	if _, err := s.Resume(ctx, alice.ID, alice.Token, "alice", sessions.Attempt{Instance: "alice-tab", N: 2}); err != nil {
		t.Fatalf("Alice after the refused resumes: %v", err)
	}
}
