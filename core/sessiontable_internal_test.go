package core

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func testSessionTable() (*sessionTable, prometheus.Gauge) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sessions"})
	return newSessionTable(g), g
}

func TestSessionTableTakeOverAndDetach(t *testing.T) {
	tab, g := testSessionTable()
	s1 := &session{id: "x", user: "u"}
	if old, _, dropped := tab.attach(s1); old != nil || dropped {
		t.Fatalf("first attach: old %v, dropped %v; want nil, false", old, dropped)
	}
	s2 := &session{id: "x", user: "u"}
	if old, _, _ := tab.attach(s2); old != s1 {
		t.Fatal("a resume on a new connection did not return the session it takes over")
	}
	if value(t, g) != 1 {
		t.Fatalf("gauge %v after a take-over, want 1", value(t, g))
	}
	if tab.detach(s1, true, time.Now()) {
		t.Fatal("detaching the taken-over session removed its successor")
	}
	if tab.lookup("x") != s2 {
		t.Fatal("lookup does not find the attached session")
	}
	lost := time.Unix(1000, 0)
	if !tab.detach(s2, false, lost) {
		t.Fatal("detach of the attached session did not remove it")
	}
	if tab.lookup("x") != nil || value(t, g) != 0 {
		t.Fatalf("after detach: lookup %v, gauge %v; want nil, 0", tab.lookup("x"), value(t, g))
	}
	s3 := &session{id: "x", user: "u"}
	if _, at, dropped := tab.attach(s3); !dropped || !at.Equal(lost) {
		t.Fatalf("resume after a lost connection: dropped %v at %v, want true at %v", dropped, at, lost)
	}
	tab.detach(s3, true, time.Now())
	if _, _, dropped := tab.attach(&session{id: "x"}); dropped {
		t.Fatal("a clean detach was recorded as a lost connection, or one was reported twice")
	}
}

func TestSessionTableOfUser(t *testing.T) {
	tab, _ := testSessionTable()
	for i := range 5 {
		tab.attach(&session{id: fmt.Sprint(i), user: fmt.Sprint("u", i%2)})
	}
	if n := len(tab.ofUser("u0")); n != 3 {
		t.Fatalf("u0 has %d sessions, want 3", n)
	}
	if n := len(tab.ofUser("nobody")); n != 0 {
		t.Fatalf("nobody has %d sessions, want 0", n)
	}
	if n := len(tab.all()); n != 5 {
		t.Fatalf("all: %d sessions, want 5", n)
	}
}

func TestSessionTableSweep(t *testing.T) {
	tab, _ := testSessionTable()
	t0 := time.Unix(10_000, 0)
	tab.attach(&session{id: "old"})
	tab.attach(&session{id: "new"})
	tab.detach(tab.lookup("old"), false, t0)
	tab.detach(tab.lookup("new"), false, t0.Add(2*time.Hour))
	if n := tab.sweep(t0.Add(time.Hour)); n != 1 {
		t.Fatalf("sweep forgot %d, want 1", n)
	}
	if _, _, dropped := tab.attach(&session{id: "old"}); dropped {
		t.Fatal("a swept session's lost connection was still reported")
	}
	if _, _, dropped := tab.attach(&session{id: "new"}); !dropped {
		t.Fatal("sweep forgot a session that had not expired")
	}
}

// TestSessionTableConcurrent attaches and detaches sessions of a few ids
// from many goroutines, so that they take each other over: every session
// ends exactly once, either removed by its own detach or returned as
// taken over by another's attach, and the gauge follows the table.
func TestSessionTableConcurrent(t *testing.T) {
	tab, g := testSessionTable()
	const workers, rounds = 8, 300
	var removed, replaced atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				s := &session{id: fmt.Sprint("id", (w+i)%3), user: fmt.Sprint("u", w%2)}
				if old, _, _ := tab.attach(s); old != nil {
					replaced.Add(1)
				}
				_ = tab.lookup(s.id)
				_ = tab.ofUser(s.user)
				if tab.detach(s, i%2 == 0, time.Now()) {
					removed.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for range rounds {
			_ = tab.all()
			tab.sweep(time.Now())
		}
	})
	wg.Wait()
	if got := removed.Load() + replaced.Load(); got != workers*rounds {
		t.Fatalf("%d sessions ended (%d detached, %d taken over), want %d",
			got, removed.Load(), replaced.Load(), workers*rounds)
	}
	if n := len(tab.all()); n != 0 || value(t, g) != 0 {
		t.Fatalf("after every detach: %d sessions, gauge %v; want 0, 0", n, value(t, g))
	}
}
