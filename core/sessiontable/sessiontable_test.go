package sessiontable

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// fake is a session as a Table knows it.
type fake struct{ id, user string }

func (f *fake) SessionID() string { return f.id }
func (f *fake) UserID() string    { return f.user }

func testSessionTable() (*Table[*fake], prometheus.Gauge) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sessions"})
	return New[*fake](g), g
}

// value is g's value.
func value(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var d dto.Metric
	if err := g.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetGauge().GetValue()
}

func TestSessionTableTakeOverAndDetach(t *testing.T) {
	tab, g := testSessionTable()
	s1 := &fake{id: "x", user: "u"}
	if old, _, dropped := tab.Attach(s1); old != nil || dropped {
		t.Fatalf("first attach: old %v, dropped %v; want nil, false", old, dropped)
	}
	s2 := &fake{id: "x", user: "u"}
	if old, _, _ := tab.Attach(s2); old != s1 {
		t.Fatal("a resume on a new connection did not return the session it takes over")
	}
	if value(t, g) != 1 {
		t.Fatalf("gauge %v after a take-over, want 1", value(t, g))
	}
	if tab.Detach(s1, true, time.Now()) {
		t.Fatal("detaching the taken-over session removed its successor")
	}
	if tab.Lookup("x") != s2 {
		t.Fatal("lookup does not find the attached session")
	}
	lost := time.Unix(1000, 0)
	if !tab.Detach(s2, false, lost) {
		t.Fatal("detach of the attached session did not remove it")
	}
	if tab.Lookup("x") != nil || value(t, g) != 0 {
		t.Fatalf("after detach: lookup %v, gauge %v; want nil, 0", tab.Lookup("x"), value(t, g))
	}
	s3 := &fake{id: "x", user: "u"}
	if _, at, dropped := tab.Attach(s3); !dropped || !at.Equal(lost) {
		t.Fatalf("resume after a lost connection: dropped %v at %v, want true at %v", dropped, at, lost)
	}
	tab.Detach(s3, true, time.Now())
	if _, _, dropped := tab.Attach(&fake{id: "x"}); dropped {
		t.Fatal("a clean detach was recorded as a lost connection, or one was reported twice")
	}
}

func TestSessionTableOfUser(t *testing.T) {
	tab, _ := testSessionTable()
	for i := range 5 {
		tab.Attach(&fake{id: fmt.Sprint(i), user: fmt.Sprint("u", i%2)})
	}
	if n := len(tab.OfUser("u0")); n != 3 {
		t.Fatalf("u0 has %d sessions, want 3", n)
	}
	if n := len(tab.OfUser("nobody")); n != 0 {
		t.Fatalf("nobody has %d sessions, want 0", n)
	}
	if n := len(tab.All()); n != 5 {
		t.Fatalf("all: %d sessions, want 5", n)
	}
}

func TestSessionTableSweep(t *testing.T) {
	tab, _ := testSessionTable()
	t0 := time.Unix(10_000, 0)
	tab.Attach(&fake{id: "old"})
	tab.Attach(&fake{id: "new"})
	tab.Detach(tab.Lookup("old"), false, t0)
	tab.Detach(tab.Lookup("new"), false, t0.Add(2*time.Hour))
	if n := tab.Sweep(t0.Add(time.Hour)); n != 1 {
		t.Fatalf("sweep forgot %d, want 1", n)
	}
	if _, _, dropped := tab.Attach(&fake{id: "old"}); dropped {
		t.Fatal("a swept session's lost connection was still reported")
	}
	if _, _, dropped := tab.Attach(&fake{id: "new"}); !dropped {
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
				s := &fake{id: fmt.Sprint("id", (w+i)%3), user: fmt.Sprint("u", w%2)}
				if old, _, _ := tab.Attach(s); old != nil {
					replaced.Add(1)
				}
				_ = tab.Lookup(s.id)
				_ = tab.OfUser(s.user)
				if tab.Detach(s, i%2 == 0, time.Now()) {
					removed.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for range rounds {
			_ = tab.All()
			tab.Sweep(time.Now())
		}
	})
	wg.Wait()
	if got := removed.Load() + replaced.Load(); got != workers*rounds {
		t.Fatalf("%d sessions ended (%d detached, %d taken over), want %d",
			got, removed.Load(), replaced.Load(), workers*rounds)
	}
	if n := len(tab.All()); n != 0 || value(t, g) != 0 {
		t.Fatalf("after every detach: %d sessions, gauge %v; want 0, 0", n, value(t, g))
	}
}

// TestDroppedBounded: a flood of sessions losing their connection never
// makes the table remember more drop times than its bound; past it the
// oldest go, counted, and the newest are still reported on reattach.
func TestDroppedBounded(t *testing.T) {
	tb := New[*fake](prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"}))
	tb.maxDropped = 100
	base := time.Unix(1000, 0)
	var last *fake
	for i := range 5000 {
		s := &fake{id: fmt.Sprint("s", i), user: "u"}
		tb.Attach(s)
		tb.Detach(s, false, base.Add(time.Duration(i)*time.Millisecond))
		tb.mu.Lock()
		n := len(tb.droppedAt)
		tb.mu.Unlock()
		if n > 100 {
			t.Fatalf("after %d drops %d remembered, over the bound", i+1, n)
		}
		last = s
	}
	if f := tb.Forgotten(); f < 4900 {
		t.Fatalf("%d forgotten, want the flood's", f)
	}
	if _, at, ok := tb.Attach(last); !ok || !at.Equal(base.Add(4999*time.Millisecond)) {
		t.Fatalf("the newest drop: %v %v", at, ok)
	}
}
