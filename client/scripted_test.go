package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// scripted is a fake corral whose every frame the test writes by hand, to
// check what a Session does with what a real server rarely sends.
type scripted struct {
	srv   *httptest.Server
	conns chan *scriptedConn
}

type scriptedConn struct {
	t    *testing.T
	ws   *websocket.Conn
	done chan struct{}
}

func newScripted(t *testing.T) *scripted {
	s := &scripted{conns: make(chan *scriptedConn, 4)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{protocol.SubprotocolJSON}})
		if err != nil {
			return
		}
		c := &scriptedConn{t: t, ws: ws, done: make(chan struct{})}
		s.conns <- c
		<-c.done
	}))
	t.Cleanup(func() {
		for {
			select {
			case c := <-s.conns:
				c.ws.CloseNow()
				close(c.done)
				continue
			default:
			}
			break
		}
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
	return s
}

func (s *scripted) url() string { return "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/ws" }

// session connects a Session (fast backoff) to the fake and welcomes it:
// its first connection, whose hello must not resume. The Session is
// closed when the test ends.
func (s *scripted) session(t *testing.T, ctx context.Context) (*client.Session, *scriptedConn) {
	t.Helper()
	type connected struct {
		s   *client.Session
		err error
	}
	got := make(chan connected, 1)
	go func() {
		s, err := client.Connect(ctx, s.url(), client.SessionOptions{Backoff: fast})
		got <- connected{s, err}
	}()
	c := s.accept(t)
	if h := c.read().GetHello(); h == nil || h.GetResume() != nil {
		t.Fatalf("first frame %v, want a hello without resume", h)
	}
	c.send(welcomeF(false))
	res := <-got
	if res.err != nil {
		t.Fatal(res.err)
	}
	t.Cleanup(func() { res.s.Close() })
	return res.s, c
}

// conn dials a Conn to the fake and welcomes it; the Conn is closed when
// the test ends.
func (s *scripted) conn(t *testing.T, ctx context.Context) (*client.Conn, *scriptedConn) {
	t.Helper()
	type dialed struct {
		c   *client.Conn
		err error
	}
	got := make(chan dialed, 1)
	go func() {
		c, err := client.Dial(ctx, s.url(), client.Options{Token: "u"})
		got <- dialed{c, err}
	}()
	sc := s.accept(t)
	sc.read() // the hello
	sc.send(welcomeF(false))
	res := <-got
	if res.err != nil {
		t.Fatal(res.err)
	}
	t.Cleanup(res.c.CloseNow)
	return res.c, sc
}

func (s *scripted) accept(t *testing.T) *scriptedConn {
	t.Helper()
	select {
	case c := <-s.conns:
		t.Cleanup(func() {
			c.ws.CloseNow()
			close(c.done)
		})
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no connection")
		return nil
	}
}

func (c *scriptedConn) read() *corralv1.ClientFrame {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			c.t.Fatal(err)
		}
		f := new(corralv1.ClientFrame)
		if err := protocol.DecodeClient(protocol.JSON, data, f); err != nil {
			c.t.Fatal(err)
		}
		if f.GetPing() == nil {
			return f
		}
	}
}

// discard reads (and answers the close handshake) until the connection
// ends, once the script is done with it.
func (c *scriptedConn) discard() {
	go func() {
		for {
			if _, _, err := c.ws.Read(context.Background()); err != nil {
				return
			}
		}
	}()
}

func (c *scriptedConn) send(frames ...*corralv1.ServerFrame) {
	c.t.Helper()
	var enc [][]byte
	for _, f := range frames {
		b, err := protocol.AppendServer(protocol.JSON, nil, f)
		if err != nil {
			c.t.Fatal(err)
		}
		enc = append(enc, b)
	}
	if err := c.ws.Write(context.Background(), websocket.MessageText, protocol.AppendBatch(protocol.JSON, nil, enc)); err != nil {
		c.t.Fatal(err)
	}
}

func welcomeF(resumed bool) *corralv1.ServerFrame {
	return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{
		SessionId: "s1", ResumeToken: "t1", UserId: "u", Resumed: resumed, HeartbeatMs: 60000,
	}}}
}

func joinedF(room string, seq uint64, epoch string, resumed bool) *corralv1.ServerFrame {
	return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Joined{Joined: &corralv1.Joined{
		Room: room, Seq: seq, Epoch: epoch, Resumed: resumed,
	}}}
}

func msgF(room string, seq uint64) *corralv1.ServerFrame {
	return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: &corralv1.Message{
		Room: room, Seq: seq, Id: "m" + string(rune('0'+seq)), Payload: []byte(`1`),
	}}}
}

