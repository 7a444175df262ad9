package integration_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-rt/corral/apiclient"
	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// keyedClasses: a canvas with deltas and a 3-key bound for the bound
// test, and a read-only feed.
const keyedClasses = `rooms:
  - name: canvas
    match: "canvas:*"
    state:
      max-keys: 50
      max-value: 4096
      delta: true
  - name: tiny
    match: "tiny:*"
    state:
      max-keys: 3
      max-value: 64
  - name: feed
    match: "feed:*"
    publish: none
    signal: none
`

// stateMember is one member's view of a room's keyed state, fed from
// its connection's frames, and every update it got per key (with
// deltas, for checker.Values).
type stateMember struct {
	c      *client.Conn
	joined *corralv1.Joined

	mu        sync.Mutex // guards the following fields
	view      *client.State
	updates   map[string][]checker.Update
	snapshots int
	changes   int
	deltas    int
	err       error
}

// followState follows c's frames of room; held, when not nil, is the
// view the connection starts from (a resume's).
func followState(t *testing.T, c *client.Conn, room string, held *corralv1.StateSnapshot) *stateMember {
	m := &stateMember{c: c, view: client.NewState(room), updates: map[string][]checker.Update{}}
	if held != nil {
		m.view.Snapshot(held)
	}
	go func() {
		for f := range c.Frames() {
			m.mu.Lock()
			switch {
			case f.GetStateSnapshot() != nil:
				m.snapshots++
				m.view.Snapshot(f.GetStateSnapshot())
				// A snapshot starts each key's record again from the value
				// it holds.
				m.updates = map[string][]checker.Update{}
				for _, e := range f.GetStateSnapshot().GetEntries() {
					m.updates[e.GetKey()] = []checker.Update{{Version: e.GetVersion(), Value: e.GetValue()}}
				}
			case f.GetStateChange() != nil:
				ch := f.GetStateChange()
				m.changes++
				ok, err := m.view.Change(ch)
				if err != nil && m.err == nil {
					m.err = err
				}
				switch {
				case !ok:
				case ch.GetDeleted():
					delete(m.updates, ch.GetKey())
				case len(ch.GetDelta()) > 0:
					m.deltas++
					m.updates[ch.GetKey()] = append(m.updates[ch.GetKey()], checker.Update{Version: ch.GetVersion(), Delta: ch.GetDelta(), IsDelta: true})
				default:
					m.updates[ch.GetKey()] = append(m.updates[ch.GetKey()], checker.Update{Version: ch.GetVersion(), Value: ch.GetValue()})
				}
			}
			m.mu.Unlock()
		}
	}()
	return m
}

// position is the view's (epoch, position).
func (m *stateMember) position() (string, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.view.Epoch, m.view.Position
}

// matches reports how the view differs from snap ("" when it equals).
func (m *stateMember) matches(snap *corralv1.StateSnapshot) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err.Error()
	}
	if m.view.Position != snap.GetPosition() || (m.view.Epoch != snap.GetEpoch() && snap.GetPosition() > 0) {
		return fmt.Sprintf("at %s/%d, store at %s/%d", m.view.Epoch, m.view.Position, snap.GetEpoch(), snap.GetPosition())
	}
	if len(m.view.Keys()) != len(snap.GetEntries()) {
		return fmt.Sprintf("keys %v, store has %d", m.view.Keys(), len(snap.GetEntries()))
	}
	for _, e := range snap.GetEntries() {
		got, ok := m.view.Get(e.GetKey())
		if !ok || !bytes.Equal(got.Value, e.GetValue()) || got.Version != e.GetVersion() {
			return fmt.Sprintf("key %s: %q v%d, store %q v%d", e.GetKey(), got.Value, got.Version, e.GetValue(), e.GetVersion())
		}
	}
	return ""
}

