package edge

import (
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/corral-rt/corral/internal/peek"
	"github.com/corral-rt/corral/protocol"
)

// The WebSocket opening handshake (RFC 6455 §4.2), done by the edge
// itself. coder/websocket's Accept did it until 2026-12-06: it built a
// Conn (its reader, writer, mutexes and their channels) that the edge let
// go at once, split the header values into token slices and set the 101's
// fields in a header map, 2.4 KiB and 43 allocations an upgrade (224 B
// and 2 here, the connection's sock and wire: BenchmarkHandshake), 14 MB
// of a herd's reconnect window
// (docs/benchmarks/2026-12-06-1341-issue34-herd-cuts.md). Here the checks
// read the header's values in place, the accept key is hashed on the stack
// and the 101 is written from a pooled buffer.
//
// What a client sees is what Accept gave it: the same checks in the same
// order with the same status and body, the same origin rule
// (Config.OriginPatterns, path.Match on the origin's host, or on
// "scheme://host" for a pattern with "://"), the same subprotocol choice
// (the edge's first that the client offers, spelt as the client spelt it),
// and no extension (Accept's compression was never enabled). One answer
// differs: a Sec-WebSocket-Version other than 13 is refused with 426
// Upgrade Required (Accept: 400), as RFC 6455 §4.2.2 suggests, still with
// "Sec-WebSocket-Version: 13". (The key is hashed as checked, trimmed;
// Accept hashed it untrimmed, which only a request built without an HTTP
// parser, which trims field values, could tell.)

// wsGUID is the key's suffix before hashing (RFC 6455 §1.3).
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// wsSubprotocols are the subprotocols the edge speaks, by preference.
var wsSubprotocols = [...]string{protocol.SubprotocolProto, protocol.SubprotocolJSON}

// upgraded is a connection after the 101: the socket, what the reader
// reads (with what the client sent past its request), the wire every
// write goes through, and the subprotocol chosen, as the edge spells it
// (protocol.SubprotocolProto or SubprotocolJSON; "" for none), whatever
// the case the client offered it in. Passed by value: one allocation less
// per upgrade.
type upgraded struct {
	nc          net.Conn
	sock        *sock
	wire        *wire
	subprotocol string
}

// wsRefusal is a handshake refused by its request, before the hijack: its
// status and body, and header fields the answer carries.
type wsRefusal struct {
	status int
	msg    string
	// upgrade: the answer says "Connection: Upgrade" and "Upgrade:
	// websocket"; version: it says "Sec-WebSocket-Version: 13".
	upgrade, version bool
}

func (r *wsRefusal) Error() string { return "edge: WebSocket handshake refused: " + r.msg }

// checkUpgrade checks r as a WebSocket opening handshake (RFC 6455
// §4.2.1), as coder/websocket's Accept did, in its order and with its
// messages. It returns the client's key, trimmed, or the refusal.
func checkUpgrade(r *http.Request) (key string, _ *wsRefusal) {
	h := r.Header
	if !r.ProtoAtLeast(1, 1) {
		return "", &wsRefusal{status: http.StatusUpgradeRequired,
			msg: fmt.Sprintf("WebSocket protocol violation: handshake request must be at least HTTP/1.1: %q", r.Proto)}
	}
	if !hasToken(h["Connection"], "upgrade") {
		return "", &wsRefusal{status: http.StatusUpgradeRequired, upgrade: true,
			msg: fmt.Sprintf("WebSocket protocol violation: Connection header %q does not contain Upgrade", h.Get("Connection"))}
	}
	if !hasToken(h["Upgrade"], "websocket") {
		return "", &wsRefusal{status: http.StatusUpgradeRequired, upgrade: true,
			msg: fmt.Sprintf("WebSocket protocol violation: Upgrade header %q does not contain websocket", h.Get("Upgrade"))}
	}
	if r.Method != http.MethodGet {
		return "", &wsRefusal{status: http.StatusMethodNotAllowed,
			msg: fmt.Sprintf("WebSocket protocol violation: handshake request method is not GET but %q", r.Method)}
	}
	if v := h.Get("Sec-Websocket-Version"); v != "13" {
		return "", &wsRefusal{status: http.StatusUpgradeRequired, version: true,
			msg: fmt.Sprintf("unsupported WebSocket protocol version (only 13 is supported): %q", v)}
	}
	keys := h["Sec-Websocket-Key"]
	switch {
	case len(keys) == 0:
		return "", &wsRefusal{status: http.StatusBadRequest, msg: "WebSocket protocol violation: missing Sec-WebSocket-Key"}
	case len(keys) > 1:
		return "", &wsRefusal{status: http.StatusBadRequest, msg: "WebSocket protocol violation: multiple Sec-WebSocket-Key headers"}
	}
	key = strings.TrimSpace(keys[0])
	if !validKey(key) {
		return "", &wsRefusal{status: http.StatusBadRequest,
			msg: fmt.Sprintf("WebSocket protocol violation: invalid Sec-WebSocket-Key %q, must be a 16 byte base64 encoded string", key)}
	}
	return key, nil
}

