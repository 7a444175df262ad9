package core_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connectinprocess"
	"github.com/corral-rt/corral/core"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/presence"
	"google.golang.org/protobuf/proto"
)

// evictCore is a core on in-memory stores the test can measure, with an
// API client and one edge Link.
type evictCore struct {
	core *core.Core
	hist *history.Memory
	pres *presence.Memory
	api  corralv1connect.RoomServiceClient
	link linkv1connect.LinkServiceLinkClientStream
	// others are the frames the last send read that were not for its
	// connection (room frames: signals, presence), in order, for receive:
	// a room frame the core sends before the Pong is not lost.
	others []*linkv1.CoreFrame
}

// receive returns the next frames of the link: first those send read
// past, then the stream's next message.
func (e *evictCore) receive(t *testing.T) []*linkv1.CoreFrame {
	t.Helper()
	if fs := e.others; len(fs) > 0 {
		e.others = nil
		return fs
	}
	res, err := e.link.Receive()
	if err != nil {
		t.Fatal(err)
	}
	return res.GetFrames()
}

func newEvictCore(t *testing.T, ttl time.Duration) *evictCore {
	t.Helper()
	e := &evictCore{hist: history.NewMemory(history.MemoryOptions{TTL: ttl})}
	cfg := core.Config{
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		History: e.hist,
	}
	cfg.SignalTick = time.Millisecond
	cfg.Presence.NewStore = func(o presence.Options) (presence.Store, error) {
		e.pres = presence.NewMemory(o)
		return e.pres, nil
	}
	cfg.Presence.Tick = time.Millisecond
	e.core = core.New(cfg)
	t.Cleanup(func() { e.core.Close() })
	srv := connect.NewServer()
	corralv1connect.RegisterRoomServiceHandler(srv, e.core.API())
	linkv1connect.RegisterLinkServiceHandler(srv, e.core)
	client := connect.NewClient(connectinprocess.New(srv))
	e.api = corralv1connect.NewRoomServiceClient(client)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	stream, err := linkv1connect.NewLinkServiceClient(client).Link(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.CloseSend(); stream.Close() })
	e.link = stream
	return e
}

// send sends client frames of connection conn (attaching it first when
// attach) and waits for their answers: a ping after them is answered
// last. It returns the server frames the connection got.
func (e *evictCore) send(t *testing.T, conn uint64, attach bool, fs ...*corralv1.ClientFrame) []*corralv1.ServerFrame {
	t.Helper()
	req := &linkv1.LinkRequest{}
	if attach {
		req.Frames = append(req.Frames, &linkv1.EdgeFrame{Conn: conn, Kind: &linkv1.EdgeFrame_Attach{Attach: &linkv1.Attach{
			Hello:    &corralv1.Hello{Client: "test"},
			Identity: &corralv1.Identity{UserId: fmt.Sprintf("user%d", conn), Join: []string{"*"}, Publish: []string{"*"}},
			Protocol: "json",
		}}})
	}
	e.others = nil // what the last send read past is for its caller only
	const pingID = 424242
	fs = append(fs, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Id: pingID}}})
	for _, f := range fs {
		req.Frames = append(req.Frames, &linkv1.EdgeFrame{Conn: conn, Kind: &linkv1.EdgeFrame_Frame{Frame: f}})
	}
	if err := e.link.Send(req); err != nil {
		t.Fatal(err)
	}
	var got []*corralv1.ServerFrame
	for {
		res, err := e.link.Receive()
		if err != nil {
			t.Fatal(err)
		}
		for _, cf := range res.GetFrames() {
			id, sf := connFrameOf(cf)
			if id != conn || sf == nil {
				e.others = append(e.others, cf)
				continue
			}
			if sf.GetPong().GetId() == pingID {
				return got
			}
			got = append(got, sf)
		}
	}
}

