package edge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/internal/mono"
	dto "github.com/prometheus/client_model/go"
)

// TestBusySocketWrittenByFlusher: a busy socket's frames wait for its
// flusher's pass, with no writer goroutine, and go in one write. The
// socket is made busy by recording two writes just now (see idle), and
// the window is long, so the burst lands well inside it on any machine.
func TestBusySocketWrittenByFlusher(t *testing.T) {
	const window = time.Second
	te := startEdge(t, false, func(cfg *Config) { cfg.CoalesceWindow = window })
	cl := te.dialJoin(t, "u", "r")
	c := memberConn(t, te, "r")
	waitFor(t, "the writer to end", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.writing
	})
	now := mono.Now()
	c.flushed(now)
	c.flushed(now)
	w0, f0 := flushes(t, te)
	const burst = 5
	for i := range burst {
		c.link.dispatch(roomMessages("r", uint64(i), 1))
	}
	c.mu.Lock()
	queued, scheduled, writing := len(c.queue), c.scheduled, c.writing
	c.mu.Unlock()
	if queued != burst || !scheduled || writing {
		t.Fatalf("a busy socket's burst: %d queued, scheduled %v, writer %v; want %d, true, false", queued, scheduled, writing, burst)
	}
	readMessages(t, cl, 0, burst)
	var w uint64
	var f float64
	waitFor(t, "the write's count", func() bool { // counted just after the write
		w, f = flushes(t, te)
		return w > w0
	})
	if w-w0 != 1 || f-f0 != burst {
		t.Fatalf("the burst took %d writes for %v frames, want 1 for %d", w-w0, f-f0, burst)
	}
	c.mu.Lock()
	writing = c.writing
	c.mu.Unlock()
	if writing {
		t.Fatal("a writer goroutine runs for a socket the flusher wrote")
	}
	var d dto.Metric
	if err := te.e.metrics.flushPass.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.GetHistogram().GetSampleCount() == 0 {
		t.Fatal("corral_edge_flush_pass_seconds counted no pass")
	}
}

// TestEveryFrameWrittenAfterTrafficStops: many busy sockets in one room,
// bursts at uneven intervals, then nothing: every member reads every
// message, in order, once, through the last one. A frame left queued
// after the last burst (no pass scheduled for it) fails this. Some
// messages are large, so that sockets fill and writer goroutines take
// over from the flusher and hand back to it.
func TestEveryFrameWrittenAfterTrafficStops(t *testing.T) {
	const members, total = 30, 1500
	te := startEdge(t, false, func(cfg *Config) {
		cfg.CoalesceWindow = 5 * time.Millisecond
		// Bounds no member can reach (all of it is less), so a slow
		// reader under -race is never a slow consumer.
		cfg.QueueFrames, cfg.QueueBytes = 4096, 8<<20
	})
	cls := make([]*client.Conn, members)
	for i := range cls {
		cls[i] = te.dialJoin(t, fmt.Sprint("u", i), "r")
	}
	var links []*link
	waitFor(t, "every member", func() bool {
		seen := map[*link]bool{}
		links = links[:0]
		n := 0
		for _, c := range serverConns(te) {
			c.link.mu.Lock()
			_, ok := c.link.rooms["r"][c]
			c.link.mu.Unlock()
			if ok {
				n++
				if !seen[c.link] {
					seen[c.link] = true
					links = append(links, c.link)
				}
			}
		}
		return n == members
	})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make(chan error, members)
	var wg sync.WaitGroup
	for i, cl := range cls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := uint64(1)
			for want <= total {
				select {
				case f, ok := <-cl.Frames():
					if !ok {
						errs <- fmt.Errorf("member %d: ended at seq %d: %v", i, want, cl.Err())
						return
					}
					m := f.GetMessage()
					if m == nil {
						continue
					}
					if m.GetSeq() != want {
						errs <- fmt.Errorf("member %d: seq %d, want %d (order, loss or duplicate)", i, m.GetSeq(), want)
						return
					}
					want++
				case <-ctx.Done():
					errs <- fmt.Errorf("member %d: seq %d of %d never arrived after traffic stopped", i, want, total)
					return
				}
			}
		}()
	}
	big := make([]byte, 40<<10) // two queued make a queue full (fullLocked): a writer takes it
	for i := range big {
		big[i] = 'a'
	}
	for sent := 0; sent < total; {
		n := min(1+rand.IntN(20), total-sent)
		fs := roomMessages("r", uint64(sent), n)
		if rand.IntN(3) == 0 {
			fs[rand.IntN(n)].GetLive().GetFrame().GetMessage().Payload = []byte(`"` + string(big) + `"`)
		}
		for _, l := range links {
			l.dispatch(fs)
		}
		sent += n
		time.Sleep(time.Duration(1000+rand.IntN(7000)) * time.Microsecond)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