// validKey reports whether key is 16 bytes in base64, as
// base64.StdEncoding.DecodeString decodes it (which skips CR and LF),
// without allocating.
func validKey(key string) bool {
	if len(key) > 64 {
		return false // 16 bytes are 24 characters, and a few line breaks
	}
	var src [64]byte
	var dst [48]byte
	n := copy(src[:], key)
	m, err := base64.StdEncoding.Decode(dst[:], src[:n])
	return err == nil && m == 16
}

// hasToken reports whether one of a header's values, read as a list of
// comma-separated tokens, holds token (ASCII, compared without case).
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for v != "" {
			var t string
			t, v = nextToken(v)
			if strings.EqualFold(t, token) {
				return true
			}
		}
	}
	return false
}

// nextToken splits a comma-separated header value: its first token,
// trimmed of spaces, and what follows the comma ("" at the end).
func nextToken(v string) (token, rest string) {
	if i := strings.IndexByte(v, ','); i >= 0 {
		return strings.TrimSpace(v[:i]), v[i+1:]
	}
	return strings.TrimSpace(v), ""
}

// selectSubprotocol is the first of the edge's subprotocols that the
// client offers, in any case: echo as the client spelt it (what the 101
// answers), chosen as the edge spells it (what picks the encoding, so
// that the answer and the encoding never disagree); "" when it offers
// none.
func selectSubprotocol(values []string) (echo, chosen string) {
	for _, sp := range wsSubprotocols {
		for _, v := range values {
			for v != "" {
				var t string
				if t, v = nextToken(v); strings.EqualFold(sp, t) {
					return t, sp
				}
			}
		}
	}
	return "", ""
}

// errOrigin is an upgrade refused for its Origin; its message is the body
// of the 403.
type errOrigin struct{ msg string }

func (e errOrigin) Error() string { return e.msg }

