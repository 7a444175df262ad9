package eventually_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corral-rt/corral/internal/eventually"
)

func TestTrueReturnsWhenTheConditionHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		start := time.Now()
		eventually.True(t, time.Second, func() bool { return n.Add(1) == 5 })
		if got := time.Since(start); got != 4*eventually.Tick {
			t.Fatalf("returned after %v, want %v (the fifth check)", got, 4*eventually.Tick)
		}
	})
}

func TestWithinGivesUpAtTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var checks int
		if eventually.Within(100*time.Millisecond, func() bool { checks++; return false }) {
			t.Fatal("Within = true for a condition that never holds")
		}
		if got := time.Since(start); got != 100*time.Millisecond {
			t.Fatalf("gave up after %v, want 100ms", got)
		}
		if checks < 2 {
			t.Fatalf("checked %d times", checks)
		}
	})
}

func TestNoErrorFailsWithTheLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			eventually.NoError(rec, 10*time.Millisecond, func() error { return errors.New("still down") })
		}()
		<-done
		if want := "not within 10ms: still down"; rec.msg != want {
			t.Fatalf("failed with %q, want %q", rec.msg, want)
		}
	})
}

// recorder keeps a Fatalf's message and ends the goroutine, as Fatalf does.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestWithinEveryChecksAtItsTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n int
		start := time.Now()
		if !eventually.WithinEvery(time.Second, 50*time.Millisecond, func() bool { n++; return n == 3 }) {
			t.Fatal("WithinEvery = false for a condition that holds at the third check")
		}
		if got := time.Since(start); got != 100*time.Millisecond {
			t.Fatalf("returned after %v, want 100ms (checks at 0, 50 and 100 ms)", got)
		}
	})
}
