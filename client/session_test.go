package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/server"
)

// fast keeps reconnects quick in tests; the shape is the default one.
var fast = client.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}

// startCorral runs corral in one process on a free port until the test
// ends, and waits until it is ready.
func startCorral(t *testing.T, tune func(*server.Options)) *server.Node {
	t.Helper()
	opts := server.Options{
		Mode:   server.Serve,
		Addr:   "127.0.0.1:0",
		Auth:   auth.Dev{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if tune != nil {
		tune(&opts)
	}
	n, err := server.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	if err := waitReady(n.Addr(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return n
}

func waitReady(addr string, within time.Duration) error {
	if eventually.Within(within, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		return nil
	}
	return fmt.Errorf("corral at %s never became ready", addr)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// plain dials a plain Conn straight to corral, joined to room, with its
// frames on the returned channel.
func plain(t *testing.T, n *server.Node, user, room string) *client.Conn {
	t.Helper()
	ctx := testCtx(t)
	c, err := client.Dial(ctx, "ws://"+n.Addr()+"/ws", client.Options{Token: user})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseNow)
	if _, err := c.Join(ctx, room, 0, ""); err != nil {
		t.Fatal(err)
	}
	return c
}

func connect(t *testing.T, url, user string) *client.Session {
	t.Helper()
	s, err := client.Connect(testCtx(t), url, client.SessionOptions{Options: client.Options{Token: user}, Backoff: fast})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// recorder consumes a Session's events, feeding a checker.
type recorder struct {
	name string
	chk  *checker.Checker

	mu     sync.Mutex // guards the following fields
	events []client.Event
	ids    []string // message ids, in order of arrival
}

func record(s *client.Session, name string, chk *checker.Checker) *recorder {
	r := &recorder{name: name, chk: chk}
	go func() {
		for ev := range s.Events() {
			r.mu.Lock()
			r.events = append(r.events, ev)
			switch ev.Kind {
			case client.EventFrame:
				if m := ev.Frame.GetMessage(); m != nil {
					chk.Received(name, m.GetRoom(), m.GetSeq(), m.GetId())
					r.ids = append(r.ids, m.GetId())
				}
			case client.EventReset:
				chk.Reset(name, ev.Room)
			}
			r.mu.Unlock()
		}
	}()
	return r
}

// wait polls until cond (called with the lock held) holds.
func (r *recorder) wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !eventually.Within(15*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return cond()
	}) {
		r.mu.Lock()
		defer r.mu.Unlock()
		t.Fatalf("timed out waiting for %s; events: %s", what, r.describe())
	}
}

// has reports whether an event of kind (with resumed, for EventConnected)
// arrived at or after index from. Lock must be held.
func (r *recorder) has(from int, kind client.EventKind, resumed bool) bool {
	for _, ev := range r.events[min(from, len(r.events)):] {
		if ev.Kind == kind && (kind != client.EventConnected || ev.Resumed == resumed) {
			return true
		}
	}
	return false
}

// states lists the non-frame events as "connected(resumed)",
// "disconnected", "reset(room)". Lock must be held.
func (r *recorder) states() []string {
	var out []string
	for _, ev := range r.events {
		switch ev.Kind {
		case client.EventConnected:
			out = append(out, fmt.Sprintf("connected(%t)", ev.Resumed))
		case client.EventDisconnected:
			out = append(out, "disconnected")
		case client.EventReset:
			out = append(out, "reset("+ev.Room+")")
		}
	}
	return out
}

func (r *recorder) describe() string {
	return fmt.Sprintf("%v, %d messages", r.states(), len(r.ids))
}

// publisher publishes numbered messages through a plain Conn, recording
// the acknowledgements.
type publisher struct {
	t    *testing.T
	c    *client.Conn
	room string
	chk  *checker.Checker
	n    int
}

func (p *publisher) publish(count int) uint64 {
	p.t.Helper()
	var last uint64
	for range count {
		p.n++
		id := fmt.Sprintf("p%d", p.n)
		res, err := p.c.Publish(testCtx(p.t), p.room, id, fmt.Appendf(nil, `{"n":%d}`, p.n))
		if err != nil {
			p.t.Fatal(err)
		}
		p.chk.Acked(p.room, res.GetSeq(), id)
		last = res.GetSeq()
	}
	return last
}

func drain(c *client.Conn) {
	go func() {
		for range c.Frames() {
		}
	}()
}

// TestSessionResumesAfterCut: the network between a Session and corral is
// reset and stays down while the room moves on; the Session resumes by
// itself and delivers exactly the missed messages, in order, then live
// ones.
func TestSessionResumesAfterCut(t *testing.T) {
	node := startCorral(t, nil)
	px := newProxy(t, node.Addr())
	ctx := testCtx(t)
	const room = "lecture"
	chk := checker.New()
	teacher := plain(t, node, "teacher", room)
	drain(teacher)
	pub := &publisher{t: t, c: teacher, room: room, chk: chk}

	s := connect(t, px.url(), "student")
	r := record(s, "student", chk)
	if _, err := s.Join(ctx, room); err != nil {
		t.Fatal(err)
	}
	first := s.Welcome()

	pub.publish(20)
	r.wait(t, "20 messages", func() bool { return len(r.ids) == 20 })

	px.cut(true)
	r.wait(t, "the drop", func() bool { return r.has(0, client.EventDisconnected, false) })
	pub.publish(50) // missed while cut
	px.restore()
	r.wait(t, "the resume", func() bool { return r.has(0, client.EventConnected, true) })
	last := pub.publish(30)
	r.wait(t, "100 messages", func() bool { return len(r.ids) == 100 })

	chk.Member("student", room, 0, last)
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	states := r.states()
	r.mu.Unlock()
	if want := []string{"connected(false)", "disconnected", "connected(true)"}; !slices.Equal(states, want) {
		t.Fatalf("state events %v, want %v", states, want)
	}
	if got := s.Welcome().GetSessionId(); got != first.GetSessionId() {
		t.Fatalf("session %s after the resume, want %s", got, first.GetSessionId())
	}
	att := s.Attempts()
	if len(att) != 2 || att[0] != 1 || att[1] < 1 {
		t.Fatalf("attempts %v, want [1 n]", att)
	}
	// Nothing more arrives: no duplicate after the seam. A message
	// published last arrives after any duplicate would have.
	pub.publish(1)
	marker := fmt.Sprintf("p%d", pub.n)
	r.wait(t, "the message after the seam", func() bool { return len(r.ids) > 0 && r.ids[len(r.ids)-1] == marker })
	if err := chk.Check(); err != nil || chk.Count("student", room) != 101 || len(r.ids) != 101 {
		t.Fatalf("after settling: %d messages, %v", chk.Count("student", room), err)
	}
}

// TestSessionPublishAcrossCut: a publish whose acknowledgement is lost
// with the connection is sent again, with the same id, after the resume,
// and applied once.
func TestSessionPublishAcrossCut(t *testing.T) {
	node := startCorral(t, nil)
	px := newProxy(t, node.Addr())
	ctx := testCtx(t)
	const room = "ledger"
	watcher := plain(t, node, "watcher", room)

	s := connect(t, px.url(), "writer")
	r := record(s, "writer", checker.New())
	if _, err := s.Join(ctx, room); err != nil {
		t.Fatal(err)
	}

	px.mute.Store(true) // the server hears the publish; the ack is lost
	type result struct {
		p   *corralv1.Published
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := s.Publish(ctx, room, "once", []byte(`"applied once"`))
		done <- result{p, err}
	}()
	seen := nextMessage(t, watcher)
	if seen.GetId() != "once" {
		t.Fatalf("watcher got %v", seen)
	}
	select {
	case res := <-done:
		t.Fatalf("publish returned %v, %v while its ack was swallowed", res.p, res.err)
	case <-time.After(50 * time.Millisecond):
	}
	px.cut(false)

	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.p.GetSeq() != seen.GetSeq() || !res.p.GetDuplicate() {
		t.Fatalf("publish answered %v, want a duplicate of seq %d", res.p, seen.GetSeq())
	}
	if _, err := s.Publish(ctx, room, "after", []byte(`"next"`)); err != nil {
		t.Fatal(err)
	}
	if m := nextMessage(t, watcher); m.GetId() != "after" || m.GetSeq() != seen.GetSeq()+1 {
		t.Fatalf("watcher's next message is %v, want id after at seq %d", m, seen.GetSeq()+1)
	}
	// The writer's own copy arrives once too, from the resume's replay.
	r.wait(t, "both messages", func() bool { return len(r.ids) == 2 })
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Equal(r.ids, []string{"once", "after"}) {
		t.Fatalf("session received %v", r.ids)
	}
}

func nextMessage(t *testing.T, c *client.Conn) *corralv1.Message {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case f, ok := <-c.Frames():
			if !ok {
				t.Fatalf("connection ended: %v", c.Err())
			}
			if m := f.GetMessage(); m != nil {
				return m
			}
		case <-timeout:
			t.Fatal("timed out waiting for a message")
		}
	}
}

// TestSessionExpired: cut for longer than the session TTL, the Session
// starts a new session, rejoins its rooms and reports a Reset for each;
// live messages continue after the Reset's seq.
func TestSessionExpired(t *testing.T) {
	node := startCorral(t, func(o *server.Options) { o.Core.SessionTTL = time.Second })
	px := newProxy(t, node.Addr())
	ctx := testCtx(t)
	const room = "brief"
	chk := checker.New()
	teacher := plain(t, node, "teacher", room)
	drain(teacher)
	pub := &publisher{t: t, c: teacher, room: room, chk: chk}

	s := connect(t, px.url(), "student")
	r := record(s, "student", chk)
	if _, err := s.Join(ctx, room); err != nil {
		t.Fatal(err)
	}
	first := s.Welcome()
	pub.publish(5)
	r.wait(t, "5 messages", func() bool { return len(r.ids) == 5 })

	px.cut(true)
	r.wait(t, "the drop", func() bool { return r.has(0, client.EventDisconnected, false) })
	lost := pub.publish(5)
	time.Sleep(2500 * time.Millisecond) // past the TTL: expiry is the behaviour under test
	px.restore()
	r.wait(t, "the reset", func() bool { return r.has(0, client.EventReset, false) })
	if s.Welcome().GetSessionId() == first.GetSessionId() {
		t.Fatal("same session after expiry")
	}
	last := pub.publish(5)
	r.wait(t, "10 messages", func() bool { return len(r.ids) == 10 })

	r.mu.Lock()
	defer r.mu.Unlock()
	want := []string{"connected(false)", "disconnected", "connected(false)", "reset(" + room + ")"}
	if states := r.states(); !slices.Equal(states, want) {
		t.Fatalf("state events %v, want %v", states, want)
	}
	var reset *corralv1.Reset
	for _, ev := range r.events {
		if ev.Kind == client.EventReset {
			reset = ev.Frame.GetReset_()
		}
	}
	if reset.GetRoom() != room || reset.GetSeq() != lost {
		t.Fatalf("reset %v, want room %s continuing after seq %d", reset, room, lost)
	}
	if want := []string{"p1", "p2", "p3", "p4", "p5", "p11", "p12", "p13", "p14", "p15"}; !slices.Equal(r.ids, want) {
		t.Fatalf("received %v, want %v", r.ids, want)
	}
	chk.Member("student", room, lost, last)
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestConnectStopCode: a refused token ends Connect at once with the
// close code; there is no retry loop.
func TestConnectStopCode(t *testing.T) {
	jwtAuth, err := auth.NewJWT(auth.JWTConfig{HMACSecret: []byte("a test secret of at least 32 bytes")})
	if err != nil {
		t.Fatal(err)
	}
	node := startCorral(t, func(o *server.Options) { o.Auth = jwtAuth })
	ctx := testCtx(t)
	start := time.Now()
	s, err := client.Connect(ctx, "ws://"+node.Addr()+"/ws", client.SessionOptions{
		Options: client.Options{Token: "not.a.jwt"},
	})
	if err == nil {
		s.Close()
		t.Fatal("connected with an invalid token")
	}
	var ce *client.CloseError
	if !errors.As(err, &ce) || int(ce.Code) != int(corralv1.Code_CODE_UNAUTHENTICATED) {
		t.Fatalf("got %v, want a close with %d", err, corralv1.Code_CODE_UNAUTHENTICATED)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Connect took %v: it retried a stop code", took)
	}
}

// TestSessionTakenOver: when the session is resumed on another connection
// the Session ends with CODE_SESSION_TAKEN_OVER instead of fighting back.
func TestSessionTakenOver(t *testing.T) {
	node := startCorral(t, nil)
	ctx := testCtx(t)
	s := connect(t, "ws://"+node.Addr()+"/ws", "bob")
	r := record(s, "bob", checker.New())
	if _, err := s.Join(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	w := s.Welcome()
	other, err := client.Dial(ctx, "ws://"+node.Addr()+"/ws", client.Options{Token: "bob", Resume: &corralv1.Resume{
		SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.CloseNow()
	drain(other)
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not end")
	}
	var ce *client.CloseError
	if !errors.As(s.Err(), &ce) || int(ce.Code) != int(corralv1.Code_CODE_SESSION_TAKEN_OVER) {
		t.Fatalf("session ended with %v, want close %d", s.Err(), corralv1.Code_CODE_SESSION_TAKEN_OVER)
	}
	if _, err := s.Publish(ctx, "r", "late", []byte(`1`)); !errors.Is(err, s.Err()) {
		t.Fatalf("publish after the end: %v", err)
	}
	r.wait(t, "the drop", func() bool { return r.has(0, client.EventDisconnected, false) })
	if att := s.Attempts(); len(att) != 1 {
		t.Fatalf("attempts %v: it reconnected", att)
	}
}

// TestStaleResumeAttemptRefused: a resume attempt that arrives after a newer
// attempt of the same client instance is refused with
// CODE_SESSION_TAKEN_OVER and leaves the newer connection alone; an attempt
// of another instance (a reloaded page) still takes the session over.
func TestStaleResumeAttemptRefused(t *testing.T) {
	node := startCorral(t, nil)
	ctx := testCtx(t)
	url := "ws://" + node.Addr() + "/ws"
	first, err := client.Dial(ctx, url, client.Options{Token: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	drain(first)
	if _, err := first.Join(ctx, "r", 0, ""); err != nil {
		t.Fatal(err)
	}
	w := first.Welcome()
	first.CloseNow()
	attempt := func(instance string, n uint32) (*client.Conn, error) {
		return client.Dial(ctx, url, client.Options{Token: "bob", Resume: &corralv1.Resume{
			SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken(), Instance: instance, Attempt: n,
			Rooms: []*corralv1.RoomPosition{{Room: "r"}},
		}})
	}
	newer, err := attempt("tab1", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer newer.CloseNow()
	if !newer.Welcome().GetResumed() {
		t.Fatal("attempt 2 did not resume")
	}
	frames := make(chan *corralv1.ServerFrame, 64)
	go func() {
		for f := range newer.Frames() {
			frames <- f
		}
	}()
	stale, err := attempt("tab1", 1)
	var ce *client.CloseError
	if err == nil {
		stale.CloseNow()
		t.Fatal("attempt 1 after attempt 2 resumed the session")
	}
	if !errors.As(err, &ce) || int(ce.Code) != int(corralv1.Code_CODE_SESSION_TAKEN_OVER) {
		t.Fatalf("attempt 1 after attempt 2: %v, want close %d", err, corralv1.Code_CODE_SESSION_TAKEN_OVER)
	}
	// The newer connection still holds the session and its room.
	if _, err := newer.Publish(ctx, "r", "m1", []byte(`1`)); err != nil {
		t.Fatalf("publish on the newer connection: %v", err)
	}
	for got := false; !got; {
		select {
		case f := <-frames:
			got = f.GetMessage().GetId() == "m1"
		case <-newer.Done():
			t.Fatalf("the newer connection ended: %v", newer.Err())
		case <-ctx.Done():
			t.Fatal("m1 never came back")
		}
	}
	// Another instance is not ordered against tab1: it takes over.
	reload, err := attempt("tab2", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer reload.CloseNow()
	drain(reload)
	select {
	case <-newer.Done():
		if e := newer.Err(); e == nil || int(e.Code) != int(corralv1.Code_CODE_SESSION_TAKEN_OVER) {
			t.Fatalf("the taken-over connection ended with %v", e)
		}
	case <-ctx.Done():
		t.Fatal("another instance did not take the session over")
	}
}

// TestSessionHeartbeat: an idle Session pings often enough that the
// server never times it out, and Close ends it cleanly.
func TestSessionHeartbeat(t *testing.T) {
	hb := 200 * time.Millisecond
	node := startCorral(t, func(o *server.Options) {
		o.Core.Heartbeat = hb
		o.Edge.Heartbeat = hb
	})
	ctx := testCtx(t)
	s := connect(t, "ws://"+node.Addr()+"/ws", "idle")
	r := record(s, "idle", checker.New())
	if _, err := s.Join(ctx, "quiet"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(8 * hb) // silence is the behaviour under test: 4x the timeout
	r.mu.Lock()
	states := r.states()
	r.mu.Unlock()
	if !slices.Equal(states, []string{"connected(false)"}) {
		t.Fatalf("state events %v while idle", states)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-s.Events(); ok {
		// Drained by the recorder; a value here would be a late event.
		t.Fatal("event after Close")
	}
	if !errors.Is(s.Err(), client.ErrClosed) {
		t.Fatalf("Err after Close: %v", s.Err())
	}
}

// TestSessionLeave: after Leave no frame of the room is passed on, and a
// resume does not bring the room back.
func TestSessionLeave(t *testing.T) {
	node := startCorral(t, nil)
	px := newProxy(t, node.Addr())
	ctx := testCtx(t)
	chk := checker.New()
	a := plain(t, node, "a", "stay")
	drain(a)
	if _, err := a.Join(ctx, "go", 0, ""); err != nil {
		t.Fatal(err)
	}
	s := connect(t, px.url(), "s")
	r := record(s, "s", chk)
	for _, room := range []string{"stay", "go"} {
		if _, err := s.Join(ctx, room); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Leave(ctx, "go"); err != nil {
		t.Fatal(err)
	}
	px.cut(false)
	r.wait(t, "the resume", func() bool { return r.has(0, client.EventConnected, true) })
	for _, room := range []string{"go", "stay"} {
		if _, err := a.Publish(ctx, room, "x-"+room, []byte(`1`)); err != nil {
			t.Fatal(err)
		}
	}
	// A second message in stay, published after the one in go, arrives
	// after it would have.
	if _, err := a.Publish(ctx, "stay", "y-stay", []byte(`2`)); err != nil {
		t.Fatal(err)
	}
	r.wait(t, "the second message in stay", func() bool { return slices.Contains(r.ids, "y-stay") })
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Equal(r.ids, []string{"x-stay", "y-stay"}) {
		t.Fatalf("received %v, want only x-stay, y-stay", r.ids)
	}
}

// TestSessionPublishExpired: when the session expires between a publish
// and its acknowledgement, Publish says so instead of sending the id again
// in a new session (where the server could not dedupe it).
func TestSessionPublishExpired(t *testing.T) {
	node := startCorral(t, func(o *server.Options) { o.Core.SessionTTL = time.Second })
	px := newProxy(t, node.Addr())
	ctx := testCtx(t)
	const room = "brief"
	watcher := plain(t, node, "watcher", room)
	s := connect(t, px.url(), "writer")
	record(s, "writer", checker.New())
	if _, err := s.Join(ctx, room); err != nil {
		t.Fatal(err)
	}
	px.mute.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := s.Publish(ctx, room, "maybe", []byte(`1`))
		done <- err
	}()
	if m := nextMessage(t, watcher); m.GetId() != "maybe" {
		t.Fatalf("watcher got %v", m)
	}
	px.cut(true)
	time.Sleep(2500 * time.Millisecond) // past the TTL: expiry is the behaviour under test
	px.restore()
	if err := <-done; !errors.Is(err, client.ErrSessionExpired) {
		t.Fatalf("publish across expiry: %v, want %v", err, client.ErrSessionExpired)
	}
	// The new session works: the room was rejoined before anything else.
	if _, err := s.Publish(ctx, room, "next", []byte(`2`)); err != nil {
		t.Fatal(err)
	}
	if m := nextMessage(t, watcher); m.GetId() != "next" {
		t.Fatalf("watcher got %v", m)
	}
}