// connFrameOf is the connection and server frame of a frame for one
// connection (nil for a room's frames and the rest).
func connFrameOf(cf *linkv1.CoreFrame) (uint64, *corralv1.ServerFrame) {
	switch k := cf.GetKind().(type) {
	case *linkv1.CoreFrame_Conn:
		return k.Conn.GetConn(), k.Conn.GetFrame()
	case *linkv1.CoreFrame_Position:
		return k.Position.GetConn(), k.Position.GetFrame()
	case *linkv1.CoreFrame_Replay:
		return k.Replay.GetConn(), k.Replay.GetFrame()
	case *linkv1.CoreFrame_Snapshot:
		return k.Snapshot.GetConn(), k.Snapshot.GetFrame()
	case *linkv1.CoreFrame_Left:
		return k.Left.GetConn(), k.Left.GetFrame()
	case *linkv1.CoreFrame_Session:
		return k.Session.GetConn(), k.Session.GetFrame()
	}
	return 0, nil
}

func join(room string, since uint64, epoch string) *corralv1.ClientFrame {
	return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: room, SinceSeq: since, Epoch: epoch, FromPosition: epoch != "", Presence: true}}}
}

// TestCoreJoinEpochWithoutPosition: a join naming an epoch with since_seq
// 0 and no from_position is refused with CODE_INVALID_ARGUMENT (it was
// taken as live, the epoch silently ignored); with from_position it is
// the position "from the start of the epoch" and replays.
func TestCoreJoinEpochWithoutPosition(t *testing.T) {
	e := newEvictCore(t, time.Hour)
	ctx := context.Background()
	j, _ := joinedOf(e.send(t, 1, true, join("x", 0, "")), "x")
	if j == nil {
		t.Fatal("no joined")
	}
	if _, err := e.api.Publish(ctx, &corralv1.PublishRequest{Room: "x", Payload: []byte(`1`)}); err != nil {
		t.Fatal(err)
	}
	e.send(t, 1, false, leave("x"))
	bare := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: "x", Epoch: j.GetEpoch()}}}
	fs := e.send(t, 1, false, bare)
	var refused *corralv1.Error
	for _, f := range fs {
		if x := f.GetError(); x != nil {
			refused = x
		}
	}
	if refused.GetCode() != corralv1.Code_CODE_INVALID_ARGUMENT || refused.GetRoom() != "x" || !strings.Contains(refused.GetMessage(), "from_position") {
		t.Fatalf("a join with an epoch and no position got %v, want CODE_INVALID_ARGUMENT naming from_position", fs)
	}
	if j2, _ := joinedOf(fs, "x"); j2 != nil {
		t.Fatalf("the refused join was answered with %v too", j2)
	}
	fs = e.send(t, 1, false, join("x", 0, j.GetEpoch()))
	if j2, reset := joinedOf(fs, "x"); j2 == nil || reset != nil || !j2.GetReplay() {
		t.Fatalf("a join from the start of epoch %s: joined %v, reset %v; want a replay", j.GetEpoch(), j2, reset)
	}
}

func leave(room string) *corralv1.ClientFrame {
	return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Leave{Leave: &corralv1.Leave{Room: room}}}
}

// TestCoreForgetsDistinctNames churns 100,000 distinct room names through
// everything a client or a backend can name a room with: joins and leaves
// (with presence, a signal and a presence query in between), History,
// Members and Publish calls. Afterwards the core and its stores hold the
// one room still joined, and, once the history lifetime has passed, no
// other history.
func TestCoreForgetsDistinctNames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 100_000
		if testing.Short() {
			n = 10_000
		}
		const ttl = 500 * time.Millisecond
		e := newEvictCore(t, ttl)
		ctx := context.Background()
		e.send(t, 1, true, join("kept", 0, ""))
		const batch = 100 // rooms per Link message
		for i := 0; i < n; i += 4 * batch {
			var fs []*corralv1.ClientFrame
			for j := i; j < min(i+4*batch, n); j++ {
				name := fmt.Sprintf("r%d", j)
				switch j % 4 {
				case 0:
					fs = append(fs, join(name, 0, ""),
						&corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{Room: name, Key: "cursor", Payload: []byte(`1`)}}},
						&corralv1.ClientFrame{Kind: &corralv1.ClientFrame_PresenceQuery{PresenceQuery: &corralv1.PresenceQuery{Room: name}}},
						leave(name))
				case 1:
					if _, err := e.api.History(ctx, &corralv1.HistoryRequest{Room: name}); err != nil {
						t.Fatal(err)
					}
				case 2:
					if _, err := e.api.Members(ctx, &corralv1.MembersRequest{Room: name}); err != nil {
						t.Fatal(err)
					}
				case 3:
					if _, err := e.api.Publish(ctx, &corralv1.PublishRequest{Room: name, Payload: []byte(`1`)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			e.send(t, 1, false, fs...)
		}
		if got := core.RoomsLen(e.core); got != 1 {
			t.Errorf("the core holds %d rooms, want 1 (the one joined)", got)
		}
		if got := e.pres.Len(); got != 1 {
			t.Errorf("presence holds %d rooms, want 1 (the one joined)", got)
		}
		if got, want := e.hist.Len(), 1+n/4; got > want {
			t.Errorf("history holds %d rooms, want at most %d (the one joined and those published to)", got, want)
		}
		time.Sleep(2 * ttl)
		if _, err := e.api.History(ctx, &corralv1.HistoryRequest{Room: "any"}); err != nil { // runs the sweep
			t.Fatal(err)
		}
		if got := e.hist.Len(); got != 1 {
			t.Errorf("past the history lifetime history holds %d rooms, want 1 (the one joined)", got)
		}
	})
}

