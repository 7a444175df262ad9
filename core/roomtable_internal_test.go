package core

import (
	"fmt"
	croom "github.com/corral-rt/corral/core/room"
	"github.com/corral-rt/corral/roomclass"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// countingHolder is a roomHolder that fails the test when a room is held
// twice or released unheld.
type countingHolder struct {
	t     *testing.T
	mu    sync.Mutex
	held  map[string]int
	holds int
}

func (h *countingHolder) Hold(room string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held[room]++
	h.holds++
	if h.held[room] != 1 {
		h.t.Errorf("room %q held %d times", room, h.held[room])
	}
}

func (h *countingHolder) Release(room string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held[room]--
	if h.held[room] != 0 {
		h.t.Errorf("room %q released while held %d times", room, h.held[room]+1)
	}
}

func (h *countingHolder) isHeld(room string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[room] > 0
}

// testRoomTable is a room table of rooms without a core, its holder and
// its gauge.
func testRoomTable(t *testing.T) (*roomTable, *countingHolder, prometheus.Gauge) {
	h := &countingHolder{t: t, held: make(map[string]int)}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "rooms"})
	opts := &roomOpts{Classes: roomclass.NewLive(roomclass.NewTable(roomclass.Default(), nil))}
	return newRoomTable(func(name string) *room { return croom.New(name, opts) }, h, g), h, g
}

// addMember puts a joining member in r, as a join begins.
func addMember(r *room) *session {
	s := testSession(fmt.Sprintf("s%p", r), "")
	r.BeginJoin(s, endpoint{}, &croom.Join{})
	return s
}

func removeMember(r *room, s *session) {
	r.Leave(s, nil)
}

func TestRoomTableReferences(t *testing.T) {
	tab, h, g := testRoomTable(t)
	a1 := tab.acquire("a")
	a2 := tab.acquire("a")
	if a1 != a2 {
		t.Fatal("two acquires of one name gave two rooms")
	}
	if tab.len() != 1 || value(t, g) != 1 || !h.isHeld("a") {
		t.Fatalf("after acquire: len %d, gauge %v, held %v; want 1, 1, true", tab.len(), value(t, g), h.isHeld("a"))
	}
	tab.release(a1)
	if tab.get("a") != a1 {
		t.Fatal("room forgotten while a reference remained")
	}
	tab.release(a2)
	if tab.get("a") != nil || tab.len() != 0 || value(t, g) != 0 || h.isHeld("a") {
		t.Fatalf("after the last release: get %v, len %d, gauge %v, held %v; want nil, 0, 0, false",
			tab.get("a"), tab.len(), value(t, g), h.isHeld("a"))
	}
	if again := tab.acquire("a"); again == a1 {
		t.Fatal("a forgotten room came back: want a new one")
	}
}

func TestRoomTableKeepsRoomWithMembers(t *testing.T) {
	tab, h, g := testRoomTable(t)
	r := tab.acquire("a")
	s := addMember(r)
	tab.release(r)
	if tab.get("a") != r || !h.isHeld("a") {
		t.Fatal("a room with a member was forgotten at release")
	}
	tab.forgetIdle(r)
	if tab.get("a") != r {
		t.Fatal("forgetIdle forgot a room with a member")
	}
	removeMember(r, s)
	tab.forgetIdle(r)
	if tab.get("a") != nil || value(t, g) != 0 || h.isHeld("a") {
		t.Fatal("the room whose last member left was not forgotten")
	}
}

func TestRoomTableForgetsOnlyItsOwnRoom(t *testing.T) {
	tab, _, _ := testRoomTable(t)
	old := tab.acquire("a")
	tab.release(old)
	cur := tab.acquire("a")
	// A late forgetIdle of the forgotten room must not drop the room
	// that now has the name.
	tab.forgetIdle(old)
	if tab.get("a") != cur {
		t.Fatal("forgetting a forgotten room dropped its successor")
	}
	tab.release(cur)
	if tab.len() != 0 {
		t.Fatalf("len %d, want 0", tab.len())
	}
}

func TestRoomTableDropUnheld(t *testing.T) {
	tab, _, _ := testRoomTable(t)
	r := tab.acquire("a")
	defer tab.release(r)
	var gone []string
	n := tab.dropUnheld(func(isGone func(string) bool) int {
		if tab.mu.TryLock() {
			tab.mu.Unlock()
			t.Error("removeIf ran without the table's lock")
		}
		for _, name := range []string{"a", "b", "c"} {
			if isGone(name) {
				gone = append(gone, name)
			}
		}
		return len(gone)
	})
	if n != 2 || fmt.Sprint(gone) != "[b c]" {
		t.Fatalf("dropUnheld: %d %v, want 2 [b c]", n, gone)
	}
}

// TestRoomTableConcurrent acquires and releases a few rooms from many
// goroutines, some as members joining and leaving: while a goroutine holds
// a reference or is a member, its room is the table's room of that name;
// at the end every room is forgotten and every hold released.
func TestRoomTableConcurrent(t *testing.T) {
	tab, h, g := testRoomTable(t)
	names := []string{"a", "b", "c"}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 300 {
				name := names[(w+i)%len(names)]
				r := tab.acquire(name)
				if got := tab.get(name); got != r || r.Name() != name {
					t.Errorf("acquired %q, the table holds another room", name)
					return
				}
				if w%2 == 0 {
					// A reference only, as a publish takes.
					tab.release(r)
					continue
				}
				// A member, as a join: the reference ends, the
				// membership keeps the room.
				s := addMember(r)
				tab.release(r)
				if tab.get(name) != r {
					t.Errorf("room %q forgotten under its member", name)
					return
				}
				removeMember(r, s)
				tab.forgetIdle(r)
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 300 {
				for _, r := range tab.all() {
					_ = r.Empty()
				}
				tab.dropUnheld(func(gone func(string) bool) int {
					for _, n := range names {
						gone(n)
					}
					return 0
				})
			}
		})
	}
	wg.Wait()
	if tab.len() != 0 || value(t, g) != 0 {
		t.Fatalf("after every release: len %d, gauge %v; want 0, 0", tab.len(), value(t, g))
	}
	for _, n := range names {
		if h.isHeld(n) {
			t.Errorf("room %q still held in history", n)
		}
	}
	if h.holds == 0 {
		t.Fatal("no room was ever created")
	}
}
