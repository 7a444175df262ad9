package pubrate_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/corral-rt/corral/core/pubrate"
)

// TestTake: a budget is per (user, room); spent, it refuses with the wait
// until the next token and stays spent; a changed rate (a reload) starts
// a new one; a negative rate is unlimited and keeps nothing.
func TestTake(t *testing.T) {
	tb := pubrate.New(1000)
	now := time.Unix(1000, 0)
	for i := range 2 {
		if _, ok := tb.Take("u", "r", 1, 2, now); !ok {
			t.Fatalf("take %d within the burst refused", i)
		}
	}
	d, ok := tb.Take("u", "r", 1, 2, now)
	if ok || d != time.Second {
		t.Fatalf("past the burst: %v %v, want refused with 1s", d, ok)
	}
	if _, ok := tb.Take("u", "r", 1, 2, now.Add(999*time.Millisecond)); ok {
		t.Fatal("a refusal gave a token back early")
	}
	if _, ok := tb.Take("u", "r", 1, 2, now.Add(time.Second)); !ok {
		t.Fatal("refused after the wait")
	}
	if _, ok := tb.Take("u", "r2", 1, 2, now); !ok {
		t.Fatal("another room shares the budget")
	}
	if _, ok := tb.Take("v", "r", 1, 2, now); !ok {
		t.Fatal("another user shares the budget")
	}
	if _, ok := tb.Take("u", "r", 10, 5, now.Add(time.Second)); !ok {
		t.Fatal("a new rate kept the old bucket")
	}
	for range 10 {
		if _, ok := tb.Take("w", "r", -1, 0, now); !ok {
			t.Fatal("a negative rate refused")
		}
	}
	if n := tb.Len(); n != 3 {
		t.Fatalf("Len = %d, want 3", n)
	}
}

// TestBounded: budgets full again are forgotten as the table grows, so it
// holds only what publishes recently; past its bound one goes per new
// one, counted, and the table never holds more.
func TestBounded(t *testing.T) {
	tb := pubrate.New(64 * 100) // 100 a shard
	now := time.Unix(1000, 0)
	for i := range 20_000 {
		// Each user publishes once, a millisecond apart: at 1/s with a
		// burst of 1, a bucket is full again a second later.
		at := now.Add(time.Duration(i) * time.Millisecond)
		if _, ok := tb.Take(fmt.Sprint("u", i), "r", 1, 1, at); !ok {
			t.Fatalf("publish %d refused", i)
		}
	}
	if n := tb.Len(); n > 64*100 {
		t.Fatalf("Len = %d past the bound", n)
	}
	if n := tb.Evicted(); n != 0 {
		t.Fatalf("%d evicted while only about 1,000 were not full again", n)
	}
	// Now 8,000 within one instant: none full again, so past the bound
	// they are evicted.
	later := now.Add(time.Hour)
	for i := range 8_000 {
		tb.Take(fmt.Sprint("x", i), "r", 1, 1, later)
	}
	if n := tb.Len(); n > 64*100 {
		t.Fatalf("Len = %d past the bound", n)
	}
	if tb.Evicted() == 0 {
		t.Fatal("nothing evicted past the bound")
	}
}
