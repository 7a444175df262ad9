package integration_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/readytest"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/outbox"
	"github.com/corral-rt/corral/protocol"
)

// liveMember is a WebSocket member of one room that stays through corral's
// crashes: when its connection drops it resumes its session from the last
// seq it received, again and again until it is back, as an app's client
// would. It records every message in the checker and in got.
type liveMember struct {
	name, room string
	w          *corralv1.Welcome
	epoch      string
	mu         sync.Mutex // guards the following fields
	got        []string   // payloads in the order received
	last       uint64
	resumes    int
	fault      string // a Reset or a lost session: the test fails with it
}

// run reads and resumes until ctx ends.
func (m *liveMember) run(ctx context.Context, t *testing.T, url string, c *client.Conn, chk *checker.Checker) {
	for {
		for f := range c.Frames() {
			if f.GetReset_() != nil {
				m.setFault(fmt.Sprintf("%s got a Reset in %s: history should have survived", m.name, m.room))
				chk.Reset(m.name, m.room)
			}
			msg := f.GetMessage()
			if msg == nil || msg.GetRoom() != m.room {
				continue
			}
			chk.Received(m.name, m.room, msg.GetSeq(), string(msg.GetPayload()))
			m.mu.Lock()
			m.got = append(m.got, string(msg.GetPayload()))
			m.last = msg.GetSeq()
			m.mu.Unlock()
		}
		c.CloseNow()
		for c = nil; c == nil; {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
			m.mu.Lock()
			last := m.last
			m.mu.Unlock()
			back, err := resumeConn(t, url, m.name, m.w, m.room, last, m.epoch)
			if err != nil {
				continue // corral is down (or just crashed again)
			}
			if !back.Welcome().GetResumed() {
				m.setFault(fmt.Sprintf("%s: corral did not resume the session", m.name))
			}
			if w := back.Welcome(); w.GetResumeToken() != "" {
				m.w = w // only this goroutine reads m.w
			}
			c = back
			m.mu.Lock()
			m.resumes++
			m.mu.Unlock()
		}
	}
}

// crashAt starts p with the crash point and waits until it has killed
// itself there; p.env is cleared for the next start.
func crashAt(t *testing.T, p *process, point string) {
	t.Helper()
	p.env = []string{outbox.CrashEnv + "=" + point}
	p.start()
	p.env = nil
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s=%s: corral did not crash within 30s", outbox.CrashEnv, point)
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("%s=%s: corral ended with %v, not by its crash point's SIGKILL", outbox.CrashEnv, point, p.cmd.ProcessState)
	}
}

func (m *liveMember) setFault(s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fault == "" {
		m.fault = s
	}
}

func (m *liveMember) snapshot() (got []string, last uint64, resumes int, fault string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got), m.last, m.resumes, m.fault
}

