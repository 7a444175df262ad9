package integration_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/server"
	"golang.org/x/sync/errgroup"
)

// classFile writes a config file and returns a tune that runs the
// server with its room classes and reloads them from it, as --config does
// (cmd/corral builds the same from the flags and the file).
func classFile(t *testing.T, content string) (path string, tune func(*server.Options)) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "corral.yaml")
	writeFile(t, path, content)
	load := func() (*roomclass.Table, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, err := roomclass.Parse(path, data)
		if err != nil {
			return nil, err
		}
		if err := roomclass.CheckEnd(path, data); err != nil {
			return nil, err
		}
		cs, err := f.Classes(roomclass.Default(), roomclass.CheckOptions{SessionTTL: 2 * time.Minute})
		if err != nil {
			return nil, err
		}
		tb := roomclass.NewTable(roomclass.Default(), cs)
		tb.Version, tb.Hash = f.Version, f.Hash
		return tb, nil
	}
	tb, err := load()
	if err != nil {
		t.Fatal(err)
	}
	return path, func(o *server.Options) {
		if o.Mode == server.EdgeOnly {
			return // the classes are enforced by the core
		}
		o.Core.Classes = roomclass.NewLive(tb)
		o.Reload = load
		o.Core.Presence.Tick = 50 * time.Millisecond
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func refusalCode(err error) corralv1.Code {
	var se *client.ServerError
	if errors.As(err, &se) {
		return se.Err.GetCode()
	}
	return 0
}

const classesYAML = `version: one
rooms:
  - name: small
    match: "small:*"
    max-members: 1
  - name: news
    match: "news:*"
    publish: none
    signal: none
  - name: short
    match: "short:*"
    history: {size: 3, ttl: 1h}
  - name: quiet
    match: "quiet:*"
    presence: {enabled: false}
  - name: counts
    match: "counts:*"
    join-leave-events: false
`

// TestRoomClassSettings: each class setting takes effect: max members,
// read-only refusal, history size and lifetime (memory and Redis),
// presence off, counts only.
func TestRoomClassSettings(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			_, tune := classFile(t, classesYAML)
			var redisURL, prefix string
			d := start(t, mode, nil, func(o *server.Options) {
				tune(o)
				redisURL, prefix = o.RedisURL, o.RedisPrefix
			})
			ctx := testCtx(t)
			a, b := dial(t, d, "alice", protocol.JSON), dial(t, d, "bob", protocol.Proto)

			// max-members 1.
			if _, err := a.Join(ctx, "small:1", 0, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Join(ctx, "small:1", 0, ""); refusalCode(err) != corralv1.Code_CODE_LIMIT_EXCEEDED {
				t.Fatalf("second member of a max-members 1 room: %v, want CODE_LIMIT_EXCEEDED", err)
			}
			if _, err := b.Join(ctx, "lobby", 0, ""); err != nil {
				t.Fatalf("a default-class room after the refusal: %v", err)
			}

			// publish: none.
			if _, err := a.Join(ctx, "news:1", 0, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Publish(ctx, "news:1", "n1", payload(1)); refusalCode(err) != corralv1.Code_CODE_FORBIDDEN {
				t.Fatalf("publish to a read-only class: %v, want CODE_FORBIDDEN", err)
			}

			// history size 3 (Redis trims approximately: checked in
			// history's tests) and lifetime 1h.
			if _, err := a.Join(ctx, "short:1", 0, ""); err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				if _, err := a.Publish(ctx, "short:1", fmt.Sprint("s", i), payload(i)); err != nil {
					t.Fatal(err)
				}
			}
			h, err := d.api.History(ctx, &corralv1.HistoryRequest{Room: "short:1"})
			if err != nil {
				t.Fatal(err)
			}
			if mode != "redis" && (len(h.GetMessages()) != 3 || h.GetMessages()[0].GetSeq() != 3) {
				t.Fatalf("history of a size-3 class: %d messages from seq %d, want 3 from 3", len(h.GetMessages()), h.GetMessages()[0].GetSeq())
			}
			if mode == "redis" {
				if _, err := b.Publish(ctx, "lobby", "l1", payload(1)); err != nil {
					t.Fatal(err)
				}
				rc := redistest.Client(t, strings.TrimPrefix(redisURL, "redis://"))
				for key, want := range map[string]time.Duration{
					prefix + ":{short:1}:log": time.Hour, prefix + ":{short:1}:seq": time.Hour,
					prefix + ":{lobby}:log": 24 * time.Hour,
				} {
					ms, err := rc.Do(ctx, rc.B().Pttl().Key(key).Build()).AsInt64()
					if got := time.Duration(ms) * time.Millisecond; err != nil || got <= want-time.Minute || got > want {
						t.Errorf("PTTL %s = %v (%v), want about %v", key, got, err, want)
					}
				}
			}

			// presence off: a join with presence shows nobody, and the
			// members of a presence room get no frame about it.
			if _, err := a.JoinPresence(ctx, "quiet:1", nil); err != nil {
				t.Fatal(err)
			}
			w := &watcher{t: t, c: a, room: "quiet:1"}
			if _, err := b.JoinPresence(ctx, "quiet:1", nil); err != nil {
				t.Fatal(err)
			}
			w.quiet(time.Second, func(*corralv1.Presence) bool { return true })

			// join-leave-events false: counts only.
			wa := joinPresence(t, a, "counts:1", "")
			if _, err := b.JoinPresence(ctx, "counts:1", nil); err != nil {
				t.Fatal(err)
			}
			wa.until(10*time.Second, "two members counted", func(r *client.Roster) bool { return r.Members == 2 })
			for _, p := range wa.frames {
				if len(p.GetJoins()) > 0 || len(p.GetLeaves()) > 0 {
					t.Fatalf("a counts-only class sent names: %v", p)
				}
			}
		})
	}
}

