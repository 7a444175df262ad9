package state_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/state"
)

// clock is a test clock: it moves only when told to.
type clock struct{ ms atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ms.Store(1_700_000_000_000)
	return c
}
func (c *clock) Now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *clock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

type newStore func(t *testing.T, l state.Limits, now func() time.Time) state.Store

func TestMemory(t *testing.T) {
	testStore(t, func(t *testing.T, l state.Limits, now func() time.Time) state.Store {
		return state.NewMemory(state.MemoryOptions{Now: now, Limits: func(string) state.Limits { return l }})
	})
}

func TestRedis(t *testing.T) {
	client := redistest.Client(t, redistest.Start(t))
	testStore(t, func(t *testing.T, l state.Limits, now func() time.Time) state.Store {
		return state.NewRedis(client, state.RedisOptions{Prefix: redistest.Prefix(t), Now: now,
			Limits: func(string) state.Limits { return l }})
	})
}

func TestRedisCluster(t *testing.T) {
	cluster := redistest.StartCluster(t)
	client := cluster.Client(t)
	testStore(t, func(t *testing.T, l state.Limits, now func() time.Time) state.Store {
		return state.NewRedis(client, state.RedisOptions{Prefix: redistest.Prefix(t), Now: now,
			Limits: func(string) state.Limits { return l }})
	})
}

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func testStore(t *testing.T, open newStore) {
	ctx := context.Background()

	t.Run("set, versions, snapshot, since", func(t *testing.T) {
		s := open(t, state.Limits{}, nil)
		empty := must[state.Snapshot](t)(s.Snapshot(ctx, "r"))
		if empty.Position != 0 || len(empty.Entries) != 0 {
			t.Fatalf("empty room: %+v", empty)
		}
		r1 := must[state.Result](t)(s.Set(ctx, "r", state.Set{Key: "b", Value: []byte("1")}))
		r2 := must[state.Result](t)(s.Set(ctx, "r", state.Set{Key: "a", Value: []byte("x")}))
		r3 := must[state.Result](t)(s.Set(ctx, "r", state.Set{Key: "b", Value: []byte("2")}))
		if r1.Version != 1 || r2.Version != 1 || r3.Version != 2 || r3.Position != 3 || !r3.Existed || r1.Existed {
			t.Fatalf("results %+v %+v %+v", r1, r2, r3)
		}
		snap := must[state.Snapshot](t)(s.Snapshot(ctx, "r"))
		if snap.Epoch != r3.Epoch || snap.Position != 3 || len(snap.Entries) != 2 ||
			snap.Entries[0].Key != "a" || string(snap.Entries[1].Value) != "2" || snap.Entries[1].Version != 2 {
			t.Fatalf("snapshot %+v", snap)
		}
		// The empty snapshot's position continues into the first epoch.
		all := must[[]state.Change](t)(s.Since(ctx, "r", empty.Epoch, 0, 0))
		if len(all) != 3 || all[0].Key != "b" || all[2].Position != 3 || string(all[2].Value) != "2" {
			t.Fatalf("since 0: %+v", all)
		}
		d := must[state.Result](t)(s.Delete(ctx, "r", "a", false, 0))
		if !d.Existed || d.Position != 4 {
			t.Fatalf("delete %+v", d)
		}
		again := must[state.Result](t)(s.Delete(ctx, "r", "a", false, 0))
		if again.Existed || again.Position != 4 {
			t.Fatalf("delete of a missing key %+v", again)
		}
		ch := must[[]state.Change](t)(s.Since(ctx, "r", snap.Epoch, 3, 0))
		if len(ch) != 1 || !ch[0].Deleted || ch[0].Expired || ch[0].Key != "a" || ch[0].Version != 1 {
			t.Fatalf("since 3: %+v", ch)
		}
		if ch := must[[]state.Change](t)(s.Since(ctx, "r", snap.Epoch, 4, 0)); len(ch) != 0 {
			t.Fatalf("since now: %+v", ch)
		}
		// Set again after delete starts at version 1.
		if r := must[state.Result](t)(s.Set(ctx, "r", state.Set{Key: "a"})); r.Version != 1 {
			t.Fatalf("set after delete: %+v", r)
		}
	})

	t.Run("compare and set", func(t *testing.T) {
		s := open(t, state.Limits{}, nil)
		if _, err := s.Set(ctx, "r", state.Set{Key: "k", CAS: true, Version: 1}); !errors.Is(err, state.ErrConflict) {
			t.Fatalf("cas on a missing key at 1: %v", err)
		}
		must[state.Result](t)(s.Set(ctx, "r", state.Set{Key: "k", Value: []byte("a"), CAS: true, Version: 0}))
		if _, err := s.Set(ctx, "r", state.Set{Key: "k", CAS: true, Version: 0}); !errors.Is(err, state.ErrConflict) {
			t.Fatalf("create-only on an existing key: %v", err)
		}
		r := must[state.Result](t)(s.Set(ctx, "r", state.Set{Key: "k", Value: []byte("b"), CAS: true, Version: 1}))
		if r.Version != 2 {
			t.Fatalf("cas: %+v", r)
		}
		if _, err := s.Delete(ctx, "r", "k", true, 1); !errors.Is(err, state.ErrConflict) {
			t.Fatalf("delete cas at an old version: %v", err)
		}
		must[state.Result](t)(s.Delete(ctx, "r", "k", true, 2))
		snap := must[state.Snapshot](t)(s.Snapshot(ctx, "r"))
		if len(snap.Entries) != 0 || snap.Position != 3 {
			t.Fatalf("refused writes changed the state: %+v", snap)
		}
	})

	t.Run("bounds", func(t *testing.T) {
		s := open(t, state.Limits{MaxKeys: 2, MaxValue: 4, MaxChanges: 3}, nil)
		must[state.Result](t)(s.Set(ctx, "r", state.Set{Key: "a", Value: []byte("1234")}))
		if _, err := s.Set(ctx, "r", state.Set{Key: "a", Value: []byte("12345")}); !errors.Is(err, state.ErrTooLarge) {
			t.Fatalf("value past the bound: %v", err)
		}
		must[state.Result](t)(s.Set(ctx, "r", state.Set{Key: "b"}))
		if _, err := s.Set(ctx, "r", state.Set{Key: "c"}); !errors.Is(err, state.ErrTooManyKeys) {
			t.Fatalf("key past the bound: %v", err)
		}
		must[state.Result](t)(s.Set(ctx, "r", state.Set{Key: "a", Value: []byte("x")})) // an existing key still can
		for _, bad := range []string{"", "a\nb", string(make([]byte, state.MaxKey+1))} {
			if _, err := s.Set(ctx, "r", state.Set{Key: bad}); !errors.Is(err, state.ErrInvalid) {
				t.Fatalf("key %q: %v", bad, err)
			}
		}
		// Positions 1..3 are written; 3 changes are kept; one more drops 1.
		snap := must[state.Snapshot](t)(s.Snapshot(ctx, "r"))
		must[[]state.Change](t)(s.Since(ctx, "r", snap.Epoch, 0, 0))
		must[state.Result](t)(s.Set(ctx, "r", state.Set{Key: "b", Value: []byte("y")}))
		if _, err := s.Since(ctx, "r", snap.Epoch, 0, 0); !errors.Is(err, state.ErrTooOld) {
			t.Fatalf("since a trimmed position: %v", err)
		}
		if ch := must[[]state.Change](t)(s.Since(ctx, "r", snap.Epoch, 1, 0)); len(ch) != 3 || ch[0].Position != 2 {
			t.Fatalf("since the oldest kept: %+v", ch)
		}
		if _, err := s.Since(ctx, "r", "another", 1, 0); !errors.Is(err, state.ErrTooOld) {
			t.Fatalf("since in another epoch: %v", err)
		}
		if _, err := s.Since(ctx, "r", snap.Epoch, 99, 0); !errors.Is(err, state.ErrTooOld) {
			t.Fatalf("since a position ahead: %v", err)
		}
	})

	t.Run("since bounded in bytes", func(t *testing.T) {
		// 150 changes of 1,000-byte values: more than one of since.lua's
		// batches of 64. Each counts key (1) + value (1,000) + 32 bytes.
		s := open(t, state.Limits{}, nil)
		value := make([]byte, 1000)
		for i := range 150 {
			value[0] = byte(i)
			must[state.Result](t)(s.Set(ctx, "big", state.Set{Key: string(rune('a' + i%26)), Value: value}))
		}
		snap := must[state.Snapshot](t)(s.Snapshot(ctx, "big"))
		const each = 1 + 1000 + 32
		all := must[[]state.Change](t)(s.Since(ctx, "big", snap.Epoch, 0, 150*each))
		if len(all) != 150 || all[0].Position != 1 || all[149].Position != 150 {
			t.Fatalf("since 0 within the bound: %d changes", len(all))
		}
		for i, c := range all {
			if state.ChangeSize(c) != each || c.Position != uint64(i+1) {
				t.Fatalf("change %d: position %d size %d", i, c.Position, state.ChangeSize(c))
			}
		}
		for _, bound := range []int{150*each - 1, 100 * each, 10, 1} {
			if ch, err := s.Since(ctx, "big", snap.Epoch, 0, bound); !errors.Is(err, state.ErrTooOld) {
				t.Fatalf("since 0 bounded at %d bytes: %d changes, %v", bound, len(ch), err)
			}
		}
		if ch := must[[]state.Change](t)(s.Since(ctx, "big", snap.Epoch, 140, 10*each)); len(ch) != 10 || ch[0].Position != 141 {
			t.Fatalf("the last 10 within their bound: %d", len(ch))
		}
	})

	t.Run("ttl", func(t *testing.T) {
		c := newClock()
		s := open(t, state.Limits{}, c.Now)
		must[state.Result](t)(s.Set(ctx, "r", state.Set{Key: "lock", Value: []byte("ann"), TTL: 10 * time.Second}))
		must[state.Result](t)(s.Set(ctx, "r", state.Set{Key: "typing", Value: []byte("1"), TTL: 5 * time.Second}))
		must[state.Result](t)(s.Set(ctx, "r", state.Set{Key: "title", Value: []byte("t")}))
		snap := must[state.Snapshot](t)(s.Snapshot(ctx, "r"))
		if want := c.Now().Add(5 * time.Second); !snap.NextExpiry.Equal(want) || !snap.Entries[0].Expires.Equal(c.Now().Add(10*time.Second)) {
			t.Fatalf("deadlines: %+v", snap)
		}
		c.Advance(5 * time.Second)
		next := must[time.Time](t)(s.Expire(ctx, "r"))
		if !next.Equal(c.Now().Add(5 * time.Second)) {
			t.Fatalf("next expiry %v", next)
		}
		// Refreshing a key's TTL moves its deadline; a set without TTL
		// drops it.
		must[state.Result](t)(s.Set(ctx, "r", state.Set{Key: "lock", Value: []byte("ann"), TTL: 10 * time.Second}))
		c.Advance(9 * time.Second)
		if snap := must[state.Snapshot](t)(s.Snapshot(ctx, "r")); len(snap.Entries) != 2 {
			t.Fatalf("refreshed lock expired early: %+v", snap)
		}
		c.Advance(time.Second)
		ch := must[[]state.Change](t)(s.Since(ctx, "r", snap.Epoch, snap.Position, 0))
		if len(ch) != 3 || ch[0].Key != "typing" || !ch[0].Expired || ch[1].Key != "lock" || ch[1].Expired ||
			ch[2].Key != "lock" || !ch[2].Expired || !ch[2].Deleted || ch[2].Version != 2 {
			t.Fatalf("changes: %+v", ch)
		}
		end := must[state.Snapshot](t)(s.Snapshot(ctx, "r"))
		if len(end.Entries) != 1 || end.Entries[0].Key != "title" || !end.NextExpiry.IsZero() {
			t.Fatalf("after expiry: %+v", end)
		}
	})

	t.Run("concurrent compare and set", func(t *testing.T) {
		s := open(t, state.Limits{}, nil)
		const writers, each = 8, 25
		var wg sync.WaitGroup
		var conflicts atomic.Int64
		for w := range writers {
			wg.Go(func() {
				for range each {
					for {
						snap, err := s.Snapshot(ctx, "counter")
						if err != nil {
							t.Error(err)
							return
						}
						var v uint64
						for _, e := range snap.Entries {
							v = e.Version
						}
						_, err = s.Set(ctx, "counter", state.Set{Key: "n", Value: fmt.Appendf(nil, "%d:%d", w, v+1), CAS: true, Version: v})
						if err == nil {
							break
						}
						if !errors.Is(err, state.ErrConflict) {
							t.Error(err)
							return
						}
						conflicts.Add(1)
					}
				}
			})
		}
		wg.Wait()
		snap := must[state.Snapshot](t)(s.Snapshot(ctx, "counter"))
		if len(snap.Entries) != 1 || snap.Entries[0].Version != writers*each || snap.Position != writers*each {
			t.Fatalf("after %d successful CAS: %+v", writers*each, snap)
		}
		// Every change is one CAS that won: versions 1..N in order.
		ch := must[[]state.Change](t)(s.Since(ctx, "counter", snap.Epoch, 0, 0))
		for i, c := range ch {
			if c.Version != uint64(i+1) {
				t.Fatalf("change %d has version %d", i, c.Version)
			}
		}
		t.Logf("%d conflicts", conflicts.Load())
	})
}
