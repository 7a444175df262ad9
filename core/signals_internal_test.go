package core

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/roomclass"
)

func TestSignalTick(t *testing.T) {
	def := roomclass.Default()
	def.SignalTick = 33 * time.Millisecond
	class := func(name, pattern string, tick time.Duration) roomclass.Class {
		c := def
		c.Name, c.Match, c.SignalTick = name, roomclass.Patterns{pattern}, tick
		return c
	}
	classes := []roomclass.Class{
		class("canvas", "canvas:*", 16*time.Millisecond),
		class("typing", "typing:lobby", 100*time.Millisecond),
	}
	c := &Core{cfg: Config{Classes: roomclass.NewLive(roomclass.NewTable(def, classes))}}
	tests := map[string]time.Duration{
		"canvas:board-1": 16 * time.Millisecond,
		"typing:lobby":   100 * time.Millisecond,
		"typing:other":   33 * time.Millisecond,
		"lobby":          33 * time.Millisecond,
	}
	for room, want := range tests {
		t.Run(room, func(t *testing.T) {
			if got := c.signalTick(room); got != want {
				t.Fatalf("tick %v, want %v", got, want)
			}
		})
	}
}

// TestSignalSetUnderItsOwnLock: a signal is set while the room's lock is
// held (a publish's fan-out in progress) without waiting for it, and the
// next flush, which takes both locks, sends it.
func TestSignalSetUnderItsOwnLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCore(t, Config{})
		r := newRoom(c, "r")
		l := fakeLink(c)
		s := &session{id: "s1", user: "u"}
		r.mu.Lock()
		r.links[l] = 1
		done := make(chan struct{})
		go func() {
			r.signalsOrNew().signal(s, &corralv1.SignalEvent{Room: "r", Key: "cursor", Sender: "u", Payload: []byte("1")})
			close(done)
		}()
		synctest.Wait()
		select {
		case <-done:
		default:
			r.mu.Unlock()
			<-done
			t.Fatal("a signal waited for the room's lock")
		}
		r.mu.Unlock()
		got := frames(t, l, 1)
		sigs := got[0].GetBatch().GetFrames()
		if len(sigs) != 1 || sigs[0].GetSignal().GetKey() != "cursor" {
			t.Fatalf("flush sent %v, want the cursor signal", got)
		}
	})
}

// TestSignalLocksConcurrent: sets under the signals' lock alone race with
// snapshots, clears and flushes under both locks (run with -race); once
// every owner cleared its keys and a flush ran, no key is left.
func TestSignalLocksConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCore(t, Config{})
		r := newRoom(c, "r")
		l := fakeLink(c)
		r.mu.Lock()
		r.links[l] = 1
		r.mu.Unlock()
		var wg sync.WaitGroup
		sessions := make([]*session, 4)
		for i := range sessions {
			s := &session{id: fmt.Sprint("s", i), user: fmt.Sprint("u", i)}
			sessions[i] = s
			wg.Go(func() {
				for j := range 50 {
					r.signalsOrNew().signal(s, &corralv1.SignalEvent{Room: "r", Key: fmt.Sprint(s.user, ":", j%8), Sender: s.user, Payload: []byte{byte(j)}})
				}
			})
		}
		wg.Go(func() {
			for range 50 {
				r.mu.Lock()
				_ = r.signals.Load().snapshot()
				r.mu.Unlock()
			}
		})
		wg.Wait()
		r.mu.Lock()
		if n := len(r.signals.Load().snapshot()); n == 0 {
			t.Error("no signal in the snapshot before the clears")
		}
		for _, s := range sessions {
			r.signals.Load().clear(s)
		}
		r.mu.Unlock()
		time.Sleep(time.Second) // fake time: past every flush
		synctest.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		if snap := r.signals.Load().snapshot(); len(snap) != 0 {
			t.Fatalf("after the clears the snapshot holds %v", snap)
		}
		st := r.signals.Load()
		st.mu.Lock()
		defer st.mu.Unlock()
		if len(st.latest)+len(st.owned)+len(st.dirty) != 0 {
			t.Fatalf("signals left after the clears: %d latest, %d owners, %d dirty", len(st.latest), len(st.owned), len(st.dirty))
		}
	})
}