// TestRoomClassReloadUnderTraffic: three publishers keep publishing to a
// room while its class's max-payload is raised by a reload (POST
// /admin/reload): a large payload refused before is accepted after, and
// the members receive every acknowledged message once, in one order.
func TestRoomClassReloadUnderTraffic(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			path, tune := classFile(t, "version: small\nrooms:\n  - name: live\n    match: \"live:*\"\n    max-payload: 100\n")
			d := start(t, mode, nil, tune)
			ctx := testCtx(t)
			const room, perPublisher = "live:1", 300
			big := []byte(`"` + strings.Repeat("x", 500) + `"`)
			conns := make([]*client.Conn, 3)
			chk := checker.New()
			for i := range conns {
				conns[i] = dial(t, d, fmt.Sprintf("user%d", i), protocol.JSON)
				if _, err := conns[i].Join(ctx, room, 0, ""); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := conns[0].Publish(ctx, room, "big-before", big); refusalCode(err) != corralv1.Code_CODE_TOO_LARGE {
				t.Fatalf("a 502-byte payload under max-payload 100: %v, want CODE_TOO_LARGE", err)
			}
			var acked atomic.Int64
			var recv sync.WaitGroup
			done := make(chan struct{})
			for i, c := range conns {
				name := fmt.Sprintf("user%d", i)
				chk.Member(name, room, 0, 0)
				recv.Add(1)
				go func() {
					defer recv.Done()
					for {
						select {
						case f, ok := <-c.Frames():
							if !ok {
								return
							}
							if m := f.GetMessage(); m != nil {
								chk.Received(name, m.GetRoom(), m.GetSeq(), m.GetId())
							}
						case <-done:
							return
						}
					}
				}()
			}
			g, gctx := errgroup.WithContext(ctx)
			for i, c := range conns {
				g.Go(func() error {
					for k := range perPublisher {
						id := fmt.Sprintf("p%d-%d", i, k)
						p, err := c.Publish(gctx, room, id, payload(k))
						if err != nil {
							return fmt.Errorf("publish %s: %w", id, err)
						}
						chk.Acked(room, p.GetSeq(), id)
						acked.Add(1)
					}
					return nil
				})
			}
			// Reload in the middle of the traffic.
			eventually.True(t, 30*time.Second, func() bool { return acked.Load() >= perPublisher }, "traffic before the reload")
			writeFile(t, path, "version: large\nrooms:\n  - name: live\n    match: \"live:*\"\n    max-payload: 1000\n")
			req, _ := http.NewRequestWithContext(ctx, "POST", d.apiURL+"/admin/reload", nil)
			req.Header.Set("Authorization", "Bearer "+testAPIKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"version":"large"`) {
				t.Fatalf("POST /admin/reload: %d %s", resp.StatusCode, body)
			}
			p, err := conns[0].Publish(ctx, room, "big-after", big)
			if err != nil {
				t.Fatalf("a 502-byte payload after the reload to max-payload 1000: %v", err)
			}
			chk.Acked(room, p.GetSeq(), "big-after")
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
			total := 3*perPublisher + 1
			eventually.Within(30*time.Second, func() bool {
				for i := range conns {
					if chk.Count(fmt.Sprintf("user%d", i), room) < total {
						return false
					}
				}
				return true
			})
			close(done)
			recv.Wait()
			if err := chk.Check(); err != nil {
				t.Fatal(err)
			}
			for i := range conns {
				if n := chk.Count(fmt.Sprintf("user%d", i), room); n != total {
					t.Fatalf("user%d received %d messages, want %d", i, n, total)
				}
			}

			// An invalid file is refused and the classes in force stay.
			writeFile(t, path, "rooms:\n  - name: live\n    match: \"live:*\"\n    max-payload: -1\n")
			if _, err := d.apiNode.Reload(); err == nil || !strings.Contains(err.Error(), ":4: rooms[0](live).max-payload") {
				t.Fatalf("reload of an invalid file: %v", err)
			}
			if _, err := conns[1].Publish(ctx, room, "big-kept", big); err != nil {
				t.Fatalf("after a refused reload the old limit must stay: %v", err)
			}
		})
	}
}

// TestRoomClassReloadKeepsPolicy: a reload that would weaken policy by
// accident is refused and the classes in force stay: an empty file, a
// file cut short, a file with no room classes, a file without the class
// a room in use belongs to (a publish into the read-only room stays
// refused after each); once the room is empty, the class may go.
func TestRoomClassReloadKeepsPolicy(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			full := "version: one\nrooms:\n  - name: news\n    match: \"news:*\"\n    publish: none\n  - name: chat\n    match: \"chat:*\"\n"
			path, tune := classFile(t, full)
			d := start(t, mode, nil, tune)
			ctx := testCtx(t)
			a := dial(t, d, "alice", protocol.JSON)
			if _, err := a.Join(ctx, "news:1", 0, ""); err != nil {
				t.Fatal(err)
			}
			for name, content := range map[string]string{
				"empty":         "",
				"cut short":     full[:60],
				"no classes":    "version: two\n",
				"news is gone":  "version: two\nrooms:\n  - name: chat\n    match: \"chat:*\"\n",
				"news, renamed": "version: two\nrooms:\n  - name: headlines\n    match: \"news:*\"\n    publish: none\n",
			} {
				writeFile(t, path, content)
				if _, err := d.apiNode.Reload(); err == nil {
					t.Fatalf("%s: reload accepted", name)
				}
				if _, err := a.Publish(ctx, "news:1", "n-"+name, payload(1)); refusalCode(err) != corralv1.Code_CODE_FORBIDDEN {
					t.Fatalf("%s: a publish into the read-only room after a refused reload: %v, want CODE_FORBIDDEN", name, err)
				}
			}
			if err := a.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Leave{Leave: &corralv1.Leave{Room: "news:1"}}}); err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, "version: two\nrooms:\n  - name: chat\n    match: \"chat:*\"\n")
			var err error
			if !eventually.WithinEvery(10*time.Second, 20*time.Millisecond, func() bool {
				_, err = d.apiNode.Reload()
				return err == nil
			}) {
				t.Fatalf("reload without news after its room emptied: %v", err)
			}
		})
	}
}
