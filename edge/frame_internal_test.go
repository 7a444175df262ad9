package edge

import (
	"bytes"
	"context"
	"io"

	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/coder/websocket"
	"github.com/corral-rt/corral/internal/wsframe"
)

// TestFrameMessage writes frames of each length class (7-bit, 16-bit and
// 64-bit lengths) the way the writer does, after the edge's own 101 and
// before its close frame, and reads them back with coder/websocket's
// client, which validates every header.
func TestFrameMessage(t *testing.T) {
	sizes := []int{0, 1, 125, 126, 127, 1000, 0xFFFF, 0x10000, 300_000}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := upgrade(w, r, nil, false)
		if err != nil {
			t.Error(err)
			return
		}
		c := &conn{nc: u.nc, wire: u.wire, sock: u.sock}
		for i, n := range sizes {
			op := byte(wsframe.OpText)
			if i%2 == 1 {
				op = wsframe.OpBinary
			}
			buf := make([]byte, wsframe.MaxHeader, wsframe.MaxHeader+n)
			buf = append(buf, bytes.Repeat([]byte{byte('a' + i)}, n)...)
			if _, err := u.nc.Write(wsframe.Frame(buf, op)); err != nil {
				t.Error(err)
				return
			}
		}
		c.writeClose(closeNormal, "done")
		u.nc.Close()
	}))
	defer srv.Close()
	ctx := context.Background()
	c, _, err := websocket.Dial(ctx, "ws"+srv.URL[len("http"):], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	for i, n := range sizes {
		typ, r, err := c.Reader(ctx)
		if err != nil {
			t.Fatalf("message %d (%d bytes): %v", i, n, err)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		want := websocket.MessageText
		if i%2 == 1 {
			want = websocket.MessageBinary
		}
		if typ != want || len(b) != n || (n > 0 && (b[0] != byte('a'+i) || b[n-1] != byte('a'+i))) {
			t.Fatalf("message %d: type %v, %d bytes; want %v, %d bytes of %q", i, typ, len(b), want, n, rune('a'+i))
		}
	}
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Fatalf("after the messages: %v, want a normal close", err)
	}
}
