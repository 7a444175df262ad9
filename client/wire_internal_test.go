package client

import (
	"errors"
	"io"
	"net"
	"testing"

	"github.com/coder/websocket"
	"github.com/corral-rt/corral/internal/wsframe"
)

// TestParseClose: a close frame's code and reason; none is 1005; a lone
// byte or a reason that is not UTF-8 is a protocol error.
func TestParseClose(t *testing.T) {
	ce, err := parseClose([]byte{0x0F, 0xA0, 'b', 'y', 'e'})
	if err != nil || ce.Code != 4000 || ce.Reason != "bye" {
		t.Fatalf("parseClose: %v %v", ce, err)
	}
	if ce, _ := parseClose(nil); ce.Code != websocket.StatusNoStatusRcvd {
		t.Fatalf("empty close: %v", ce.Code)
	}
	if _, err := parseClose([]byte{0x03}); !errors.Is(err, wsframe.ErrProtocol) {
		t.Fatalf("one-byte close payload: %v", err)
	}
	if _, err := parseClose([]byte{0x03, 0xE8, 0xFF}); !errors.Is(err, wsframe.ErrProtocol) {
		t.Fatalf("close reason not UTF-8: %v", err)
	}
}

// TestUpgradeConnStopsAtHeader: net/http gets the response's header and
// not a byte more, wherever the reads split it; the frame reader gets the
// rest.
func TestUpgradeConnStopsAtHeader(t *testing.T) {
	header := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"
	frames := string(wsframe.Frame(append(make([]byte, wsframe.MaxHeader), `{"welcome":{}}`...), wsframe.OpText))
	for split := 1; split < len(header)+len(frames); split++ {
		a, b := net.Pipe()
		go func() {
			all := header + frames
			b.Write([]byte(all[:split]))
			b.Write([]byte(all[split:]))
			b.Close()
		}()
		u := &upgradeConn{Conn: a}
		var got []byte
		buf := make([]byte, 4096)
		for !u.done {
			n, err := u.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				t.Fatalf("split %d: %v before the end of the header", split, err)
			}
		}
		if string(got) != header {
			t.Fatalf("split %d: net/http got %q", split, got)
		}
		rest, _ := io.ReadAll(u)
		if string(rest) != frames {
			t.Fatalf("split %d: the frame reader got %q, want %q", split, rest, frames)
		}
		a.Close()
	}
}
