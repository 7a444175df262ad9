package client_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/protocol"
)

// wrappedTransport is an http.RoundTripper that is not an *http.Transport:
// a client given it reads through coder/websocket.
type wrappedTransport struct{ http.RoundTripper }

// TestOnFrame: with Options.OnFrame every frame reaches the function, in
// order, and none reaches Frames, which is closed when the connection
// ends; requests (Join, Publish) still get their answers; Close completes
// the close handshake. Both encodings, messages of several sizes (the
// reader reuses its buffer), both ways of reading (the connection's own
// frame reader, and coder/websocket's).
func TestOnFrame(t *testing.T) {
	node := startCorral(t, nil)
	url := "ws://" + node.Addr() + "/ws"
	for _, enc := range []protocol.Encoding{protocol.JSON, protocol.Proto} {
		for _, raw := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/raw=%v", enc, raw), func(t *testing.T) { testOnFrame(t, url, enc, raw) })
		}
	}
}

func testOnFrame(t *testing.T, url string, enc protocol.Encoding, raw bool) {
	ctx := testCtx(t)
	var mu sync.Mutex
	var got []*corralv1.Message
	var hc *http.Client
	if !raw {
		hc = &http.Client{Transport: wrappedTransport{http.DefaultTransport}}
	}
	c, err := client.Dial(ctx, url, client.Options{Token: "reader", Encoding: enc, HTTPClient: hc, OnFrame: func(f *corralv1.ServerFrame) {
		if m := f.GetMessage(); m != nil {
			mu.Lock()
			got = append(got, m)
			mu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if client.ReadsRaw(c) != raw {
		t.Fatalf("reads raw: %v, want %v", client.ReadsRaw(c), raw)
	}
	room := fmt.Sprintf("onframe-%s-%v", enc, raw)
	if _, err := c.Join(ctx, room, 0, ""); err != nil {
		t.Fatal(err)
	}
	// A writer of its own per case: a user's publish budget carries over
	// from one connection to the next (edge.Edge.spent), and four cases of
	// 50 publishes are more than one user's burst.
	pub, err := client.Dial(ctx, url, client.Options{Token: "writer-" + strings.ReplaceAll(room, ".", "-"), Encoding: enc})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.CloseNow()
	if _, err := pub.Join(ctx, room, 0, ""); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		payload := fmt.Sprintf(`{"i":%d,"pad":"%0*d"}`, i, (i*97)%3000, 0)
		if _, err := pub.Publish(ctx, room, fmt.Sprint(i), []byte(payload)); err != nil {
			t.Fatal(err)
		}
	}
	// A request made while frames flow through OnFrame.
	if _, err := c.Publish(ctx, room, "last", []byte(`{"last":true}`)); err != nil {
		t.Fatal(err)
	}
	eventually.Within(10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= n+1
	})
	// Close fails when the server's close frame does not come back.
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// coder/websocket's reader, racing its own close handshake, may
	// report the closed socket instead: only the raw reader promises 1000.
	if e := c.Err(); e == nil || (raw && e.Code != 1000) {
		t.Fatalf("after Close: %v, want a normal closure", e)
	}
	for range c.Frames() {
		t.Fatal("a frame reached Frames with OnFrame set")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n+1 {
		t.Fatalf("OnFrame saw %d messages, want %d", len(got), n+1)
	}
	for i, m := range got[:n] {
		want := fmt.Sprintf(`{"i":%d,"pad":"%0*d"}`, i, (i*97)%3000, 0)
		if m.GetSeq() != uint64(i+1) || string(m.GetPayload()) != want {
			t.Fatalf("message %d: seq %d, payload %.30q; want seq %d, %.30q", i, m.GetSeq(), m.GetPayload(), i+1, want)
		}
	}
}

// TestDialHonoursDefaultClient: with no HTTPClient a connection dials
// through http.DefaultClient's transport (corral bench replaces it to
// spread source addresses), and still reads its frames itself.
func TestDialHonoursDefaultClient(t *testing.T) {
	node := startCorral(t, nil)
	var dials atomic.Int64
	d := net.Dialer{}
	prev := http.DefaultClient
	http.DefaultClient = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
	}}
	defer func() { http.DefaultClient = prev }()
	c, err := client.Dial(testCtx(t), "ws://"+node.Addr()+"/ws", client.Options{Token: "u"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if dials.Load() != 1 {
		t.Fatalf("%d dials through http.DefaultClient's transport, want 1", dials.Load())
	}
	if !client.ReadsRaw(c) {
		t.Fatal("the connection reads through coder/websocket")
	}
}

// TestDialEndsWithCtx: a server that upgrades and never says welcome
// holds Dial only until ctx ends.
func TestDialEndsWithCtx(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{protocol.SubprotocolJSON}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		<-hold
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// Without ctx's hold over the read, Dial would wait until the test's
	// own timeout.
	_, err := client.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", client.Options{Token: "u"})
	if err == nil {
		t.Fatal("dialed a server that never said welcome")
	}
	if ctx.Err() == nil {
		t.Fatalf("Dial failed before its ctx ended: %v", err)
	}
}
