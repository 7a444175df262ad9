package gorun

import (
	"bytes"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// goid is the running goroutine's id, from its stack's header.
func goid() string {
	var b [64]byte
	n := runtime.Stack(b[:], false)
	f := bytes.Fields(b[:n])
	return string(f[1])
}

// TestReuse: a function handed to the pool while one of its goroutines
// waits runs on that goroutine; past the idle time the goroutine has
// ended, and the next runs on a new one.
func TestReuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(time.Second)
		ids := make(chan string, 1)
		p.Go(func() { ids <- goid() })
		first := <-ids
		synctest.Wait() // the goroutine waits for the next function
		p.Go(func() { ids <- goid() })
		if id := <-ids; id != first {
			t.Fatalf("ran on goroutine %s, want %s (the pool's, waiting)", id, first)
		}
		time.Sleep(2 * time.Second) // past the idle time: the fake clock of the bubble
		synctest.Wait()
		p.Go(func() { ids <- goid() })
		if id := <-ids; id == first {
			t.Fatalf("ran on goroutine %s, which should have ended after its idle time", id)
		}
		time.Sleep(2 * time.Second) // the pool's goroutine ends
	})
}

// TestConcurrent: functions handed while every goroutine of the pool is
// busy run at once, each on a goroutine of its own.
func TestConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(time.Second)
		release := make(chan struct{})
		started := make(chan string, 3)
		for range 3 {
			p.Go(func() { started <- goid(); <-release })
		}
		seen := map[string]bool{}
		for range 3 {
			seen[<-started] = true
		}
		close(release)
		time.Sleep(2 * time.Second) // the pool's goroutines end
		if len(seen) != 3 {
			t.Fatalf("3 blocking functions ran on %d goroutines, want 3", len(seen))
		}
	})
}

// TestClose: Close ends the pool's waiting goroutines at once (the bubble
// would not end with one left), and what Go is given after it still runs.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(time.Hour)
		ran := make(chan bool, 2)
		p.Go(func() { ran <- true })
		<-ran
		synctest.Wait()
		p.Close()
		p.Go(func() { ran <- true })
		<-ran
	})
}
