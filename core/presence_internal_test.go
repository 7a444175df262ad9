package core

import (
	"context"
	"github.com/corral-rt/corral/config"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"
)

// TestPresenceGraceWindow: a dropped connection stays counted for the
// grace window; its session coming back within it keeps the count (no
// leave, no second connection); a clean leave uncounts at once.
func TestPresenceGraceWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Presence: PresenceConfig{Presence: config.Presence{Grace: 15 * time.Second}}})
		defer c.Close()
		ctx := context.Background()
		r := newRoom(c, "r")
		conns := func() int {
			t.Helper()
			snap, err := c.pres.store.List(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Members) == 0 {
				return 0
			}
			return snap.Members[0].Conns
		}
		s := testSession("s1", "u")
		c.pres.join(ctx, s, r, []byte(`"hi"`))
		if n := conns(); n != 1 {
			t.Fatalf("after join: %d connections", n)
		}
		c.pres.leave(s, "r", false) // dropped
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := conns(); n != 1 {
			t.Fatalf("within grace: %d connections", n)
		}
		back := testSession("s1", "u") // the session resumes
		c.pres.join(ctx, back, r, nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := conns(); n != 1 {
			t.Fatalf("resumed: %d connections", n)
		}
		c.pres.leave(back, "r", false)
		time.Sleep(16 * time.Second)
		synctest.Wait()
		if n := conns(); n != 0 {
			t.Fatalf("after grace: %d connections", n)
		}
		other := testSession("s2", "v")
		c.pres.join(ctx, other, r, nil)
		c.pres.leave(other, "r", true)
		if n := conns(); n != 0 {
			t.Fatalf("after a clean leave: %d connections", n)
		}
	})
}
