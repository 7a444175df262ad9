package edge

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connectinprocess"
	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/core"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/wsframe"
	"github.com/corral-rt/corral/protocol"
)

// testEdge is an edge on a real socket, linked to an in-process core.
type testEdge struct {
	e   *Edge
	url string // ws://…/ws
	srv *httptest.Server
}

// startEdge starts a core and an edge (tune may change the edge's
// Config); with park false, the edge's connections never park.
func startEdge(t *testing.T, park bool, tune func(*Config)) *testEdge {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	co := core.New(core.Config{Logger: quiet})
	rpc := connect.NewServer()
	linkv1connect.RegisterLinkServiceHandler(rpc, co)
	cfg := Config{
		Core:        linkv1connect.NewLinkServiceClient(connect.NewClient(connectinprocess.New(rpc))),
		Auth:        auth.Dev{},
		AnyOrigin:   true,
		Logger:      quiet,
		MessageRate: -1, SignalRate: -1, ControlRate: -1,
	}
	if tune != nil {
		tune(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if park && e.poller == nil {
		t.Skip("connections do not park on this platform")
	}
	if !park {
		e.poller.close()
		e.poller = nil
	}
	srv := httptest.NewServer(e)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Close(ctx)
		srv.Close()
		co.Close()
	})
	waitFor(t, "the links to come up", e.Ready)
	return &testEdge{e: e, url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws", srv: srv}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually.True(t, 10*time.Second, cond, "%s", what)
}

func (te *testEdge) parked() int { return te.e.poller.parkedConns() }

func (te *testEdge) conns() int {
	te.e.mu.Lock()
	defer te.e.mu.Unlock()
	return len(te.e.conns)
}

// dialJoin connects a client as user and joins room.
func (te *testEdge) dialJoin(t *testing.T, user, room string) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, te.url, client.Options{Token: user})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseNow)
	if room != "" {
		if _, err := c.Join(ctx, room, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// next waits for the next frame that keep accepts.
func next(t *testing.T, c *client.Conn, keep func(*corralv1.ServerFrame) bool) *corralv1.ServerFrame {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case f, ok := <-c.Frames():
			if !ok {
				t.Fatalf("connection ended while waiting: %v", c.Err())
			}
			if keep(f) {
				return f
			}
		case <-timeout:
			t.Fatal("timed out waiting for a frame")
		}
	}
}

func isMessage(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil }

// closed waits for c to end and returns why.
func closed(t *testing.T, c *client.Conn) *client.CloseError {
	t.Helper()
	select {
	case <-c.Done():
		return c.Err()
	case <-time.After(15 * time.Second):
		t.Fatal("timed out waiting for the connection to close")
		return nil
	}
}

// TestParkedConnection: idle connections park; a parked one still
// receives (the writer needs no reader), and its reader comes back when a
// frame arrives, then parks again. The same traffic without parking is
// the control.
func TestParkedConnection(t *testing.T) {
	for _, park := range []bool{true, false} {
		t.Run(fmt.Sprintf("park=%v", park), func(t *testing.T) {
			te := startEdge(t, park, nil)
			a := te.dialJoin(t, "a", "r")
			b := te.dialJoin(t, "b", "r")
			if park {
				waitFor(t, "both readers to park", func() bool { return te.parked() == 2 })
			}
			ctx := context.Background()
			if _, err := a.Publish(ctx, "r", "m1", []byte(`1`)); err != nil {
				t.Fatal(err)
			}
			if m := next(t, b, isMessage).GetMessage(); string(m.GetPayload()) != "1" {
				t.Fatalf("b got %q", m.GetPayload())
			}
			if park {
				waitFor(t, "a's reader to park again", func() bool { return te.parked() == 2 })
			}
			if _, err := b.Publish(ctx, "r", "m2", []byte(`2`)); err != nil {
				t.Fatal(err)
			}
			next(t, a, isMessage) // its own first
			if m := next(t, a, isMessage).GetMessage(); string(m.GetPayload()) != "2" {
				t.Fatalf("a got %q", m.GetPayload())
			}
			// A ping is answered (pong) by a reader started for it.
			if park {
				waitFor(t, "b's reader to park again", func() bool { return te.parked() == 2 })
			}
			if err := b.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Id: 7}}}); err != nil {
				t.Fatal(err)
			}
			if p := next(t, b, func(f *corralv1.ServerFrame) bool { return f.GetPong() != nil }); p.GetPong().GetId() != 7 {
				t.Fatalf("pong %v", p)
			}
		})
	}
}