// checkOrigin checks an upgrade's Origin as coder/websocket's Accept did:
// none, the request's own host, or a match of one of patterns (path.Match
// without case, on the origin's host, or on "scheme://host" for a pattern
// with "://"). A pattern path.Match cannot parse is logged, and refuses.
func checkOrigin(r *http.Request, patterns []string) error {
	origin := r.Header.Get("Origin")
	if origin == "" || sameHost(origin, r.Host) {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil {
		return errOrigin{fmt.Sprintf("failed to parse Origin header %q: %v", origin, err)}
	}
	ok, err := matchOrigin(u, r.Host, patterns)
	if err != nil {
		log.Printf("websocket: %v", err)
		return errOrigin{http.StatusText(http.StatusForbidden)}
	}
	if ok {
		return nil
	}
	if u.Host == "" {
		return errOrigin{fmt.Sprintf("request Origin %q is not a valid URL with a host", origin)}
	}
	return errOrigin{fmt.Sprintf("request Origin %q is not authorized for Host %q", u.Host, r.Host)}
}

// matchOrigin is the edge's one origin rule, for upgrades (checkOrigin)
// and the HTTP fallbacks (originAllowed): the origin u is host's own, or
// matches one of patterns (path.Match without case, on u's host, or on
// "scheme://host" for a pattern with "://"). A pattern path.Match cannot
// parse is an error: the origin is refused.
func matchOrigin(u *url.URL, host string, patterns []string) (bool, error) {
	if strings.EqualFold(host, u.Host) {
		return true, nil
	}
	for _, p := range patterns {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		ok, err := path.Match(strings.ToLower(p), strings.ToLower(target))
		if err != nil {
			return false, fmt.Errorf("failed to parse path pattern %q: %v", p, err)
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// sameHost reports whether origin is "http://host" or "https://host",
// host (ASCII, without case) a plain host name or address with an
// optional numeric port: an origin url.Parse reads as host's own, checked
// without parsing it (a browser's every upgrade has an Origin, mostly its
// own host's).
func sameHost(origin, host string) bool {
	rest, ok := strings.CutPrefix(origin, "http://")
	if !ok {
		if rest, ok = strings.CutPrefix(origin, "https://"); !ok {
			return false
		}
	}
	if !strings.EqualFold(rest, host) {
		return false
	}
	name, port, hasPort := strings.Cut(rest, ":")
	if name == "" || (hasPort && port == "") {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	for i := 0; i < len(port); i++ {
		if c := port[i]; c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// acceptKey is the Sec-WebSocket-Accept of key (RFC 6455 §4.2.2): the
// base64 of the SHA-1 of key and wsGUID, into dst.
func acceptKey(dst *[28]byte, key string) {
	var b [64 + len(wsGUID)]byte
	n := copy(b[:], key)
	n += copy(b[n:], wsGUID)
	sum := sha1.Sum(b[:n])
	base64.StdEncoding.Encode(dst[:], sum[:])
}

// upgrade does the opening handshake of r, answering on w: it checks the
// request (checkUpgrade), its origin (unless anyOrigin), hijacks the
// connection and writes the 101. A refused handshake has been answered
// and returns an error.
//
// The 101 carries the header fields set on w before (by a middleware, say)
// besides the handshake's own. The connection's buffers are the edge's
// (buffers.go): what net/http read past the request is copied to
// sock.early, and its buffers go.
func upgrade(w http.ResponseWriter, r *http.Request, patterns []string, anyOrigin bool) (upgraded, error) {
	key, refusal := checkUpgrade(r)
	if refusal != nil {
		h := w.Header()
		if refusal.upgrade {
			h.Set("Connection", "Upgrade")
			h.Set("Upgrade", "websocket")
		}
		if refusal.version {
			h.Set("Sec-WebSocket-Version", "13")
		}
		http.Error(w, refusal.msg, refusal.status)
		return upgraded{}, refusal
	}
	if !anyOrigin {
		if err := checkOrigin(r, patterns); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return upgraded{}, err
		}
	}
	subprotocol, chosen := selectSubprotocol(r.Header["Sec-Websocket-Protocol"])
	extra := w.Header()
	nc, early, err := hijack(w)
	if err != nil {
		return upgraded{}, err
	}
	wr := newWire(nc)
	s := &sock{Conn: nc, early: early}
	if peek.CanRead {
		s.raw = wr.raw // nil when nc is not a socket: its reads block
	}
	// The 101 is written from a read buffer: a buffer of the stack
	// would escape to the heap through the interface's Write.
	buf := readBufs.Get()
	defer readBufs.Put(buf)
	head := response101(buf[:0], key, subprotocol, extra)
	if _, err := nc.Write(head); err != nil {
		nc.Close()
		return upgraded{}, fmt.Errorf("edge: writing the 101: %w", err)
	}
	return upgraded{nc: nc, sock: s, wire: wr, subprotocol: chosen}, nil
}

// earlyHijacker is a ResponseWriter that hands its connection over
// without a bufio pair, with a copy of what the client sent past the
// request (nil: nothing): corral's WebSocket listener
// (server.upgradeResponse).
type earlyHijacker interface {
	HijackEarly() (net.Conn, []byte, error)
}

// hijack takes the connection from w, with what the client sent past the
// request, the caller's, and answers a failure as Accept did (501 when w
// cannot hijack, 500 when the hijack fails).
func hijack(w http.ResponseWriter) (net.Conn, []byte, error) {
	if eh, ok := w.(earlyHijacker); ok {
		nc, early, err := eh.HijackEarly()
		if err != nil {
			http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
			return nil, nil, fmt.Errorf("edge: hijack: %w", err)
		}
		return nc, early, nil
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		hj, ok = unwrapHijacker(w)
	}
	if !ok {
		http.Error(w, http.StatusText(http.StatusNotImplemented), http.StatusNotImplemented)
		return nil, nil, errors.New("edge: the http.ResponseWriter does not implement http.Hijacker")
	}
	nc, brw, err := hj.Hijack()
	if err != nil {
		http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
		return nil, nil, fmt.Errorf("edge: hijack: %w", err)
	}
	if brw.Writer.Buffered() > 0 {
		// Nothing should be: net/http writes no head for a handler that
		// wrote none. What there is goes first.
		if err := brw.Writer.Flush(); err != nil {
			nc.Close()
			return nil, nil, fmt.Errorf("edge: hijack: %w", err)
		}
	}
	var early []byte
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		early = append([]byte(nil), b...)
	}
	return nc, early, nil
}

// unwrapHijacker finds the Hijacker under wrappers of w that have an
// Unwrap method (as http.ResponseController does).
func unwrapHijacker(w http.ResponseWriter) (http.Hijacker, bool) {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil, false
		}
		w = u.Unwrap()
		if hj, ok := w.(http.Hijacker); ok {
			return hj, true
		}
	}
}

// response101 appends the 101 answering key with subprotocol to b, with
// the fields of extra (set on the ResponseWriter before the handshake)
// that are not the handshake's own.
func response101(b []byte, key, subprotocol string, extra http.Header) []byte {
	var accept [28]byte
	acceptKey(&accept, key)
	b = append(b, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "...)
	b = append(b, accept[:]...)
	if subprotocol != "" {
		b = append(b, "\r\nSec-WebSocket-Protocol: "...)
		b = append(b, subprotocol...)
	}
	b = append(b, "\r\n"...)
	for k, vs := range extra {
		switch k {
		case "Upgrade", "Connection", "Sec-Websocket-Accept", "Sec-Websocket-Protocol", "Sec-Websocket-Extensions":
			continue
		}
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, headerValue(v)...)
			b = append(b, "\r\n"...)
		}
	}
	return append(b, "\r\n"...)
}

// headerValue is v with line breaks made spaces, as http.Header.Write
// writes it.
func headerValue(v string) string {
	if strings.ContainsAny(v, "\r\n") {
		return strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
	}
	return v
}
