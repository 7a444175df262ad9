package integration_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// scrape returns the Prometheus text of the node at base (http://host).
func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// edgeBase and coreBase are where the edge's and the core's metrics are:
// the internal listener when there is one (serve: one registry there), the
// edge's public port otherwise.
func edgeBase(d *deployment) string {
	if d.apiNode.InternalAddr() != "" {
		return d.apiURL
	}
	return "http://" + strings.TrimSuffix(strings.TrimPrefix(d.wsURL, "ws://"), "/ws")
}

func coreBase(d *deployment) string { return d.apiURL }

// attached reads how many sessions d's core has attached to a connection.
func attached(t *testing.T, d *deployment) float64 {
	t.Helper()
	return sample(t, scrape(t, coreBase(d)), "corral_core_sessions_attached")
}

// waitDetached waits until d's core attaches fewer sessions than before:
// it saw a connection drop and detached its session.
func waitDetached(t *testing.T, d *deployment, before float64) {
	t.Helper()
	eventually.True(t, 10*time.Second, func() bool { return attached(t, d) < before }, "the core to see the drop")
}

// wantCounted fails unless the metrics text counts a refusal by reason.
func wantCounted(t *testing.T, text, metric, reason string) {
	t.Helper()
	prefix := metric + `{reason="` + reason + `"} `
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) && strings.TrimPrefix(line, prefix) != "0" {
			return
		}
	}
	t.Fatalf("%s{reason=%q} not counted", metric, reason)
}

// serverErr returns the code of a *client.ServerError, or fails.
func serverErr(t *testing.T, err error) *corralv1.Error {
	t.Helper()
	se, ok := err.(*client.ServerError)
	if !ok {
		t.Fatalf("got %v, want an error frame", err)
	}
	return se.Err
}

// TestRateLimit: publishes past the connection's bucket get an error frame
// with retry-after and reach no one; signals have their own bucket; a
// client that keeps going is closed with CODE_RATE_LIMITED and a delay; a
// bystander is served throughout.
func TestRateLimit(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, func(o *server.Options) {
				// Next to no refill: the 6th publish is over the limit
				// however slowly this machine runs the first five.
				o.Edge.MessageRate, o.Edge.MessageBurst = 0.001, 5
				o.Edge.SignalRate, o.Edge.SignalBurst = 0.001, 3
				o.Edge.RateStrikes = 20
				o.Edge.RateCloseDelay = 3 * time.Second
			})
			ctx := testCtx(t)
			flood := dial(t, d, "flood", protocol.JSON)
			calm := dial(t, d, "calm", protocol.Proto)
			for _, c := range []*client.Conn{flood, calm} {
				if _, err := c.Join(ctx, "r", 0, ""); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 5 {
				if _, err := flood.Publish(ctx, "r", fmt.Sprint("ok", i), payload(i)); err != nil {
					t.Fatalf("publish %d within the burst: %v", i, err)
				}
			}
			_, err := flood.Publish(ctx, "r", "over", payload(5))
			e := serverErr(t, err)
			if e.GetCode() != corralv1.Code_CODE_RATE_LIMITED || e.GetRetryAfterMs() == 0 || e.GetRef() != "over" {
				t.Fatalf("over the limit: %v", e)
			}
			// Signals are counted apart: the message bucket is empty, the
			// signal bucket is not.
			if err := flood.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{Room: "r", Key: "k", Payload: []byte(`1`)}}}); err != nil {
				t.Fatal(err)
			}
			sig := nextFrame(t, calm, func(f *corralv1.ServerFrame) bool {
				return f.GetSignal() != nil || f.GetMessage().GetId() == "over"
			})
			if sig.GetSignal() == nil {
				t.Fatal("the refused publish reached the room")
			}
			// Sustained abuse: keep publishing while refused.
			for i := range 40 {
				if err := flood.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{
					Room: "r", Id: fmt.Sprint("spam", i), Payload: payload(i),
				}}}); err != nil {
					break
				}
			}
			ce := waitClosed(t, flood)
			if int(ce.Code) != int(corralv1.Code_CODE_RATE_LIMITED) || ce.Hint.GetCode() != corralv1.Code_CODE_RATE_LIMITED || ce.Hint.GetDelayMs() == 0 {
				t.Fatalf("sustained abuse: %v (hint %v)", ce, ce.Hint)
			}
			if protocol.AdviceOf(corralv1.Code_CODE_RATE_LIMITED) != protocol.AdviceRetry {
				t.Fatal("4101 should advise retry")
			}
			// The bystander is still served.
			if _, err := calm.Publish(ctx, "r", "calm-1", payload(1)); err != nil {
				t.Fatal(err)
			}
			m := scrape(t, edgeBase(d))
			wantCounted(t, m, "corral_edge_refused_total", "rate_messages")
			// Once closing, what the flooder still sends is not refused
			// again: one close, counted once, and no more refusals than
			// the strikes that led to it (the 20 spams after the close
			// are not counted).
			if n := sample(t, m, `corral_edge_refused_total{reason="rate_sustained"}`); n != 1 {
				t.Fatalf("rate_sustained counted %v times for one connection", n)
			}
			if n := sample(t, m, `corral_edge_refused_total{reason="rate_messages"}`); n != 21 {
				t.Fatalf("rate_messages = %v, want 21 (the 21st refusal closes)", n)
			}
		})
	}
}