// TestParkedClosedByClient: a client closing a parked connection, cleanly
// or not, wakes its reader, which ends the connection on the edge.
func TestParkedClosedByClient(t *testing.T) {
	tests := map[string]func(*client.Conn){
		"close frame": func(c *client.Conn) { c.Close() },
		"socket":      func(c *client.Conn) { c.CloseNow() },
	}
	for name, closeIt := range tests {
		t.Run(name, func(t *testing.T) {
			te := startEdge(t, true, nil)
			c := te.dialJoin(t, "u", "r")
			waitFor(t, "the reader to park", func() bool { return te.parked() == 1 })
			closeIt(c)
			waitFor(t, "the edge to end the connection", func() bool { return te.conns() == 0 })
			if n := te.parked(); n != 0 {
				t.Fatalf("%d still parked", n)
			}
		})
	}
}

// TestParkedHeartbeatTimeout: a parked connection whose client falls
// silent is closed past two heartbeats, with the heartbeat code, and ends
// on the edge, also when the client does not answer the close (dead).
func TestParkedHeartbeatTimeout(t *testing.T) {
	tune := func(c *Config) { c.Heartbeat = time.Second }
	t.Run("silent", func(t *testing.T) {
		t.Parallel()
		te := startEdge(t, true, tune)
		c := te.dialJoin(t, "u", "r")
		waitFor(t, "the reader to park", func() bool { return te.parked() == 1 })
		ce := closed(t, c)
		if ce.Hint.GetCode() != corralv1.Code_CODE_HEARTBEAT_TIMEOUT {
			t.Fatalf("closed with %v, want a heartbeat timeout", ce)
		}
		waitFor(t, "the edge to end the connection", func() bool { return te.conns() == 0 })
	})
	t.Run("dead", func(t *testing.T) {
		t.Parallel()
		te := startEdge(t, true, tune)
		// A client that stops reading after its join: the edge's close
		// frame is never answered.
		rc := rawDial(t, te.srv.Listener.Addr().String(), nil)
		rc.send(t, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{Token: "u"}}})
		rc.send(t, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: "r"}}})
		rc.await(t, func(f *corralv1.ServerFrame) bool { return f.GetJoined() != nil })
		waitFor(t, "the reader to park", func() bool { return te.parked() == 1 })
		waitFor(t, "the edge to end the connection", func() bool { return te.conns() == 0 })
	})
}

// TestParkedDrain: a drain closes parked connections with GOING_AWAY and
// returns once they are gone; Close with a context already ended cuts
// them and they end too.
func TestParkedDrain(t *testing.T) {
	t.Run("drain", func(t *testing.T) {
		te := startEdge(t, true, nil)
		var cs []*client.Conn
		for i := range 5 {
			cs = append(cs, te.dialJoin(t, fmt.Sprint("u", i), "r"))
		}
		waitFor(t, "the readers to park", func() bool { return te.parked() == 5 })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := te.e.Drain(ctx, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if ce := closed(t, c); ce.Hint.GetCode() != corralv1.Code_CODE_GOING_AWAY {
				t.Fatalf("closed with %v, want going away", ce)
			}
		}
		if n := te.conns(); n != 0 {
			t.Fatalf("%d connections left after the drain", n)
		}
	})
	t.Run("cut", func(t *testing.T) {
		te := startEdge(t, true, nil)
		// Clients that do not answer a close: the drain cannot finish.
		for i := range 3 {
			rc := rawDial(t, te.srv.Listener.Addr().String(), nil)
			rc.send(t, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{Token: fmt.Sprint("u", i)}}})
			rc.await(t, func(f *corralv1.ServerFrame) bool { return f.GetWelcome() != nil })
		}
		waitFor(t, "the readers to park", func() bool { return te.parked() == 3 })
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := te.e.Close(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Close: %v, want the context's error", err)
		}
		waitFor(t, "the cut connections to end", func() bool { return te.conns() == 0 })
	})
}

// TestFrameAcrossParkAfter: a frame whose bytes straddle parkAfter is read
// whole: the lingering read lifted its deadline at the first byte. Bytes
// sent with the upgrade request are read first.
func TestFrameAcrossParkAfter(t *testing.T) {
	te := startEdge(t, true, nil)
	hello, _ := protocol.AppendClient(protocol.JSON, nil, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{Token: "u"}}})
	rc := rawDial(t, te.srv.Listener.Addr().String(), maskedFrame(wsframe.OpText, hello))
	rc.await(t, func(f *corralv1.ServerFrame) bool { return f.GetWelcome() != nil })
	waitFor(t, "the reader to park", func() bool { return te.parked() == 1 })
	ping, _ := protocol.AppendClient(protocol.JSON, nil, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Id: 9}}})
	frame := maskedFrame(wsframe.OpText, ping)
	rc.write(t, frame[:1])
	time.Sleep(parkAfter + 300*time.Millisecond)
	rc.write(t, frame[1:3])
	time.Sleep(parkAfter + 300*time.Millisecond)
	rc.write(t, frame[3:])
	if f := rc.await(t, func(f *corralv1.ServerFrame) bool { return f.GetPong() != nil }); f.GetPong().GetId() != 9 {
		t.Fatalf("pong %v", f)
	}
}

