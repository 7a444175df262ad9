package sessions_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corral-rt/corral/sessions"
)

func TestMemory(t *testing.T) {
	testStore(t, func(t *testing.T, opts sessions.Options) sessions.Store {
		s := sessions.NewMemory(opts)
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestMemoryTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sessions.NewMemory(sessions.Options{TTL: time.Minute})
		defer s.Close()
		ctx := context.Background()
		a := mustCreate(t, s, "u")
		b := mustCreate(t, s, "u")
		time.Sleep(50 * time.Second)
		if err := s.Touch(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Second)
		// a was touched 50 s ago; b is 100 s old.
		mustResume(t, s, a)
		if _, err := s.Resume(ctx, b.ID, b.Token, b.UserID, sessions.Attempt{}); !errors.Is(err, sessions.ErrNotFound) {
			t.Fatalf("Resume of an expired session: %v", err)
		}
		time.Sleep(61 * time.Second)
		if err := s.Touch(ctx, a.ID); !errors.Is(err, sessions.ErrNotFound) {
			t.Fatalf("Touch of an expired session: %v", err)
		}
	})
}

func TestMemoryClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sessions.NewMemory(sessions.Options{})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := s.Create(context.Background(), "u"); err == nil {
			t.Fatal("Create after Close succeeded")
		}
		// synctest fails the test if the sweep goroutine outlived Close.
	})
}

func ExampleNewMemory() {
	s := sessions.NewMemory(sessions.Options{TTL: 2 * time.Minute})
	defer s.Close()
	ctx := context.Background()

	sess, _ := s.Create(ctx, "ann")
	_ = s.SetRoom(ctx, sess.ID, "lobby", sessions.Position{Epoch: "e1"})
	_ = s.Ack(ctx, sess.ID, "lobby", 42)

	// Later, on a new connection, the client presents id and token.
	resumed, err := s.Resume(ctx, sess.ID, sess.Token, sess.UserID, sessions.Attempt{})
	if err != nil {
		panic(err)
	}
	fmt.Println(resumed.UserID, resumed.Rooms["lobby"].Seq)
	_, err = s.Resume(ctx, sess.ID, "guess", sess.UserID, sessions.Attempt{})
	fmt.Println(err)
	// The token rotates: keep the latest.
	fmt.Println(resumed.Token != sess.Token)
	// Output:
	// ann 42
	// sessions: resume: sessions: resume token mismatch
	// true
}

// TestMemoryMaxSessions: a flood of sessions created and never used again
// never makes the store hold more than MaxSessions; past it the ones
// expiring soonest go, counted, and the sessions touched since (attached
// clients: the core touches them every TTL/3) all stay.
func TestMemoryMaxSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = 1000
		s := sessions.NewMemory(sessions.Options{TTL: time.Minute, MaxSessions: bound})
		defer s.Close()
		ctx := context.Background()
		var live []*sessions.Session
		for range 100 {
			live = append(live, mustCreate(t, s, "live"))
		}
		for round := range 40 {
			for i := range 500 {
				mustCreate(t, s, fmt.Sprint("flood-", round, "-", i))
				if n := s.Len(); n > bound {
					t.Fatalf("round %d: %d sessions held, over the bound %d", round, n, bound)
				}
			}
			time.Sleep(time.Second)
			for _, l := range live {
				if err := s.Touch(ctx, l.ID); err != nil {
					t.Fatalf("round %d: a live session is gone: %v", round, err)
				}
			}
			time.Sleep(time.Second)
		}
		if s.Evicted() < 19_000 {
			t.Fatalf("%d evicted, want the flood's", s.Evicted())
		}
		for _, l := range live {
			if _, err := s.Resume(ctx, l.ID, l.Token, "live", sessions.Attempt{}); err != nil {
				t.Fatalf("a live session cannot resume: %v", err)
			}
		}
	})
}