// TestKeyedStateCanvas: writers set, CAS, delete and expire keys of a
// canvas room; a member joins late, one resumes after missing changes
// (the core's kept changes are replayed), one after more than the core
// keeps but fewer than the store does (the store's changes, no
// snapshot), one after more than the store keeps (a fresh snapshot,
// explicit); every member's state, rebuilt with the deltas applied
// (checker.Values), equals the store's. In memory and on Redis.
func TestKeyedStateCanvas(t *testing.T) {
	for _, mode := range []string{"serve", "redis"} {
		t.Run(mode, func(t *testing.T) {
			_, tune := classFile(t, keyedClasses)
			d := start(t, mode, nil, tune)
			ctx := testCtx(t)
			const room = "canvas:1"
			join := func(user string, enc protocol.Encoding) *stateMember {
				c := dial(t, d, user, enc)
				m := followState(t, c, room, nil)
				j, err := c.Join(ctx, room, 0, "")
				if err != nil {
					t.Fatal(err)
				}
				m.joined = j
				return m
			}
			writer := join("writer", protocol.Proto)
			early := join("early", protocol.JSON)
			cut := join("cut", protocol.Proto)
			far := join("far", protocol.Proto)
			gone := join("gone", protocol.Proto)

			// full[key][version] is what the writers set.
			full := map[string]map[uint64][]byte{}
			var fullMu sync.Mutex
			set := func(c *client.Conn, key string, value []byte, o client.StateOptions) (*corralv1.StateUpdated, error) {
				u, err := c.SetState(ctx, room, key, value, o)
				if err == nil {
					fullMu.Lock()
					if full[key] == nil {
						full[key] = map[uint64][]byte{}
					}
					full[key][u.GetVersion()] = value
					fullMu.Unlock()
				}
				return u, err
			}
			// A shape: a few hundred bytes, edited a little each time.
			shape := func(id, i int) []byte {
				return fmt.Appendf(nil, `{"id":%d,"kind":"rect","x":%d,"y":%d,"w":120,"h":80,"fill":"#336699","label":"%s"}`,
					id, 10+i, 20+i, strings.Repeat("shape label ", 8))
			}
			edits := func(c *client.Conn, n, from int) {
				for i := range n {
					if _, err := set(c, fmt.Sprintf("obj%d", i%5), shape(i%5, from+i), client.StateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			edits(writer.c, 20, 0)

			// CAS: one wins, a stale one conflicts.
			u, err := set(writer.c, "title", []byte(`"Plan"`), client.StateOptions{CAS: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := set(writer.c, "title", []byte(`"Other"`), client.StateOptions{CAS: true}); !isCode(err, corralv1.Code_CODE_VERSION_CONFLICT) {
				t.Fatalf("a CAS on a key that exists: %v, want version conflict", err)
			}
			if _, err := set(writer.c, "title", []byte(`"Plan B"`), client.StateOptions{CAS: true, Version: u.GetVersion()}); err != nil {
				t.Fatal(err)
			}
			// Keys with a TTL: their removals reach the members, one
			// deadline after the other.
			if _, err := set(writer.c, "cursor", []byte(`{"x":1}`), client.StateOptions{TTL: 200 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			if _, err := set(writer.c, "cursor2", []byte(`{"x":2}`), client.StateOptions{TTL: 400 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			// Deleted keys.
			if _, err := set(writer.c, "tmp", []byte(`1`), client.StateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := writer.c.DeleteState(ctx, room, "tmp", client.StateOptions{}); err != nil {
				t.Fatal(err)
			}
			// An API write reaches the members as a client's does.
			if _, err := d.api.SetState(ctx, &corralv1.SetStateRequest{Room: room, Key: "meta", Value: []byte(`{"by":"api"}`)}); err != nil {
				t.Fatal(err)
			}

			// cut leaves after this point, far too; they come back later
			// with their positions.
			waitConverged(t, d, room, writer, early, cut, far, gone)
			cutEpoch, cutPos := cut.position()
			farEpoch, farPos := far.position()
			goneEpoch, gonePos := gone.position()
			cut.c.CloseNow()
			far.c.CloseNow()
			gone.c.CloseNow()

			edits(writer.c, 30, 100) // fewer than the 256 kept
			// The resumed connection's view is what cut held.
			held := &corralv1.StateSnapshot{Room: room, Epoch: cutEpoch, Position: cutPos}
			cut.mu.Lock()
			for _, k := range cut.view.Keys() {
				e, _ := cut.view.Get(k)
				held.Entries = append(held.Entries, &corralv1.StateEntry{Key: k, Value: e.Value, Version: e.Version, ExpiresMs: e.ExpiresMs})
			}
			cut.mu.Unlock()
			// cut resumes its session (hello.resume) with its room's
			// message and state positions.
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			resumed, err := client.Dial(rctx, d.wsURL, client.Options{Token: "cut", Encoding: protocol.Proto, Resume: &corralv1.Resume{
				SessionId: cut.c.Welcome().GetSessionId(), ResumeToken: cut.c.Welcome().GetResumeToken(),
				Rooms: []*corralv1.RoomPosition{{Room: room, Seq: cut.joined.GetSeq(), Epoch: cut.joined.GetEpoch(),
					StatePosition: cutPos, StateEpoch: cutEpoch}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(resumed.CloseNow)
			if !resumed.Welcome().GetResumed() {
				t.Fatalf("cut's resume: %v, want resumed", resumed.Welcome())
			}
			back := followState(t, resumed, room, held)

			edits(writer.c, 300, 1000) // more than the core keeps (256), fewer than the store (1,000)
			late := join("late", protocol.JSON)
			farBack := followState(t, dial(t, d, "far", protocol.Proto), room, farView(far))
			joinAt(t, ctx, farBack.c, room, farEpoch, farPos)
			waitConverged(t, d, room, writer, early, late, back, farBack)
			edits(writer.c, 720, 2000) // gone has now missed more than the store keeps
			goneBack := followState(t, dial(t, d, "gone", protocol.Proto), room, nil)
			joinAt(t, ctx, goneBack.c, room, goneEpoch, gonePos)

			// The TTL keys expired meanwhile; every member saw them go.
			eventually.True(t, 10*time.Second, func() bool {
				s, err := d.api.GetState(ctx, &corralv1.GetStateRequest{Room: room, Keys: []string{"cursor", "cursor2"}})
				return err == nil && len(s.GetSnapshot().GetEntries()) == 0
			}, "the cursor keys expire")
			waitConverged(t, d, room, writer, early, late, back, farBack, goneBack)

			// Expiries with no write after them: the cores' timers bring
			// them, one deadline after the other.
			for i, ttl := range []time.Duration{150 * time.Millisecond, 300 * time.Millisecond} {
				if _, err := set(writer.c, fmt.Sprint("ping", i), []byte(`1`), client.StateOptions{TTL: ttl}); err != nil {
					t.Fatal(err)
				}
			}
			eventually.True(t, 10*time.Second, func() bool {
				s, err := d.api.GetState(ctx, &corralv1.GetStateRequest{Room: room, Keys: []string{"ping0", "ping1"}})
				return err == nil && len(s.GetSnapshot().GetEntries()) == 0
			}, "the ping keys expire")
			waitConverged(t, d, room, writer, early, late, back, farBack, goneBack)

			// The resumed member got only the changes it missed, no
			// snapshot; the one past what is kept got a snapshot.
			back.mu.Lock()
			if back.snapshots != 0 || back.changes < 30 {
				t.Errorf("resume within the kept changes: %d snapshots, %d changes; want 0 and the 30+ missed", back.snapshots, back.changes)
			}
			back.mu.Unlock()
			farBack.mu.Lock()
			if farBack.snapshots != 0 || farBack.changes < 330 {
				t.Errorf("resume past the core's kept changes, within the store's: %d snapshots, %d changes; want 0 and the 330+ missed", farBack.snapshots, farBack.changes)
			}
			farBack.mu.Unlock()
			goneBack.mu.Lock()
			if goneBack.snapshots != 1 {
				t.Errorf("resume past the store's kept changes: %d snapshots, want 1", goneBack.snapshots)
			}
			goneBack.mu.Unlock()

			// Every value each member rebuilt (deltas applied) is what a
			// writer set at that version.
			for name, m := range map[string]*stateMember{"writer": writer, "early": early, "late": late, "far": farBack} {
				m.mu.Lock()
				for key, ups := range m.updates {
					fullMu.Lock()
					want := full[key]
					fullMu.Unlock()
					if key == "meta" {
						continue // the API's, not recorded
					}
					if err := checker.Values(ups, want); err != nil {
						t.Errorf("%s, key %s: %v", name, key, err)
					}
				}
				if name == "early" && m.deltas == 0 {
					t.Errorf("early got no delta: the canvas class sends deltas")
				}
				m.mu.Unlock()
			}
		})
	}
}

// farView is m's view as a StateSnapshot: what a client that held it
// continues from.
func farView(m *stateMember) *corralv1.StateSnapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	held := &corralv1.StateSnapshot{Room: m.view.Room, Epoch: m.view.Epoch, Position: m.view.Position}
	for _, k := range m.view.Keys() {
		e, _ := m.view.Get(k)
		held.Entries = append(held.Entries, &corralv1.StateEntry{Key: k, Value: e.Value, Version: e.Version, ExpiresMs: e.ExpiresMs})
	}
	return held
}

// joinAt joins room on c continuing from a keyed-state position.
func joinAt(t *testing.T, ctx context.Context, c *client.Conn, room, epoch string, pos uint64) {
	t.Helper()
	if err := c.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{
		Room: room, StatePosition: pos, StateEpoch: epoch,
	}}}); err != nil {
		t.Fatal(err)
	}
}

// waitConverged waits until every member's view equals the store's state.
func waitConverged(t *testing.T, d *deployment, room string, members ...*stateMember) {
	t.Helper()
	ctx := testCtx(t)
	var last string
	ok := eventually.Within(15*time.Second, func() bool {
		s, err := d.api.GetState(ctx, &corralv1.GetStateRequest{Room: room})
		if err != nil {
			last = err.Error()
			return false
		}
		for i, m := range members {
			if diff := m.matches(s.GetSnapshot()); diff != "" {
				last = fmt.Sprintf("member %d: %s", i, diff)
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("members' state never equalled the store's: %s", last)
	}
}

func isCode(err error, code corralv1.Code) bool {
	var se *client.ServerError
	return errors.As(err, &se) && se.Err.GetCode() == code
}

// TestKeyedStateRefusals: a state write past the class's bounds, on a
// read-only class or without joining is refused with its named code, and
// nothing changes.
func TestKeyedStateRefusals(t *testing.T) {
	_, tune := classFile(t, keyedClasses)
	d := start(t, "serve", nil, tune)
	ctx := testCtx(t)
	c := dial(t, d, "alice", protocol.Proto)
	if _, err := c.SetState(ctx, "tiny:1", "k", []byte(`1`), client.StateOptions{}); !isCode(err, corralv1.Code_CODE_NOT_JOINED) {
		t.Fatalf("set without joining: %v", err)
	}
	for _, room := range []string{"tiny:1", "feed:1"} {
		if _, err := c.Join(ctx, room, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := c.SetState(ctx, "tiny:1", fmt.Sprint("k", i), []byte(`1`), client.StateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.SetState(ctx, "tiny:1", "k3", []byte(`1`), client.StateOptions{}); !isCode(err, corralv1.Code_CODE_TOO_MANY_KEYS) {
		t.Fatalf("a fourth key: %v, want too many keys", err)
	}
	if _, err := c.SetState(ctx, "tiny:1", "k0", bytes.Repeat([]byte("1"), 65), client.StateOptions{}); !isCode(err, corralv1.Code_CODE_TOO_LARGE) {
		t.Fatalf("a value past max-value: %v, want too large", err)
	}
	if _, err := c.SetState(ctx, "tiny:1", "bad\x01key", []byte(`1`), client.StateOptions{}); !isCode(err, corralv1.Code_CODE_INVALID_ARGUMENT) {
		t.Fatalf("a key with a control character: %v, want invalid argument", err)
	}
	if _, err := c.DeleteState(ctx, "tiny:1", "k0", client.StateOptions{CAS: true, Version: 7}); !isCode(err, corralv1.Code_CODE_VERSION_CONFLICT) {
		t.Fatalf("a CAS delete of another version: %v, want version conflict", err)
	}
	if _, err := c.SetState(ctx, "feed:1", "k", []byte(`1`), client.StateOptions{}); !isCode(err, corralv1.Code_CODE_FORBIDDEN) {
		t.Fatalf("a set in a read-only room: %v, want forbidden", err)
	}
	// The API writes a read-only room (it passes no client's door).
	if _, err := d.api.SetState(ctx, &corralv1.SetStateRequest{Room: "feed:1", Key: "k", Value: []byte(`1`)}); err != nil {
		t.Fatalf("API set in a read-only room: %v", err)
	}
	s, err := d.api.GetState(ctx, &corralv1.GetStateRequest{Room: "tiny:1"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.GetSnapshot().GetEntries()); n != 3 || s.GetSnapshot().GetPosition() != 3 {
		t.Fatalf("tiny:1 holds %d keys at position %d, want the 3 written at 3", n, s.GetSnapshot().GetPosition())
	}
}

// TestKeyedStateAcrossCores: two cores on one Redis (single, Cluster); writers on each,
// members on each, a late joiner on the other: every member's state,
// deltas applied, equals the store's (the state feed brings each core
// the other's writes, in order).
func TestKeyedStateAcrossCores(t *testing.T) {
	for _, mode := range []string{"redis", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			var redisURL, prefix string
			var cl *redistest.Cluster
			if mode == "cluster" {
				if testing.Short() {
					t.Skip("starts a Redis Cluster")
				}
				// Sharded pub/sub: a room's changes and messages on its one
				// channel, SSUBSCRIBEd on the node of its slot.
				cl = redistest.StartCluster(t)
				redisURL, prefix = cl.URL(), redistest.Prefix(t)
			}
			_, classes := classFile(t, keyedClasses)
			a, _, da, db := twoCores(t, func(o *server.Options) {
				classes(o)
				o.Node.InternalAddr, o.APIKeys = "127.0.0.1:0", []string{testAPIKey}
				if redisURL != "" {
					o.RedisURL, o.RedisPrefix = redisURL, prefix
				}
			})
			da.api = apiclient.New("http://"+a.InternalAddr(), testAPIKey, nil)
			ctx := testCtx(t)
			const room = "canvas:x"
			join := func(d *deployment, user string) *stateMember {
				c := dial(t, d, user, protocol.Proto)
				m := followState(t, c, room, nil)
				if _, err := c.Join(ctx, room, 0, ""); err != nil {
					t.Fatal(err)
				}
				return m
			}
			wa, wb := join(da, "wa"), join(db, "wb")
			ma, mb := join(da, "ma"), join(db, "mb")
			if cl != nil {
				// One shard channel for the room, messages and state, with
				// one subscriber per core.
				var chs []string
				for i := range 3 {
					n := cl.Node(i)
					got, err := n.Do(ctx, n.B().PubsubShardchannels().Pattern("*{"+room+"}*").Build()).AsStrSlice()
					if err != nil {
						t.Fatal(err)
					}
					for _, ch := range got {
						res, err := n.Do(ctx, n.B().PubsubShardnumsub().Channel(ch).Build()).ToArray()
						if err != nil || len(res) != 2 {
							t.Fatal(res, err)
						}
						if subs, _ := res[1].AsInt64(); subs != 2 {
							t.Errorf("%s: %d subscribers, want one per core", ch, subs)
						}
					}
					chs = append(chs, got...)
				}
				if len(chs) != 1 {
					t.Errorf("the room's shard channels: %v, want its one", chs)
				}
			}
			var g sync.WaitGroup
			for i, w := range []*stateMember{wa, wb} {
				g.Go(func() {
					for n := range 60 {
						v := fmt.Appendf(nil, `{"by":%d,"n":%d,"text":"%s"}`, i, n, strings.Repeat("the same long text ", 4))
						if _, err := w.c.SetState(ctx, room, fmt.Sprint("obj", n%4), v, client.StateOptions{}); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			g.Wait()
			late := join(db, "late")
			waitConverged(t, da, room, wa, wb, ma, mb, late)
			for name, m := range map[string]*stateMember{"ma": ma, "mb": mb} {
				m.mu.Lock()
				if m.changes < 120 {
					t.Errorf("%s applied %d changes, want the 120 written", name, m.changes)
				}
				m.mu.Unlock()
			}
		})
	}
}
