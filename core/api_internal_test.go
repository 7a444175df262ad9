package core

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"google.golang.org/protobuf/proto"
)

// historyPageBytes is core/api's bound of a History page's messages.
const historyPageBytes = 4 << 20

// A History page is bounded in bytes: 100 messages of ~60 KiB come back
// in pages of at most historyPageBytes, each saying there is more,
// and paging on returns every message once, in order.
func TestHistoryPageBytesBounded(t *testing.T) {
	ctx := context.Background()
	c := newTestCore(t, Config{})
	big := []byte(`"` + strings.Repeat("x", 60<<10) + `"`)
	const n = 100
	for i := range n {
		if _, err := c.api.Publish(ctx, &corralv1.PublishRequest{Room: "big", Payload: big}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	var got []uint64
	after := uint64(0)
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("paging does not end")
		}
		resp, err := c.api.History(ctx, &corralv1.HistoryRequest{Room: "big", AfterSeq: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, m := range resp.GetMessages() {
			size += proto.Size(m)
			got = append(got, m.GetSeq())
		}
		if size > historyPageBytes {
			t.Fatalf("page of %d bytes, bound %d", size, historyPageBytes)
		}
		if !resp.GetMore() {
			break
		}
		after = resp.GetMessages()[len(resp.GetMessages())-1].GetSeq()
	}
	if len(got) != n {
		t.Fatalf("paged %d messages, want %d", len(got), n)
	}
	for i, s := range got {
		if s != uint64(i+1) {
			t.Fatalf("message %d has seq %d", i, s)
		}
	}
}

// The History of a room that never existed reads as empty and does not
// make the room: no epoch is invented for it.
func TestHistoryOfUnknownRoomPeeks(t *testing.T) {
	c := newTestCore(t, Config{})
	resp, err := c.api.History(context.Background(), &corralv1.HistoryRequest{Room: "never-was"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetMessages()) != 0 || resp.GetEpoch() != "" || resp.GetLastSeq() != 0 {
		t.Fatalf("History of an unknown room = %v, want an empty page with no epoch", resp)
	}
}

// The control bus's command kinds (core/api control.go): the first byte,
// the request in protobuf after it.
const (
	controlSubscribe   byte = 's'
	controlUnsubscribe byte = 'u'
)

// fakeBus is a ControlBus whose other cores are the test: it records what
// this core publishes, and fire plays another core's command.
type fakeBus struct {
	mu        sync.Mutex
	published [][]byte
	listen    func([]byte)
}

func (b *fakeBus) Publish(ctx context.Context, cmd []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.published = append(b.published, cmd)
	return 1, nil
}

func (b *fakeBus) Listen(fn func([]byte)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.listen = fn
}

func (b *fakeBus) fire(kind byte, m proto.Message) {
	raw, _ := proto.Marshal(m)
	b.mu.Lock()
	fn := b.listen
	b.mu.Unlock()
	fn(append([]byte{kind}, raw...))
}

// attachConn attaches connection conn of user on l and waits until the
// attach has run.
func attachConn(t *testing.T, l *linkConns, conn uint64, user string) *session {
	t.Helper()
	l.handle(context.Background(), &linkv1.EdgeFrame{Conn: conn, Kind: &linkv1.EdgeFrame_Attach{Attach: &linkv1.Attach{
		Hello: &corralv1.Hello{}, Identity: &corralv1.Identity{UserId: user, Join: []string{"*"}},
	}}})
	w := l.conns[conn]
	var s *session
	waitFor(t, "attach", func() bool {
		if ws, idle := w.Session(); ws != nil && idle {
			s = ws
		}
		return s != nil
	})
	return s
}

// TestControlAcrossCores: Subscribe and Unsubscribe are published on the
// control bus for the other cores, and a command from another core is
// applied to this core's connections of the user (Joined; Left with
// CODE_UNSUBSCRIBED), not to others'. A command that does not decode is
// counted and dropped.
func TestControlAcrossCores(t *testing.T) {
	bus := &fakeBus{}
	c := newTestCore(t, Config{Control: bus})
	l := testLink(c)
	attachConn(t, l, 1, "ann")
	attachConn(t, l, 2, "bob")
	frames(t, l, 2) // the Welcomes

	ctx := context.Background()
	res, err := c.api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "zed", Rooms: []string{"x"}})
	if err != nil || res.GetOtherCores() != 1 || res.GetConnections() != 0 {
		t.Fatalf("subscribe: %v %v", res, err)
	}
	if _, err := c.api.Unsubscribe(ctx, &corralv1.UnsubscribeRequest{UserId: "zed", Rooms: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	bus.mu.Lock()
	pub := bus.published
	bus.mu.Unlock()
	if len(pub) != 2 || pub[0][0] != controlSubscribe || pub[1][0] != controlUnsubscribe {
		t.Fatalf("published %q", pub)
	}
	var m corralv1.SubscribeRequest
	if err := proto.Unmarshal(pub[0][1:], &m); err != nil || m.GetUserId() != "zed" {
		t.Fatalf("published subscribe decodes to %v, %v", &m, err)
	}

	bus.fire(controlSubscribe, &corralv1.SubscribeRequest{UserId: "ann", Rooms: []string{"hall"}})
	got := frames(t, l, 1)
	if j := got[0].GetJoined(); j.GetRoom() != "hall" {
		t.Fatalf("after a remote subscribe: %v", got)
	}
	bus.fire(controlUnsubscribe, &corralv1.UnsubscribeRequest{UserId: "ann", Rooms: []string{"hall"}})
	got = frames(t, l, 1)
	if lf := got[0].GetLeft(); lf.GetRoom() != "hall" || lf.GetCode() != corralv1.Code_CODE_UNSUBSCRIBED || lf.GetReason() != "the application removed this connection from the room" {
		t.Fatalf("after a remote unsubscribe: %v", got)
	}

	bad := c.metrics.dropped.WithLabelValues("bad_control")
	bus.mu.Lock()
	fn := bus.listen
	bus.mu.Unlock()
	fn([]byte("?junk"))
	fn(nil)
	bus.fire(controlSubscribe, &corralv1.SubscribeRequest{UserId: "ann", Rooms: []string{""}})
	if v := value(t, bad); v != 3 {
		t.Fatalf("bad commands counted %v, want 3", v)
	}
	if q := l.Take(100, 1<<20); len(q) != 0 {
		t.Fatalf("bad commands reached the connections: %v", q)
	}
}

// TestSubscribeDroppedWithTheConnection: a Subscribe waiting behind a busy
// connection returns as soon as the connection goes away, without it.
func TestSubscribeDroppedWithTheConnection(t *testing.T) {
	c := newTestCore(t, Config{})
	l := testLink(c)
	attachConn(t, l, 1, "ann")
	l.workers <- struct{}{} // the core is busy: nothing runs
	defer func() { <-l.workers }()
	done := make(chan *corralv1.SubscribeResponse, 1)
	go func() {
		res, err := c.api.Subscribe(context.Background(), &corralv1.SubscribeRequest{UserId: "ann", Rooms: []string{"hall"}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitFor(t, "task queued", func() bool {
		w := l.conns[1]
		return w.Depth() == 1
	})
	l.handle(context.Background(), &linkv1.EdgeFrame{Conn: 1, Kind: &linkv1.EdgeFrame_Detach{Detach: &linkv1.Detach{}}})
	select {
	case res := <-done:
		if res.GetConnections() != 0 || res.GetResults()[0].GetJoined() != 0 {
			t.Fatalf("subscribe of a dropped connection: %v", res)
		}
	case <-time.After(controlWait / 2):
		t.Fatal("Subscribe still waits for a connection that is gone")
	}
}

// TestSubscribePending: a Subscribe whose connection is busy past the
// call's deadline answers it pending; the join still happens once the
// connection's queue runs, and does not touch the answered response.
func TestSubscribePending(t *testing.T) {
	c := newTestCore(t, Config{})
	l := testLink(c)
	attachConn(t, l, 1, "ann")
	frames(t, l, 1)         // the Welcome
	l.workers <- struct{}{} // the core is busy: nothing runs
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res, err := c.api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "ann", Rooms: []string{"hall"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetConnections() != 1 || res.GetPending() != 1 || res.GetResults()[0].GetJoined() != 0 {
		t.Fatalf("subscribe of a busy connection: %v", res)
	}
	<-l.workers
	if j := frames(t, l, 1)[0].GetJoined(); j.GetRoom() != "hall" {
		t.Fatalf("after the queue ran: %v", j)
	}
	_ = proto.Size(res) // read after the late task: no race
	if res.GetResults()[0].GetJoined() != 0 {
		t.Fatalf("the late task changed the answered response: %v", res)
	}
}

// TestBatchRoomOrder: in a parallel Batch each room's items get seqs in
// item order, and a room's items after a failed one are aborted while
// other rooms go on.
func TestBatchRoomOrder(t *testing.T) {
	c := newTestCore(t, Config{})
	var items []*corralv1.PublishRequest
	for i := range 60 {
		items = append(items, &corralv1.PublishRequest{Room: fmt.Sprintf("r%d", i%3), Payload: []byte(fmt.Sprint(i))})
	}
	items[30].IdempotencyKey = strings.Repeat("k", 257) // r0's 11th item is invalid
	res, err := c.api.Batch(context.Background(), &corralv1.BatchRequest{Publishes: items, Parallel: true})
	if err != nil {
		t.Fatal(err)
	}
	seq := map[string]uint64{}
	for i, r := range res.GetResults() {
		room := items[i].GetRoom()
		switch {
		case room == "r0" && i == 30:
			if r.GetErrorCode() != "invalid_argument" {
				t.Fatalf("item 30: %v", r)
			}
		case room == "r0" && i > 30:
			if r.GetErrorCode() != "aborted" {
				t.Fatalf("item %d after r0's failure: %v", i, r)
			}
		default:
			if r.GetErrorCode() != "" || r.GetSeq() != seq[room]+1 {
				t.Fatalf("item %d: %v, want seq %d", i, r, seq[room]+1)
			}
			seq[room] = r.GetSeq()
		}
	}
	if res.GetFailed() != 10 || seq["r0"] != 10 || seq["r1"] != 20 || seq["r2"] != 20 {
		t.Fatalf("failed %d, seqs %v", res.GetFailed(), seq)
	}
}

// apiPublish publishes payload to room as the internal API does.
func apiPublish(ctx context.Context, c *Core, room string, payload []byte) (history.AppendResult, error) {
	return apiCore{c}.Publish(ctx, &corralv1.Message{Room: room, Payload: payload, TimeMs: time.Now().UnixMilli()}, "", history.Sender{})
}

// TestAPIPublishSeq: an API publish with seq is stored only after the one
// before in its stream (failed_precondition, nothing stored, otherwise);
// a retry with its key is a duplicate; streams are apart from each other
// (by stream, else sender); a seq without a key or a stream is invalid;
// Batch items obey the same (a refused item aborts its room's later ones).
func TestAPIPublishSeq(t *testing.T) {
	ctx := context.Background()
	c := newTestCore(t, Config{})
	pub := func(key, sender, stream string, seq uint64) (*corralv1.PublishResponse, error) {
		return c.api.Publish(ctx, &corralv1.PublishRequest{Room: "r", Payload: []byte(`1`), IdempotencyKey: key, Sender: sender, Stream: stream, Seq: seq})
	}
	steps := []struct {
		name                string
		key, sender, stream string
		seq                 uint64
		code                connect.Code // 0: stored
		dup                 bool
	}{
		{"first", "a1", "bot", "", 1, 0, false},
		{"gap", "a3", "bot", "", 3, connect.CodeFailedPrecondition, false},
		{"next", "a2", "bot", "", 2, 0, false},
		{"retry", "a2", "bot", "", 2, 0, true},
		{"after the gap", "a3", "bot", "", 3, 0, false},
		{"another stream", "b1", "bot", "other", 1, 0, false},
		{"its gap", "b3", "bot", "other", 3, connect.CodeFailedPrecondition, false},
		{"no key", "", "bot", "", 4, connect.CodeInvalidArgument, false},
		{"no stream", "c1", "", "", 1, connect.CodeInvalidArgument, false},
		{"no seq", "", "", "", 0, 0, false},
	}
	for _, s := range steps {
		res, err := pub(s.key, s.sender, s.stream, s.seq)
		if s.code != 0 {
			if connect.CodeOf(err) != s.code {
				t.Fatalf("%s: %v, want %v", s.name, err, s.code)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if res.GetDuplicate() != s.dup {
			t.Fatalf("%s: duplicate %v, want %v", s.name, res.GetDuplicate(), s.dup)
		}
	}
	out, err := c.api.Batch(ctx, &corralv1.BatchRequest{Publishes: []*corralv1.PublishRequest{
		{Room: "r", Payload: []byte(`1`), IdempotencyKey: "a5", Sender: "bot", Seq: 5},
		{Room: "r", Payload: []byte(`1`), IdempotencyKey: "a4", Sender: "bot", Seq: 4},
		{Room: "q", Payload: []byte(`1`), IdempotencyKey: "q1", Sender: "bot", Seq: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, r := range out.GetResults() {
		codes = append(codes, r.GetErrorCode())
	}
	if want := []string{"failed_precondition", "aborted", ""}; fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Fatalf("batch results %q, want %q", codes, want)
	}
}