func joinedOf(fs []*corralv1.ServerFrame, room string) (*corralv1.Joined, *corralv1.Reset) {
	var j *corralv1.Joined
	var r *corralv1.Reset
	for _, f := range fs {
		if x := f.GetJoined(); x.GetRoom() == room {
			j = x
		}
		if x := f.GetReset_(); x.GetRoom() == room {
			r = x
		}
	}
	return j, r
}

// TestCoreRejoinAfterEvictionResets: a room whose history outlived its
// lifetime with nobody in it comes back under a new epoch, so a client
// rejoining with its old position gets a reset, not a silent gap.
func TestCoreRejoinAfterEvictionResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 50 * time.Millisecond
		e := newEvictCore(t, ttl)
		ctx := context.Background()
		j, _ := joinedOf(e.send(t, 1, true, join("x", 0, "")), "x")
		if j == nil {
			t.Fatal("no joined")
		}
		for range 3 {
			if _, err := e.api.Publish(ctx, &corralv1.PublishRequest{Room: "x", Payload: []byte(`1`)}); err != nil {
				t.Fatal(err)
			}
		}
		e.send(t, 1, false, leave("x"))
		time.Sleep(3 * ttl)
		j2, reset := joinedOf(e.send(t, 1, false, join("x", 3, j.GetEpoch())), "x")
		if reset == nil || j2 == nil || j2.GetEpoch() == j.GetEpoch() || reset.GetEpoch() != j2.GetEpoch() {
			t.Fatalf("rejoin at seq 3 of epoch %s after the history expired: reset %v, joined %v; want a reset to a new epoch",
				j.GetEpoch(), reset, j2)
		}
	})
}

// TestCoreEvictionKeepsJoinedRoom: while a room has a member its history
// is never evicted, however short the lifetime and however others join
// and leave it: every message stays under the epoch the member joined.
func TestCoreEvictionKeepsJoinedRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Millisecond
		e := newEvictCore(t, ttl)
		ctx := context.Background()
		j, _ := joinedOf(e.send(t, 1, true, join("x", 0, "")), "x")
		if j == nil {
			t.Fatal("no joined")
		}
		e.send(t, 2, true)
		const n = 100
		for i := range n {
			if _, err := e.api.Publish(ctx, &corralv1.PublishRequest{Room: "x", Payload: []byte(`1`)}); err != nil {
				t.Fatal(err)
			}
			fs := e.send(t, 2, false, join("x", uint64(i), j.GetEpoch()), leave("x"))
			if _, reset := joinedOf(fs, "x"); reset != nil {
				t.Fatalf("round %d: a rejoin at seq %d of epoch %s got %v", i, i, j.GetEpoch(), reset)
			}
			time.Sleep(2 * ttl) // past the lifetime: only the member keeps it
		}
		res, err := e.api.History(ctx, &corralv1.HistoryRequest{Room: "x"})
		if err != nil {
			t.Fatal(err)
		}
		if res.GetEpoch() != j.GetEpoch() || res.GetFirstSeq() != 1 || res.GetLastSeq() != n || len(res.GetMessages()) != n {
			t.Fatalf("history of the joined room: epoch %s seqs %d..%d (%d messages), want epoch %s seqs 1..%d",
				res.GetEpoch(), res.GetFirstSeq(), res.GetLastSeq(), len(res.GetMessages()), j.GetEpoch(), n)
		}
	})
}