// TestSessionScripted: duplicates are dropped by seq, the resume names
// the right position with the latest (rotated) token, and the server's
// reconnect delay is honoured.
func TestSessionScripted(t *testing.T) {
	fake := newScripted(t)
	ctx := testCtx(t)
	s, c1 := fake.session(t, ctx)
	r := record(s, "s", checker.New())

	joined := make(chan error, 1)
	go func() {
		_, err := s.Join(ctx, "r")
		joined <- err
	}()
	if j := c1.read().GetJoin(); j.GetRoom() != "r" || j.GetSinceSeq() != 0 {
		t.Fatalf("got %v, want a join of r", j)
	}
	c1.send(joinedF("r", 0, "e1", false), msgF("r", 1), msgF("r", 2), msgF("r", 2), msgF("r", 1), msgF("r", 3))
	if err := <-joined; err != nil {
		t.Fatal(err)
	}
	r.wait(t, "3 messages", func() bool { return len(r.ids) == 3 })

	// The edge resumed the session for us: a Welcome on the live
	// connection carries the rotated token, which the next resume uses.
	rotated := welcomeF(true)
	rotated.GetWelcome().ResumeToken = "t1b"
	c1.send(rotated)
	// A drain: the server asks for a 300ms pause, then closes.
	c1.send(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Reconnect{Reconnect: &corralv1.ReconnectHint{
		Code: corralv1.Code_CODE_GOING_AWAY, Reason: "restart", DelayMs: 300,
	}}})
	closed := time.Now()
	c1.ws.Close(websocket.StatusCode(corralv1.Code_CODE_GOING_AWAY), "restart")

	c2 := fake.accept(t)
	if waited := time.Since(closed); waited < 300*time.Millisecond {
		t.Fatalf("reconnected after %v, before the hinted 300ms", waited)
	}
	rs := c2.read().GetHello().GetResume()
	want := &corralv1.Resume{SessionId: "s1", ResumeToken: "t1b", Rooms: []*corralv1.RoomPosition{{Room: "r", Seq: 3, Epoch: "e1"}}}
	if rs.GetSessionId() != want.SessionId || rs.GetResumeToken() != want.ResumeToken ||
		len(rs.GetRooms()) != 1 || rs.GetRooms()[0].GetSeq() != 3 || rs.GetRooms()[0].GetEpoch() != "e1" {
		t.Fatalf("resume %v, want %v", rs, want)
	}
	if rs.GetInstance() == "" || rs.GetAttempt() != 1 {
		t.Fatalf("resume instance %q attempt %d, want a random instance and attempt 1", rs.GetInstance(), rs.GetAttempt())
	}
	c2.send(welcomeF(true), joinedF("r", 3, "e1", true), msgF("r", 3), msgF("r", 4))
	r.wait(t, "4 messages", func() bool { return len(r.ids) == 4 })
	c2.discard()

	r.mu.Lock()
	defer r.mu.Unlock()
	if want := []string{"m1", "m2", "m3", "m4"}; !slices.Equal(r.ids, want) {
		t.Fatalf("received %v, want %v", r.ids, want)
	}
	if want := []string{"connected(false)", "disconnected", "connected(true)"}; !slices.Equal(r.states(), want) {
		t.Fatalf("state events %v, want %v", r.states(), want)
	}
	for _, ev := range r.events {
		if ev.Kind != client.EventDisconnected {
			continue
		}
		var ce *client.CloseError
		if !errors.As(ev.Err, &ce) || ce.Hint.GetDelayMs() != 300 {
			t.Fatalf("disconnected with %v, want the close with its hint", ev.Err)
		}
	}
}

// TestSessionPublishOrder: until a room's first publish is stored, the
// next waits for it; then three publishes, the first refused
// with a retry code and the two after it refused as out of order: each
// carries its place, and they are sent again in the order they were made,
// each once its predecessor is resolved — never on a timer of its own
// (the browser SDK's old bug stored a sender's publishes shuffled).
func TestSessionPublishOrder(t *testing.T) {
	fake := newScripted(t)
	ctx := testCtx(t)
	s, c1 := fake.session(t, ctx)
	go func() { _, _ = s.Join(ctx, "r") }()
	c1.read()
	c1.send(joinedF("r", 0, "e1", false))

	// Until one is stored, only one publish is on its way: places start
	// at 1 again, and the server takes 1 as the sequence starting again.
	first := s.PublishAsync(ctx, "r", "p0", []byte(`1`))
	second := s.PublishAsync(ctx, "r", "p1", []byte(`1`))
	if p := c1.read().GetPublish(); p.GetId() != "p0" || p.GetSeq() != 1 {
		t.Fatalf("sent %v, want p0 at place 1", p)
	}
	c1.send(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Published{Published: &corralv1.Published{Room: "r", Id: "p0", Seq: 9}}})
	if r := <-first; r.Err != nil {
		t.Fatal(r.Err)
	}
	if p := c1.read().GetPublish(); p.GetId() != "p1" || p.GetSeq() != 2 {
		t.Fatalf("sent %v, want p1 at place 2", p)
	}
	c1.send(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Published{Published: &corralv1.Published{Room: "r", Id: "p1", Seq: 10}}})
	if r := <-second; r.Err != nil {
		t.Fatal(r.Err)
	}

	ids := []string{"p2", "p3", "p4"}
	results := make(chan string, len(ids))
	for i, id := range ids {
		go func() {
			p, err := s.Publish(ctx, "r", id, []byte(`1`))
			if err != nil {
				t.Errorf("publish %s: %v", id, err)
			}
			results <- fmt.Sprintf("%s@%d", id, p.GetSeq())
		}()
		if p := c1.read().GetPublish(); p.GetId() != id || p.GetSeq() != uint64(i+3) {
			t.Fatalf("sent %v, want %s at place %d", p, id, i+3)
		}
	}
	refuse := func(id string, code corralv1.Code) *corralv1.ServerFrame {
		return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Error{Error: &corralv1.Error{
			Code: code, Message: "no", Room: "r", Ref: id, RetryAfterMs: 50,
		}}}
	}
	c1.send(refuse("p2", corralv1.Code_CODE_UNAVAILABLE),
		refuse("p3", corralv1.Code_CODE_OUT_OF_ORDER), refuse("p4", corralv1.Code_CODE_OUT_OF_ORDER))
	for i, id := range ids {
		if p := c1.read().GetPublish(); p.GetId() != id || p.GetSeq() != uint64(i+3) {
			t.Fatalf("sent again %v, want %s at place %d", p, id, i+3)
		}
		c1.send(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Published{Published: &corralv1.Published{
			Room: "r", Id: id, Seq: uint64(10 + i),
		}}})
		if r := <-results; r != fmt.Sprintf("%s@%d", id, 10+i) {
			t.Fatalf("resolved %s, want %s@%d", r, id, 10+i)
		}
	}
	c1.discard()
}
