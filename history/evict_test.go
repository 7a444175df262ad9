package history_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
)

// TestMemoryForgetsUnusedRooms churns 100,000 made-up room names through
// every method and checks that the store holds only the rooms in use
// afterwards: reads create nothing, a released room without messages is
// forgotten at once, and one with messages when its lifetime ends.
func TestMemoryForgetsUnusedRooms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := history.NewMemory(history.MemoryOptions{TTL: time.Hour, MaxLen: 2})
		ctx := context.Background()
		s.Hold("kept")
		mustAppend(t, s, "kept", 3)
		const n = 100_000
		for i := range n {
			name := fmt.Sprintf("r%d", i)
			switch i % 4 {
			case 0:
				if _, err := s.Read(ctx, history.Query{Room: name}); err != nil {
					t.Fatal(err)
				}
			case 1:
				if _, err := s.State(ctx, name); err != nil {
					t.Fatal(err)
				}
			case 2: // a member joins and leaves; nobody publishes
				s.Hold(name)
				if _, err := s.State(ctx, name); err != nil {
					t.Fatal(err)
				}
				s.Release(name)
			case 3: // a publish to a room nobody is in
				mustAppend(t, s, name, 1)
			}
		}
		if got, want := s.Len(), 1+n/4; got != want {
			t.Fatalf("after the churn the store holds %d rooms, want %d (kept and those with history)", got, want)
		}
		time.Sleep(time.Hour + time.Minute)
		if _, err := s.State(ctx, "any"); err != nil { // a call runs the sweep
			t.Fatal(err)
		}
		if got := s.Len(); got != 1 {
			t.Fatalf("past the history lifetime the store holds %d rooms, want 1 (the held one)", got)
		}
		p, err := s.Read(ctx, history.Query{Room: "kept"})
		if err != nil || p.Last != 3 || len(p.Messages) != 2 {
			t.Fatalf("the held room lost its history: %+v %v", p.State, err)
		}
	})
}

// TestMemoryEvictedRoomGetsNewEpoch: a room past its lifetime comes back
// under a new epoch (a client holding the old position gets a reset), and
// a room that never had a message may keep its epoch (nothing was missed).
func TestMemoryEvictedRoomGetsNewEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := history.NewMemory(history.MemoryOptions{TTL: time.Hour})
		ctx := context.Background()
		empty1, _ := s.State(ctx, "empty")
		res, err := s.Append(ctx, "r", &corralv1.Message{Room: "r"}, "")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Minute)
		if st, _ := s.State(ctx, "r"); st.Epoch != res.Epoch || st.Last != 1 {
			t.Fatalf("within its lifetime: %+v, want epoch %s last 1", st, res.Epoch)
		}
		time.Sleep(31 * time.Minute)
		st, _ := s.State(ctx, "r")
		if st.Epoch == res.Epoch || st.Last != 0 {
			t.Fatalf("past its lifetime: %+v, want a new epoch than %s and last 0", st, res.Epoch)
		}
		again, err := s.Append(ctx, "r", &corralv1.Message{Room: "r"}, "")
		if err != nil || again.Epoch == res.Epoch || again.Seq != 1 {
			t.Fatalf("append after the eviction: %+v %v, want seq 1 under a new epoch", again, err)
		}
		empty2, _ := s.State(ctx, "empty")
		if empty2.Epoch == "" || empty2.Last != 0 {
			t.Fatalf("state of a room never used: %+v", empty2)
		}
		_ = empty1 // may differ: a room with messages was evicted meanwhile
	})
}

// TestMemoryHeldRoomOutlivesTTL: a held room is never evicted, and its
// lifetime starts again when it is released.
func TestMemoryHeldRoomOutlivesTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := history.NewMemory(history.MemoryOptions{TTL: time.Hour})
		ctx := context.Background()
		s.Hold("r")
		res, _ := s.Append(ctx, "r", &corralv1.Message{Room: "r"}, "")
		time.Sleep(3 * time.Hour)
		if st, _ := s.State(ctx, "r"); st.Epoch != res.Epoch || st.Last != 1 {
			t.Fatalf("held past its TTL: %+v, want epoch %s last 1", st, res.Epoch)
		}
		s.Release("r")
		time.Sleep(59 * time.Minute)
		if st, _ := s.State(ctx, "r"); st.Epoch != res.Epoch || st.Last != 1 {
			t.Fatalf("released 59m ago: %+v, want epoch %s last 1", st, res.Epoch)
		}
	})
}

// TestMemoryEvictionKeepsConcurrentAppends races sweeps (short lifetime)
// with holds, appends and releases of the same rooms: every append's seq is
// readable under the epoch it returned unless that epoch ended, and an
// epoch never comes back once it ended.
func TestMemoryEvictionKeepsConcurrentAppends(t *testing.T) {
	s := history.NewMemory(history.MemoryOptions{TTL: time.Millisecond, MaxLen: 1 << 20})
	ctx := context.Background()
	const workers, rounds = 4, 2000
	rooms := []string{"a", "b", "c"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ended := make(map[string]bool) // epochs seen to end
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				room := rooms[(w+i)%len(rooms)]
				s.Hold(room)
				res, err := s.Append(ctx, room, &corralv1.Message{Room: room}, "")
				if err != nil {
					t.Error(err)
					return
				}
				// Held: the message must be there.
				p, err := s.Read(ctx, history.Query{Room: room, After: res.Seq - 1, Limit: 1})
				if err != nil || p.Epoch != res.Epoch || len(p.Messages) != 1 || p.Messages[0].GetSeq() != res.Seq {
					t.Errorf("held room %s lost seq %d of epoch %s: %+v %v", room, res.Seq, res.Epoch, p.State, err)
					return
				}
				s.Release(room)
				if i%50 == 0 {
					time.Sleep(2 * time.Millisecond) // let the lifetime end
					st, _ := s.State(ctx, room)
					mu.Lock()
					if st.Epoch != res.Epoch {
						ended[res.Epoch] = true
					}
					if ended[st.Epoch] && st.Last > 0 {
						t.Errorf("room %s is back under ended epoch %s", room, st.Epoch)
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(ended) == 0 {
		t.Fatal("no room was ever evicted: the test did not test eviction")
	}
}

// TestMemoryHoldAfterLifetimeStartsOver: holding a room whose lifetime
// ended (before any sweep) starts it over under a new epoch; its old
// history is not brought back.
func TestMemoryHoldAfterLifetimeStartsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := history.NewMemory(history.MemoryOptions{TTL: time.Hour})
		ctx := context.Background()
		res, _ := s.Append(ctx, "r", &corralv1.Message{Room: "r"}, "")
		time.Sleep(time.Hour)
		s.Hold("r")
		if st, _ := s.State(ctx, "r"); st.Epoch == res.Epoch || st.Last != 0 {
			t.Fatalf("held after its lifetime: %+v, want a new epoch than %s and last 0", st, res.Epoch)
		}
	})
}