// rawClient speaks WebSocket by hand, to control every byte.
type rawClient struct {
	nc net.Conn
	br *bufio.Reader
}

// rawDial upgrades a TCP connection to the edge at addr, sending early
// right behind the request.
func rawDial(t *testing.T, addr string, early []byte) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	req := "GET /ws HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := nc.Write(append([]byte(req), early...)); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	status, err := br.ReadString('\n')
	if err != nil || !strings.Contains(status, " 101 ") {
		t.Fatalf("upgrade: %q %v", status, err)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\r\n" {
			break
		}
	}
	return &rawClient{nc: nc, br: br}
}

func (rc *rawClient) write(t *testing.T, b []byte) {
	t.Helper()
	if _, err := rc.nc.Write(b); err != nil {
		t.Fatal(err)
	}
}

func (rc *rawClient) send(t *testing.T, f *corralv1.ClientFrame) {
	t.Helper()
	b, err := protocol.AppendClient(protocol.JSON, nil, f)
	if err != nil {
		t.Fatal(err)
	}
	rc.write(t, maskedFrame(wsframe.OpText, b))
}

// await reads server frames until keep accepts one.
func (rc *rawClient) await(t *testing.T, keep func(*corralv1.ServerFrame) bool) *corralv1.ServerFrame {
	t.Helper()
	rc.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		var h [2]byte
		if _, err := io.ReadFull(rc.br, h[:]); err != nil {
			t.Fatal(err)
		}
		n := int(h[1] & 0x7f)
		switch n {
		case 126:
			var l [2]byte
			io.ReadFull(rc.br, l[:])
			n = int(binary.BigEndian.Uint16(l[:]))
		case 127:
			var l [8]byte
			io.ReadFull(rc.br, l[:])
			n = int(binary.BigEndian.Uint64(l[:]))
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(rc.br, p); err != nil {
			t.Fatal(err)
		}
		if h[0]&0x0f != wsframe.OpText {
			t.Fatalf("opcode %d (%q) while waiting", h[0]&0x0f, p)
		}
		var f corralv1.ServerFrame
		if err := protocol.DecodeServer(protocol.JSON, p, &f); err != nil {
			t.Fatal(err)
		}
		frames := []*corralv1.ServerFrame{&f}
		if b := f.GetBatch(); b != nil {
			frames = b.GetFrames()
		}
		for _, f := range frames {
			if keep(f) {
				return f
			}
		}
	}
}

// maskedFrame is one final client frame (clients mask, RFC 6455 §5.3).
func maskedFrame(opcode byte, payload []byte) []byte {
	b := []byte{0x80 | opcode} // FIN
	switch n := len(payload); {
	case n <= 125:
		b = append(b, 0x80|byte(n))
	case n <= 0xFFFF:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	key := [4]byte{0x12, 0x34, 0x56, 0x78}
	b = append(b, key[:]...)
	for i, c := range payload {
		b = append(b, c^key[i%4])
	}
	return b
}

// TestParkedSocketNumberReused: a parked connection cut from outside
// leaves the poller's set with its socket; the next accepted socket may
// get the same number, and parks and wakes as its own (registrations are
// keyed by connection id, not by socket number).
func TestParkedSocketNumberReused(t *testing.T) {
	te := startEdge(t, true, nil)
	fdOf := func(c *conn) (fd uintptr) {
		c.raw.Control(func(s uintptr) { fd = s })
		return fd
	}
	a := te.dialJoin(t, "a", "")
	waitFor(t, "a to park", func() bool { return te.parked() == 1 })
	ca := serverConns(te)[0]
	fdA := fdOf(ca)
	ca.cutOff()
	closed(t, a)
	a.CloseNow() // frees the client's socket number too
	waitFor(t, "a to end", func() bool { return te.conns() == 0 })

	b := te.dialJoin(t, "b", "")
	waitFor(t, "b to park", func() bool { return te.parked() == 1 })
	if fdB := fdOf(serverConns(te)[0]); fdB != fdA {
		t.Logf("b's socket is %d, a's was %d: not reused this time", fdB, fdA)
	}
	for id := range uint64(3) {
		if err := b.Send(context.Background(), &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Id: id}}}); err != nil {
			t.Fatal(err)
		}
		if p := next(t, b, func(f *corralv1.ServerFrame) bool { return f.GetPong() != nil }); p.GetPong().GetId() != id {
			t.Fatalf("pong %v", p)
		}
		waitFor(t, "b to park again", func() bool { return te.parked() == 1 })
	}
}

// serverConns are the edge's connections.
func serverConns(te *testEdge) []*conn {
	te.e.mu.Lock()
	defer te.e.mu.Unlock()
	var cs []*conn
	for c := range te.e.conns {
		cs = append(cs, c)
	}
	return cs
}