// TestOutboxCrashPointsRedis: corral on Redis is killed at each step of the
// relay by its crash point (outbox.CrashEnv), not by chance: before a
// publish, and after a publish before its batch's delete, at the 300th row
// (a run long enough for the members to resume into it) and at the first
// row after a restart — while an application commits
// (and rolls back) messages with their outbox rows in two rooms and live
// WebSocket members of both rooms resume their sessions across every
// crash. At the end every member received every committed row of its
// room once, in commit order, and no rolled-back row; the room's history
// holds the same; and the last corral re-published rows its predecessor
// had published and not deleted, as duplicates (the after-publish crash
// did land between a publish and its delete).
func TestOutboxCrashPointsRedis(t *testing.T) {
	bin := buildCorral(t)
	redisAddr := redistest.Start(t)
	pg, app := startOutboxApp(t)
	addr, internal := freeAddr(t), freeAddr(t)
	p := &process{t: t, bin: bin, args: []string{
		"serve", "--insecure-dev", "--addr", addr, "--internal-addr", internal, "--log-level", "warn",
		"--redis", "redis://" + redisAddr, "--redis-prefix", redistest.Prefix(t),
		"--outbox", pg.URL,
	}}
	// The first corral crashes on nothing: the members join it.
	p.start()
	t.Cleanup(p.kill9)
	readytest.Wait(t, "http://"+addr+"/readyz")
	url := "ws://" + addr + "/ws"
	d := &deployment{wsURL: url}
	ctx := testCtx(t)

	rooms := []string{"outbox:a", "outbox:b"}
	chk := checker.New()
	var members []*liveMember
	var readers sync.WaitGroup
	readCtx, stopReading := context.WithCancel(context.Background())
	defer stopReading()
	for i := range 4 {
		m := &liveMember{name: fmt.Sprintf("m%d", i), room: rooms[i%2]}
		c := dial(t, d, m.name, protocol.Encoding(i/2))
		j, err := c.Join(ctx, m.room, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		m.w, m.epoch = c.Welcome(), j.GetEpoch()
		members = append(members, m)
		readers.Go(func() { m.run(readCtx, t, url, c, chk) })
	}

	writeCtx, stopWriting := context.WithCancel(context.Background())
	var writers sync.WaitGroup
	for _, room := range rooms {
		writers.Go(func() { app.write(writeCtx, t, room) })
	}
	app.waitCommitted(t, 40) // rows delivered by the first corral
	p.kill9()

	for _, point := range []string{"before-publish:300", "after-publish:300", "before-publish:1", "after-publish:1"} {
		app.waitCommitted(t, 40) // rows committed while corral is down
		crashAt(t, p, point)
	}
	p.start()
	readytest.Wait(t, "http://"+addr+"/readyz")
	app.waitCommitted(t, 60) // live rows after the last restart
	stopWriting()
	writers.Wait()
	waitOutboxEmpty(t, app.pool)
	if n := duplicates(t, "http://"+internal+"/metrics"); n == 0 {
		t.Error("the last corral counted no duplicate: the after-publish crash left no published row undeleted")
	}

	history := map[string][]string{}
	for _, room := range rooms {
		got, _ := readRoom(t, "http://"+internal, room)
		want := app.committed(room)
		if len(want) < 50 {
			t.Fatalf("%s: the app committed only %d rows", room, len(want))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: history holds %d rows, the app committed %d; first difference at %d",
				room, len(got), len(want), firstDiff(got, want))
		}
		for i, p := range got {
			chk.Acked(room, uint64(i+1), p)
		}
		history[room] = got
	}
	// Every member catches up to its room's last row.
	for _, m := range members {
		want := history[m.room]
		if !eventually.Within(20*time.Second, func() bool { _, last, _, _ := m.snapshot(); return last == uint64(len(want)) }) {
			_, last, _, _ := m.snapshot()
			t.Fatalf("%s: at seq %d of %d after 20s", m.name, last, len(want))
		}
	}
	stopReading()
	for _, m := range members {
		got, _, resumes, fault := m.snapshot()
		if fault != "" {
			t.Error(fault)
		}
		// One resume is into the last corral; a second means the member
		// was live on a corral that then crashed at its crash point.
		if resumes < 2 {
			t.Errorf("%s resumed %d times: it was never live on a corral that crashed at its crash point", m.name, resumes)
		}
		if want := app.committed(m.room); !slices.Equal(got, want) {
			t.Errorf("%s received %d rows of %s, the app committed %d; first difference at %d",
				m.name, len(got), m.room, len(want), firstDiff(got, want))
		}
		chk.Member(m.name, m.room, 0, uint64(len(history[m.room])))
		t.Logf("%s: %d rows of %s, resumed %d times", m.name, len(got), m.room, resumes)
	}
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestOutboxCrashPointsMemory: what the memory engine promises at each
// crash point. Its history (and dedupe keys) die with the process, so the
// restarted corral's history is a new epoch; the promise is that nothing
// is lost and nothing rolled back appears: a fresh outbox, one room, one
// writer, so the Nth row the crashing corral handled is the Nth committed
// row; after the restart the history holds, once and in commit order,
// every committed row from one at or before that Nth row (the rows of the
// dead process's batch it had published and not deleted come again, in
// the new epoch) to the last.
func TestOutboxCrashPointsMemory(t *testing.T) {
	bin := buildCorral(t)
	for _, point := range []string{"before-publish:100", "after-publish:100"} {
		t.Run(point, func(t *testing.T) {
			pg, app := startOutboxApp(t)
			addr, internal := freeAddr(t), freeAddr(t)
			p := &process{t: t, bin: bin, args: []string{
				"serve", "--insecure-dev", "--addr", addr, "--internal-addr", internal, "--log-level", "warn",
				"--outbox", pg.URL,
			}}
			const room = "outbox:m"
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { app.write(ctx, t, room) })
			crashAt(t, p, point)
			app.waitCommitted(t, 50) // rows committed while corral is down
			p.start()
			t.Cleanup(p.kill9)
			readytest.Wait(t, "http://"+addr+"/readyz")
			app.waitCommitted(t, 60) // rows committed after the restart
			stop()
			wg.Wait()
			waitOutboxEmpty(t, app.pool)

			got, _ := readRoom(t, "http://"+internal, room)
			want := app.committed(room)
			if len(want) < 100 {
				t.Fatalf("the app committed only %d rows", len(want))
			}
			if len(got) == 0 {
				t.Fatal("nothing delivered after the restart")
			}
			start := slices.Index(want, got[0])
			if start < 0 {
				t.Fatalf("history begins with %q, which the app never committed", got[0])
			}
			if !slices.Equal(got, want[start:]) {
				t.Fatalf("history after the crash is not the committed rows %d.. in order: differs at %d", start, firstDiff(got, want[start:]))
			}
			if start > 99 {
				t.Fatalf("history begins at committed row %d: rows 99..%d (the crash point's row onwards) were lost", start, start-1)
			}
			t.Logf("history: committed rows %d..%d", start, len(want)-1)
		})
	}
}
