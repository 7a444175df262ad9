package client

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/corral-rt/corral/internal/safetext"
	"github.com/corral-rt/corral/internal/wsframe"
)

// Reading without coder/websocket. A connection reads every server frame
// (one per message, several per socket read when they are queued) through
// coder/websocket's reader, which takes a lock, resets two readers and
// goes through net/http's reader and a bufio.Reader of its own per
// message: on a client that holds thousands of connections, such as corral
// bench, about a third of the time it spends per message. So for a ws://
// URL, Dial takes the TCP connection as the HTTP transport dials it, and
// once the upgrade is done reads the server's frames from it itself
// (wsframe.Reader): unmasked, as RFC 6455 §5.1 has a server send them.
// coder/websocket still does the handshake and writes the client's
// (masked) data frames; the connection writes its control frames (close,
// pong) itself, under the same lock as its data frames. For wss:// (TLS
// below the frames) and for an HTTPClient whose transport is not an
// *http.Transport, the connection reads through coder/websocket as before.

// upgradeConn is the TCP connection of one upgrade. Until the end of the
// response's header it hands net/http what it reads, but never a byte
// past it: what follows the header (frames the server sent at once) waits
// in early, for the frame reader. net/http reads nothing after a 101.
type upgradeConn struct {
	net.Conn
	matched int    // how much of "\r\n\r\n" the bytes read so far end with
	done    bool   // the header has been read
	early   []byte // read past the header
}

func (u *upgradeConn) Read(p []byte) (int, error) {
	if u.done {
		if len(u.early) > 0 {
			n := copy(p, u.early)
			u.early = u.early[n:]
			return n, nil
		}
		return u.Conn.Read(p)
	}
	n, err := u.Conn.Read(p)
	for i := range n {
		switch {
		case p[i] == "\r\n\r\n"[u.matched]:
			u.matched++
		case p[i] == '\r':
			u.matched = 1
		default:
			u.matched = 0
		}
		if u.matched == 4 {
			u.done = true
			if i+1 < n {
				u.early = append([]byte(nil), p[i+1:n]...)
				return i + 1, nil // err comes again on the next read
			}
			return n, err
		}
	}
	return n, err
}

// rawClient returns the client to upgrade url with so that its connection
// can be read directly, or nil when it cannot be: a copy of hc (nil is
// http.DefaultClient, as for coder/websocket) whose transport, made for
// this one upgrade, hands the connection it dials to *dialed. A fresh
// transport also never takes a kept-alive connection instead of dialing.
func rawClient(url string, hc *http.Client, dialed **upgradeConn) *http.Client {
	if !strings.HasPrefix(url, "ws://") && !strings.HasPrefix(url, "http://") {
		return nil // TLS below the frames
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	t, ok := base.(*http.Transport)
	if !ok {
		return nil
	}
	t = t.Clone()
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		u := &upgradeConn{Conn: c}
		*dialed = u
		return u, nil
	}
	return &http.Client{Transport: t, CheckRedirect: hc.CheckRedirect, Jar: hc.Jar, Timeout: hc.Timeout}
}

// parseClose reads a close frame's payload: no payload is 1005 (no status
// received).
func parseClose(p []byte) (websocket.CloseError, error) {
	if len(p) == 0 {
		return websocket.CloseError{Code: websocket.StatusNoStatusRcvd}, nil
	}
	if len(p) == 1 || !utf8.Valid(p[2:]) {
		return websocket.CloseError{}, fmt.Errorf("%w: malformed close frame", wsframe.ErrProtocol)
	}
	return websocket.CloseError{Code: websocket.StatusCode(binary.BigEndian.Uint16(p)), Reason: string(p[2:])}, nil
}

// closePayload is a close frame's payload for code and reason.
func closePayload(code websocket.StatusCode, reason string) []byte {
	if code == websocket.StatusNoStatusRcvd {
		return nil
	}
	reason = safetext.Reason(reason)
	p := binary.BigEndian.AppendUint16(nil, uint16(code))
	return append(p, reason...)
}