// TestRoomsPerConnection: past Core.MaxRoomsPerConn a join gets
// CODE_LIMIT_EXCEEDED; after a leave there is room again.
func TestRoomsPerConnection(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, func(o *server.Options) { o.Core.MaxRoomsPerConn = 3 })
			ctx := testCtx(t)
			c := dial(t, d, "u", protocol.JSON)
			for i := range 3 {
				if _, err := c.Join(ctx, fmt.Sprint("room-", i), 0, ""); err != nil {
					t.Fatal(err)
				}
			}
			// Joining a room it is in already costs nothing.
			if _, err := c.Join(ctx, "room-0", 0, ""); err != nil {
				t.Fatal(err)
			}
			_, err := c.Join(ctx, "room-3", 0, "")
			if e := serverErr(t, err); e.GetCode() != corralv1.Code_CODE_LIMIT_EXCEEDED {
				t.Fatalf("4th room: %v", e)
			}
			if err := c.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Leave{Leave: &corralv1.Leave{Room: "room-0"}}}); err != nil {
				t.Fatal(err)
			}
			nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetLeft().GetRoom() == "room-0" })
			if _, err := c.Join(ctx, "room-3", 0, ""); err != nil {
				t.Fatal(err)
			}
			wantCounted(t, scrape(t, coreBase(d)), "corral_core_refused_total", "rooms_per_conn")
		})
	}
}

// TestConnectionsPerUser: past Edge.MaxConnsPerUser a connection is closed
// after its hello with CODE_LIMIT_EXCEEDED; other users are not affected,
// and a closed connection frees its place.
func TestConnectionsPerUser(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, func(o *server.Options) { o.Edge.MaxConnsPerUser = 2 })
			ctx := testCtx(t)
			a := dial(t, d, "tabs", protocol.JSON)
			dial(t, d, "tabs", protocol.Proto)
			_, err := client.Dial(ctx, d.wsURL, client.Options{Token: "tabs"})
			ce, ok := err.(*client.CloseError)
			if !ok || int(ce.Code) != int(corralv1.Code_CODE_LIMIT_EXCEEDED) {
				t.Fatalf("third connection: %v", err)
			}
			dial(t, d, "someone-else", protocol.JSON)
			a.Close()
			if !eventually.WithinEvery(10*time.Second, 20*time.Millisecond, func() bool {
				var c *client.Conn
				if c, err = client.Dial(ctx, d.wsURL, client.Options{Token: "tabs"}); err == nil {
					c.CloseNow()
				}
				return err == nil
			}) {
				t.Fatalf("a freed place was not reused: %v", err)
			}
		})
	}
}

