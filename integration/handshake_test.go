package integration_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
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

// TestPingPipelinedAfterHello: a ping sent right behind the hello is
// answered after the Welcome, which client.proto says comes first.
func TestPingPipelinedAfterHello(t *testing.T) {
	for _, mode := range []string{"serve", "split"} {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			for i := range 20 {
				ws := rawDial(t, d, protocol.SubprotocolJSON)
				for _, f := range []string{`{"hello":{"token":"eager"}}`, `{"ping":{"id":7}}`} {
					if err := ws.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
						t.Fatal(err)
					}
				}
				var kinds []string
				for len(kinds) < 2 {
					_, data, err := ws.Read(ctx)
					if err != nil {
						t.Fatalf("connection %d: %v after %v", i, err, kinds)
					}
					var f corralv1.ServerFrame
					if err := protocol.DecodeServer(protocol.JSON, data, &f); err != nil {
						t.Fatal(err)
					}
					frames := []*corralv1.ServerFrame{&f}
					if b := f.GetBatch(); b != nil {
						frames = b.GetFrames()
					}
					for _, f := range frames {
						switch {
						case f.GetWelcome() != nil:
							kinds = append(kinds, "welcome")
						case f.GetPong() != nil:
							kinds = append(kinds, "pong")
						}
					}
				}
				if kinds[0] != "welcome" || kinds[1] != "pong" {
					t.Fatalf("connection %d got %v, want [welcome pong]", i, kinds)
				}
				ws.CloseNow()
			}
		})
	}
}

// silentUpgrade opens a WebSocket by hand and never reads nor writes
// again: it does not answer the server's close either, so the server's
// close handshake waits for it (coder/websocket: 5 s).
func silentUpgrade(t *testing.T, wsURL string) net.Conn {
	t.Helper()
	host := strings.TrimSuffix(strings.TrimPrefix(wsURL, "ws://"), "/ws")
	nc, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	fmt.Fprintf(nc, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", host)
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %s", resp.Status)
	}
	// ReadResponse's reader may hold nothing more: the server sends
	// nothing before the hello deadline.
	return nc
}

// TestSilentSocketFreesPendingSlot: a socket that says nothing gives its
// Edge.MaxPending slot back when the hello deadline passes, while the
// server still waits for its close reply (the socket is still open), not
// once the close handshake gives up.
func TestSilentSocketFreesPendingSlot(t *testing.T) {
	d := start(t, "serve", nil, func(o *server.Options) {
		o.Edge.MaxPending = 2
		o.Edge.HelloTimeout = 500 * time.Millisecond
	})
	ctx := testCtx(t)
	silent := []net.Conn{silentUpgrade(t, d.wsURL), silentUpgrade(t, d.wsURL)}
	if _, resp, err := websocket.Dial(ctx, d.wsURL, nil); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("upgrade past the bound: %v", err)
	}
	// Poll until a client gets in (bounded).
	var c *client.Conn
	var err error
	if !eventually.WithinEvery(20*time.Second, 20*time.Millisecond, func() bool {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c, err = client.Dial(dctx, d.wsURL, client.Options{Token: "honest"})
		return err == nil
	}) {
		t.Fatalf("no slot freed: %v", err)
	}
	defer c.CloseNow()
	// The silent sockets are still open: the server sent its close frame
	// (4000, HELLO_REQUIRED) and waits for a reply; it has not hung up.
	for i, nc := range silent {
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		op, p, err := readFrame(nc)
		if op != 0x8 && err == nil {
			op, p, err = readFrame(nc) // the ReconnectHint came first
		}
		if err != nil || op != 0x8 || len(p) < 2 || int(p[0])<<8|int(p[1]) != int(corralv1.Code_CODE_HELLO_REQUIRED) {
			t.Fatalf("silent socket %d: opcode %d, payload %q, %v; want a close with %d", i, op, p, err, corralv1.Code_CODE_HELLO_REQUIRED)
		}
		nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		var b [1]byte
		_, err = nc.Read(b[:])
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Fatalf("silent socket %d was hung up (%v) before a slot was freed", i, err)
		}
	}
}

// readFrame reads one unmasked server frame (no fragments): its opcode and
// payload.
func readFrame(r io.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := int(h[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return 0, nil, err
		}
		n = int(ext[0])<<8 | int(ext[1])
	case 127:
		return 0, nil, fmt.Errorf("frame of more than 64 KiB")
	}
	p := make([]byte, n)
	_, err := io.ReadFull(r, p)
	return h[0] & 0x0f, p, err
}

// TestHelloWithTheUpgrade: a client that sends its hello in the same
// write as its upgrade request, without waiting for the 101, is welcomed:
// what the server read past the request head reaches the edge's reader
// (on the WebSocket listener, server.upgradeResponse.HijackEarly).
func TestHelloWithTheUpgrade(t *testing.T) {
	for _, mode := range []string{"serve", "split"} {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			host := strings.TrimSuffix(strings.TrimPrefix(d.wsURL, "ws://"), "/ws")
			nc, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(10 * time.Second))
			hello := []byte(`{"hello":{"token":"eager"}}`)
			frame := append([]byte{0x81, 0x80 | byte(len(hello)), 1, 2, 3, 4}, hello...)
			for i := range hello {
				frame[6+i] ^= byte(i%4 + 1)
			}
			head := "GET /ws HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
				"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
				"Sec-WebSocket-Protocol: " + protocol.SubprotocolJSON + "\r\n\r\n"
			if _, err := nc.Write(append([]byte(head), frame...)); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(nc)
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("upgrade: %v, %v", resp, err)
			}
			if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != protocol.SubprotocolJSON {
				t.Fatalf("subprotocol %q", got)
			}
			if got := resp.Header.Get("Sec-WebSocket-Accept"); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
				t.Fatalf("Sec-WebSocket-Accept %q", got)
			}
			op, p, err := readFrame(br)
			if err != nil || op != 0x1 {
				t.Fatalf("first frame: opcode %d, %q, %v", op, p, err)
			}
			var f corralv1.ServerFrame
			if err := protocol.DecodeServer(protocol.JSON, p, &f); err != nil {
				t.Fatal(err)
			}
			if f.GetWelcome() == nil && (f.GetBatch() == nil || f.GetBatch().GetFrames()[0].GetWelcome() == nil) {
				t.Fatalf("first frame %q, want the Welcome", p)
			}
		})
	}
}