// TestCoreSignalKeysBounded: a room keeps each signal key until its owner
// clears it or goes, so one session may hold at most 64 keys in a room;
// a new key past that is refused with 4408, a cleared key frees a slot.
func TestCoreSignalKeysBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEvictCore(t, time.Hour)
		e.send(t, 1, true, join("r", 0, ""))
		signal := func(key string, clear bool) *corralv1.ClientFrame {
			return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{Room: "r", Key: key, Payload: []byte(`1`), Clear: clear}}}
		}
		errorsOf := func(fs []*corralv1.ServerFrame) []*corralv1.Error {
			var out []*corralv1.Error
			for _, f := range fs {
				if x := f.GetError(); x != nil {
					out = append(out, x)
				}
			}
			return out
		}
		var fs []*corralv1.ClientFrame
		for i := range 64 {
			fs = append(fs, signal(fmt.Sprintf("k%d", i), false))
		}
		fs = append(fs, signal("k0", false)) // an old key: no new slot
		if errs := errorsOf(e.send(t, 1, false, fs...)); len(errs) != 0 {
			t.Fatalf("64 keys refused: %v", errs)
		}
		errs := errorsOf(e.send(t, 1, false, signal("new", false)))
		if len(errs) != 1 || errs[0].GetCode() != corralv1.Code_CODE_LIMIT_EXCEEDED {
			t.Fatalf("the 65th key: errors %v, want one 4408", errs)
		}
		e.send(t, 1, false, signal("k1", true))
		for i := 0; ; i++ { // the clear frees the slot at the next flush
			if errs := errorsOf(e.send(t, 1, false, signal("new", false))); len(errs) == 0 {
				break
			}
			if i == 200 {
				t.Fatal("a cleared key never freed its slot")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// TestCoreSignalTickBounded: 64 signals of 60 KB set at once (what one
// sender may hold in a room) go out over several ticks in batches of at
// most 256 KiB, the latest value of every key once; a member joining
// after them gets the snapshot in batches under the same bound. One
// batch of 3.8 MB had closed every member as a slow consumer.
func TestCoreSignalTickBounded(t *testing.T) {
	e := newEvictCore(t, time.Hour)
	const keys, bound = 64, 256 << 10
	value := []byte(`"` + strings.Repeat("v", 60<<10) + `"`)
	fs := []*corralv1.ClientFrame{join("s", 0, "")}
	for i := range keys {
		fs = append(fs, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{Room: "s", Key: fmt.Sprintf("k%d", i), Payload: value}}})
	}
	e.send(t, 1, true, fs...)
	got := map[string]bool{}
	batches := 0
	for len(got) < keys {
		for _, cf := range e.receive(t) {
			sig := cf.GetSignals()
			if sig == nil {
				continue
			}
			batches++
			b := sig.GetFrame().GetBatch()
			if n := proto.Size(b); n > bound+len(value)+64 {
				t.Fatalf("a signal batch of %d bytes (%d signals), want at most %d", n, len(b.GetFrames()), bound)
			}
			for _, f := range b.GetFrames() {
				k := f.GetSignal().GetKey()
				if got[k] || !bytes.Equal(f.GetSignal().GetPayload(), value) {
					t.Fatalf("key %s twice or with another value", k)
				}
				got[k] = true
			}
		}
	}
	if batches < 2 {
		t.Fatalf("%d keys of %d bytes in %d batch", keys, len(value), batches)
	}
	snap := map[string]bool{}
	for _, f := range e.send(t, 2, true, join("s", 0, "")) {
		b := f.GetBatch()
		if b == nil {
			continue
		}
		if n := proto.Size(b); n > bound+len(value)+64 {
			t.Fatalf("a snapshot batch of %d bytes, want at most %d", n, bound)
		}
		for _, f := range b.GetFrames() {
			snap[f.GetSignal().GetKey()] = true
		}
	}
	if len(snap) != keys {
		t.Fatalf("the snapshot holds %d keys, want %d", len(snap), keys)
	}
}