// TestPendingHandshakes: past Edge.MaxPending connections without an
// authenticated hello, upgrades get 503 with Retry-After; the silent ones
// are cut at HelloTimeout, and then clients connect again.
func TestPendingHandshakes(t *testing.T) {
	d := start(t, "serve", nil, func(o *server.Options) {
		o.Edge.MaxPending = 5
		o.Edge.HelloTimeout = time.Second
	})
	ctx := testCtx(t)
	var silent []*websocket.Conn
	for range 5 {
		silent = append(silent, rawDial(t, d, protocol.SubprotocolJSON))
	}
	_, resp, err := websocket.Dial(ctx, d.wsURL, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("upgrade past the bound: err %v, response %+v", err, resp)
	}
	for _, ws := range silent {
		if code, hint := closeCode(t, ws, protocol.JSON); int(code) != int(corralv1.Code_CODE_HELLO_REQUIRED) || hint != corralv1.Code_CODE_HELLO_REQUIRED {
			t.Fatalf("silent connection closed with %d (hint %v)", code, hint)
		}
	}
	if !eventually.WithinEvery(10*time.Second, 50*time.Millisecond, func() bool {
		var c *client.Conn
		if c, err = client.Dial(ctx, d.wsURL, client.Options{Token: "honest"}); err == nil {
			c.CloseNow()
		}
		return err == nil
	}) {
		t.Fatalf("no connection after the silent ones were cut: %v", err)
	}
}

// TestSlowloris: 150 TCP connections dribbling partial request headers
// and 150 upgraded sockets that never say hello do not keep honest clients
// from connecting and being served; both kinds are cut by their timeouts.
func TestSlowloris(t *testing.T) {
	for _, mode := range []string{"serve", "split"} {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, func(o *server.Options) {
				o.ReadHeaderTimeout = 2 * time.Second
				o.Edge.HelloTimeout = 2 * time.Second
			})
			ctx := testCtx(t)
			host := strings.TrimSuffix(strings.TrimPrefix(d.wsURL, "ws://"), "/ws")
			var partial []net.Conn
			for range 150 {
				nc, err := net.Dial("tcp", host)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { nc.Close() })
				fmt.Fprintf(nc, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n", host)
				partial = append(partial, nc)
			}
			var silent []*websocket.Conn
			for range 150 {
				silent = append(silent, rawDial(t, d, protocol.SubprotocolJSON))
			}
			// Honest clients connect, join, publish and receive meanwhile.
			var honest []*client.Conn
			for i := range 10 {
				c := dial(t, d, "honest-"+strconv.Itoa(i), protocol.Encoding(i%2))
				if _, err := c.Join(ctx, "square", 0, ""); err != nil {
					t.Fatal(err)
				}
				honest = append(honest, c)
			}
			if _, err := honest[0].Publish(ctx, "square", "hi", payload(1)); err != nil {
				t.Fatal(err)
			}
			for _, c := range honest {
				nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetMessage().GetId() == "hi" })
			}
			// The attackers' connections are cut by the server.
			for _, nc := range partial {
				nc.SetReadDeadline(time.Now().Add(15 * time.Second))
				r := bufio.NewReader(nc)
				for {
					if _, err := r.ReadByte(); err != nil {
						if ne, ok := err.(net.Error); ok && ne.Timeout() {
							t.Fatal("a connection with partial headers was not cut")
						}
						break
					}
				}
			}
			for _, ws := range silent {
				if code, _ := closeCode(t, ws, protocol.JSON); int(code) != int(corralv1.Code_CODE_HELLO_REQUIRED) {
					t.Fatalf("silent socket closed with %d", code)
				}
			}
			c := dial(t, d, "late", protocol.JSON)
			if _, err := c.Join(ctx, "square", 0, ""); err != nil {
				t.Fatal(err)
			}
		})
	}
}
