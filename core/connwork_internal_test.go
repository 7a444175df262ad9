package core

import (
	"context"
	"fmt"
	"github.com/corral-rt/corral/config"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/corral-rt/corral/core/linkserver"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// floodKinds builds the i-th frame of a flood of each client frame kind.
var floodKinds = map[string]func(i int) *corralv1.ClientFrame{
	"hello": func(int) *corralv1.ClientFrame {
		return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{}}}
	},
	"join": func(i int) *corralv1.ClientFrame {
		return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: fmt.Sprint("j", i)}}}
	},
	"leave": func(i int) *corralv1.ClientFrame {
		return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Leave{Leave: &corralv1.Leave{Room: fmt.Sprint("j", i)}}}
	},
	"publish": func(i int) *corralv1.ClientFrame {
		return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "r", Id: fmt.Sprint(i), Payload: []byte(`1`)}}}
	},
	"signal": func(i int) *corralv1.ClientFrame {
		return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{Room: "r", Key: "k", Payload: []byte(`1`)}}}
	},
	"ack": func(i int) *corralv1.ClientFrame {
		return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ack{Ack: &corralv1.Ack{Room: "r", Seq: uint64(i)}}}
	},
	"ping": func(i int) *corralv1.ClientFrame {
		return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Id: uint64(i)}}}
	},
	"setPresence": func(i int) *corralv1.ClientFrame {
		return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_SetPresence{SetPresence: &corralv1.SetPresence{Room: "r", State: []byte(fmt.Sprint(i))}}}
	},
	"presenceQuery": func(i int) *corralv1.ClientFrame {
		return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_PresenceQuery{PresenceQuery: &corralv1.PresenceQuery{Room: "r"}}}
	},
}

// replaced are the kinds a newer frame of the same room replaces while
// queued: their flood never grows the queue.
var replaced = map[string]bool{"ack": true, "setPresence": true}

// value reads a counter or a gauge.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue() + d.GetGauge().GetValue()
}

// testLink is a link without a stream, with one worker slot, so a test can
// take the slot and hold every connection's frames in their queues.
func testLink(c *Core) *linkConns {
	l := newLinkConns(c, linkserver.Unserved(c.linkOpts))
	l.workers = make(chan struct{}, 1)
	return l
}

// Take and Ready read the queue of l's link (linkQueue).
func (l *linkConns) Take(maxFrames, maxBytes int) []*linkv1.CoreFrame {
	return l.link.Take(maxFrames, maxBytes)
}
func (l *linkConns) Ready() <-chan struct{} { return l.link.Ready() }

func (c *Core) isLive(id string) bool {
	return c.attached.Lookup(id) != nil
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: not within 10 s", what)
}

// TestConnWorkFlood: while the core cannot keep up with a connection (its
// worker waits for a slot, as behind a slow store), a flood of any client
// frame kind queues at most ConnQueueFrames frames: past it the frame is
// refused (conn_backlog), the backlog dropped and the connection closed
// with CODE_BACKLOG_FULL; ack and set_presence are replaced per room
// instead. The detach then releases the session without waiting for the
// worker slot, and drops what was queued.
func TestConnWorkFlood(t *testing.T) {
	const bound, flood = 16, 200
	for kind, frame := range floodKinds {
		t.Run(kind, func(t *testing.T) {
			c := New(Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Core: config.Core{ConnQueueFrames: bound}})
			defer c.Close()
			ctx := context.Background()
			l := testLink(c)
			l.handle(ctx, &linkv1.EdgeFrame{Conn: 1, Kind: &linkv1.EdgeFrame_Attach{Attach: &linkv1.Attach{
				Hello: &corralv1.Hello{}, Identity: &corralv1.Identity{UserId: "u"},
			}}})
			w := l.conns[1]
			var id string
			waitFor(t, "attach", func() bool {
				if s, idle := w.Session(); s != nil && idle {
					id = s.SessionID()
				}
				return id != ""
			})
			l.workers <- struct{}{} // the core is busy: nothing runs
			defer func() { <-l.workers }()

			for i := range flood {
				l.handle(ctx, &linkv1.EdgeFrame{Conn: 1, Kind: &linkv1.EdgeFrame_Frame{Frame: frame(i)}})
				n := w.Depth()
				if n > bound {
					t.Fatalf("frame %d: %d frames queued, bound %d", i, n, bound)
				}
			}
			refused := value(t, c.metrics.refused.WithLabelValues(refusedBacklog.String()))
			closed := false
			for _, f := range l.Take(flood, 1<<20) {
				if f.GetClose().GetHint().GetCode() == corralv1.Code_CODE_BACKLOG_FULL {
					closed = true
				}
			}
			if replaced[kind] {
				if refused != 0 || closed || value(t, c.metrics.coalesced) != flood-1 {
					t.Fatalf("replaced per room: refused %v, closed %v, coalesced %v", refused, closed, value(t, c.metrics.coalesced))
				}
			} else if refused != 1 || !closed {
				t.Fatalf("past the bound: refused %v (want 1), closed with 4105: %v", refused, closed)
			}

			// The detach does not wait for the busy core.
			l.handle(ctx, &linkv1.EdgeFrame{Conn: 1, Kind: &linkv1.EdgeFrame_Detach{Detach: &linkv1.Detach{}}})
			waitFor(t, "session released", func() bool { return !c.isLive(id) })
			n := w.Depth()
			if n != 0 || value(t, c.metrics.backlogFrames) != 0 {
				t.Fatalf("after the detach: %d frames queued, backlog gauge %v", n, value(t, c.metrics.backlogFrames))
			}
		})
	}
}
