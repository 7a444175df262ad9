package edge

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/corral-rt/corral/protocol"
)

// TestAcceptKey: RFC 6455 §1.3's example, and keys of every length a
// valid key may have (with line breaks base64 skips) against the
// definition.
func TestAcceptKey(t *testing.T) {
	var got [28]byte
	acceptKey(&got, "dGhlIHNhbXBsZSBub25jZQ==")
	if string(got[:]) != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("RFC 6455's example: %q, want s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", got)
	}
	for _, key := range []string{"AAAAAAAAAAAAAAAAAAAAAA==", "/////////////////////w==", "dGhlIHNhbX\nBsZSBub25jZQ=="} {
		sum := sha1.Sum([]byte(key + wsGUID))
		acceptKey(&got, key)
		if want := base64.StdEncoding.EncodeToString(sum[:]); string(got[:]) != want {
			t.Errorf("%q: %q, want %q", key, got, want)
		}
	}
}

// TestHandshakeRefusals: each refused upgrade, over a real socket, gets
// its status, the header fields that go with it, and the connection is
// not upgraded.
func TestHandshakeRefusals(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, err := upgrade(w, r, []string{"allowed.example"}, false); err == nil {
			u.nc.Close()
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	const key = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
	const up = "Upgrade: websocket\r\nConnection: Upgrade\r\n"
	for _, tc := range []struct {
		name, head string
		status     int
		header     string // a field the answer must carry, "Name: value"
		body       string
	}{
		{"bad version", "GET /ws HTTP/1.1\r\nHost: h\r\n" + up + key + "Sec-WebSocket-Version: 8\r\n\r\n",
			http.StatusUpgradeRequired, "Sec-WebSocket-Version: 13", `unsupported WebSocket protocol version (only 13 is supported): "8"`},
		{"no version", "GET /ws HTTP/1.1\r\nHost: h\r\n" + up + key + "\r\n",
			http.StatusUpgradeRequired, "Sec-WebSocket-Version: 13", `unsupported WebSocket protocol version (only 13 is supported): ""`},
		{"missing key", "GET /ws HTTP/1.1\r\nHost: h\r\n" + up + "Sec-WebSocket-Version: 13\r\n\r\n",
			http.StatusBadRequest, "", "WebSocket protocol violation: missing Sec-WebSocket-Key"},
		{"two keys", "GET /ws HTTP/1.1\r\nHost: h\r\n" + up + key + key + "Sec-WebSocket-Version: 13\r\n\r\n",
			http.StatusBadRequest, "", "WebSocket protocol violation: multiple Sec-WebSocket-Key headers"},
		{"key of 15 bytes", "GET /ws HTTP/1.1\r\nHost: h\r\n" + up + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ\r\nSec-WebSocket-Version: 13\r\n\r\n",
			http.StatusBadRequest, "", `WebSocket protocol violation: invalid Sec-WebSocket-Key "dGhlIHNhbXBsZSBub25jZQ", must be a 16 byte base64 encoded string`},
		{"bad origin", "GET /ws HTTP/1.1\r\nHost: h\r\n" + up + key + "Sec-WebSocket-Version: 13\r\nOrigin: https://evil.example\r\n\r\n",
			http.StatusForbidden, "", `request Origin "evil.example" is not authorized for Host "h"`},
		{"wrong method", "POST /ws HTTP/1.1\r\nHost: h\r\n" + up + key + "Sec-WebSocket-Version: 13\r\nContent-Length: 0\r\n\r\n",
			http.StatusMethodNotAllowed, "", `WebSocket protocol violation: handshake request method is not GET but "POST"`},
		{"no upgrade token", "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: keep-alive\r\n" + key + "Sec-WebSocket-Version: 13\r\n\r\n",
			http.StatusUpgradeRequired, "Upgrade: websocket", `WebSocket protocol violation: Connection header "keep-alive" does not contain Upgrade`},
		{"not websocket", "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n" + key + "Sec-WebSocket-Version: 13\r\n\r\n",
			http.StatusUpgradeRequired, "Connection: Upgrade", `WebSocket protocol violation: Upgrade header "h2c" does not contain websocket`},
		{"HTTP/1.0", "GET /ws HTTP/1.0\r\nHost: h\r\n" + up + key + "Sec-WebSocket-Version: 13\r\n\r\n",
			http.StatusUpgradeRequired, "", `WebSocket protocol violation: handshake request must be at least HTTP/1.1: "HTTP/1.0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(nc, tc.head); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d (%q), want %d", resp.StatusCode, body, tc.status)
			}
			if string(body) != tc.body+"\n" {
				t.Errorf("body %q, want %q", body, tc.body+"\n")
			}
			if name, value, ok := strings.Cut(tc.header, ": "); ok && resp.Header.Get(name) != value {
				t.Errorf("%s: %q, want %q", name, resp.Header.Get(name), value)
			}
			if resp.Header.Get("Sec-WebSocket-Accept") != "" {
				t.Errorf("a refusal with Sec-WebSocket-Accept")
			}
		})
	}
}

// TestHandshakeAsAccept: for requests that coder/websocket's Accept took
// or refused, with the options the edge gave it, the edge's handshake
// answers with the same status, body and handshake fields (a version
// other than 13 aside: 426 where Accept said 400). Accept's compression
// was never enabled: an offer of permessage-deflate gets no extension.
func TestHandshakeAsAccept(t *testing.T) {
	patterns := []string{"allowed.example", "*.wild.example", "https://schemed.example", "[bad"}
	base := http.Header{
		"Upgrade":               {"websocket"},
		"Connection":            {"Upgrade"},
		"Sec-Websocket-Version": {"13"},
		"Sec-Websocket-Key":     {"dGhlIHNhbXBsZSBub25jZQ=="},
	}
	for _, tc := range []struct {
		name string
		set  http.Header
	}{
		{"plain", nil},
		{"json", http.Header{"Sec-Websocket-Protocol": {protocol.SubprotocolJSON}}},
		{"both, proto preferred", http.Header{"Sec-Websocket-Protocol": {"x, corral.v1.json", " corral.v1.proto "}}},
		{"spelt otherwise", http.Header{"Sec-Websocket-Protocol": {"CORRAL.v1.JSON"}}},
		{"unknown subprotocol", http.Header{"Sec-Websocket-Protocol": {"mqtt"}}},
		{"deflate offered", http.Header{"Sec-Websocket-Extensions": {"permessage-deflate; client_max_window_bits"}}},
		{"connection list", http.Header{"Connection": {"keep-alive, UPGRADE"}, "Upgrade": {"WebSocket"}}},
		{"empty tokens", http.Header{"Connection": {",,upgrade,"}}},
		{"key with spaces", http.Header{"Sec-Websocket-Key": {" dGhlIHNhbXBsZSBub25jZQ== "}}},
		{"key too long", http.Header{"Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ==AAAA"}}},
		{"key not base64", http.Header{"Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ!!"}}},
		{"own origin", http.Header{"Origin": {"http://HOST.example"}}},
		{"own origin, https", http.Header{"Origin": {"https://host.example"}}},
		{"own origin, empty port", http.Header{"Origin": {"http://host.example:"}}},
		{"own origin, path", http.Header{"Origin": {"http://host.example/x"}}},
		{"allowed origin", http.Header{"Origin": {"https://Allowed.example"}}},
		{"wildcard origin", http.Header{"Origin": {"http://a.wild.example"}}},
		{"scheme pattern", http.Header{"Origin": {"https://schemed.example"}}},
		{"scheme pattern, other scheme", http.Header{"Origin": {"http://schemed.example"}}},
		{"null origin", http.Header{"Origin": {"null"}}},
		{"unparsable origin", http.Header{"Origin": {"http://[::1"}}},
		{"foreign origin", http.Header{"Origin": {"https://evil.example"}}},
		{"version 12", http.Header{"Sec-Websocket-Version": {"12"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := base.Clone()
			for k, v := range tc.set {
				h[k] = v
			}
			compareWithAccept(t, "GET", h, patterns)
		})
	}
	t.Run("POST", func(t *testing.T) { compareWithAccept(t, "POST", base.Clone(), patterns) })
}

// compareWithAccept runs one request through coder/websocket's Accept
// and through upgrade, and fails unless they answer alike.
func compareWithAccept(t *testing.T, method string, h http.Header, patterns []string) {
	t.Helper()
	req := func() *http.Request {
		r := httptest.NewRequest(method, "http://host.example/ws", nil)
		r.Header = h.Clone()
		return r
	}
	theirs := &memHijacker{ResponseRecorder: httptest.NewRecorder()}
	ws, theirErr := websocket.Accept(theirs, req(), &websocket.AcceptOptions{
		Subprotocols:   []string{protocol.SubprotocolProto, protocol.SubprotocolJSON},
		OriginPatterns: patterns,
	})
	if ws != nil {
		ws.CloseNow()
	}
	ours := &memHijacker{ResponseRecorder: httptest.NewRecorder()}
	u, ourErr := upgrade(ours, req(), patterns, false)
	if (theirErr == nil) != (ourErr == nil) {
		t.Fatalf("Accept: %v; upgrade: %v", theirErr, ourErr)
	}
	if theirErr != nil {
		status := theirs.Code
		if status == http.StatusBadRequest && theirs.Header().Get("Sec-WebSocket-Version") == "13" {
			status = http.StatusUpgradeRequired // the one answer that changed
		}
		if ours.Code != status || ours.Body.String() != theirs.Body.String() {
			t.Fatalf("refused with %d %q; Accept: %d %q", ours.Code, ours.Body, theirs.Code, theirs.Body)
		}
		for _, k := range []string{"Connection", "Upgrade", "Sec-Websocket-Version"} {
			if ours.Header().Get(k) != theirs.Header().Get(k) {
				t.Errorf("%s: %q; Accept: %q", k, ours.Header().Get(k), theirs.Header().Get(k))
			}
		}
		return
	}
	u.nc.Close()
	resp, err := http.ReadResponse(bufio.NewReader(&ours.out), nil)
	if err != nil {
		t.Fatalf("the 101: %v: %q", err, ours.out.String())
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || theirs.Code != http.StatusSwitchingProtocols {
		t.Fatalf("status %d; Accept: %d", resp.StatusCode, theirs.Code)
	}
	for _, k := range []string{"Connection", "Upgrade", "Sec-Websocket-Accept", "Sec-Websocket-Protocol", "Sec-Websocket-Extensions"} {
		got, want := resp.Header.Values(k), theirs.Header().Values(k)
		if key := h.Get("Sec-Websocket-Key"); k == "Sec-Websocket-Accept" && key != strings.TrimSpace(key) {
			// Accept hashed the key with the spaces it trimmed to check
			// it; the edge hashes what it checked (RFC 6455 §4.2.2: the
			// field's value, which an HTTP parser trims).
			var a [28]byte
			acceptKey(&a, strings.TrimSpace(key))
			want = []string{string(a[:])}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: %q; Accept: %q", k, got, want)
		}
	}
	// The edge keeps its own spelling of what the 101 echoes.
	if !strings.EqualFold(u.subprotocol, resp.Header.Get("Sec-WebSocket-Protocol")) {
		t.Errorf("subprotocol %q, the 101 says %q", u.subprotocol, resp.Header.Get("Sec-WebSocket-Protocol"))
	}
}

// memHijacker is a ResponseRecorder that can be hijacked: its connection
// keeps what is written to it in out.
type memHijacker struct {
	*httptest.ResponseRecorder
	out bytes.Buffer
}

func (m *memHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c := &memConn{out: &m.out}
	return c, bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c)), nil
}

// memConn is a connection that reads nothing and keeps what is written.
type memConn struct {
	net.Conn // nil: only what is below is called
	out      *bytes.Buffer
}

func (c *memConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (c *memConn) Write(p []byte) (int, error)      { return c.out.Write(p) }
func (c *memConn) Close() error                     { return nil }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }
func (c *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }

// FuzzHandshake: for any values of the handshake's header fields and any
// method, the edge's checks answer as coder/websocket's Accept did (see
// TestHandshakeAsAccept).
func FuzzHandshake(f *testing.F) {
	f.Add("GET", "Upgrade", "websocket", "13", "dGhlIHNhbXBsZSBub25jZQ==", "corral.v1.json", "")
	f.Add("GET", "keep-alive, Upgrade", "WebSocket", "13", " dGhlIHNhbXBsZSBub25jZQ== ", "x,corral.v1.proto", "http://a.wild.example")
	f.Add("GET", "upgrade", "websocket", "8", "AAAA", "", "https://evil.example")
	f.Add("POST", ",", ",websocket", "13", "dGhlIHNh\nbXBsZSBub25jZQ==", " , ", "null")
	f.Add("GET", "Upgrade", "websocket", "13", "dGhlIHNhbXBsZSBub25jZQ==", "", "https://HOST.example")
	f.Add("GET", "Upgrade", "websocket", "13", "dGhlIHNhbXBsZSBub25jZQ==", "", "http://host.example:")
	f.Fuzz(func(t *testing.T, method, connection, upgrade, version, key, subprotocols, origin string) {
		if !validMethod(method) {
			return
		}
		h := http.Header{}
		for k, v := range map[string]string{"Connection": connection, "Upgrade": upgrade,
			"Sec-Websocket-Version": version, "Sec-Websocket-Key": key,
			"Sec-Websocket-Protocol": subprotocols, "Origin": origin} {
			if v != "" {
				h[k] = []string{v}
			}
		}
		compareWithAccept(t, method, h, []string{"allowed.example", "https://*.wild.example"})
	})
}

// validMethod reports whether m is an HTTP token, as httptest.NewRequest
// needs.
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		if c := m[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

// BenchmarkHandshake: one upgrade's cost after the request is parsed, the
// edge's handshake against coder/websocket's Accept (which the edge used
// until 2026-12-06) with the options the edge gave it, on a connection
// that keeps nothing.
func BenchmarkHandshake(b *testing.B) {
	r := httptest.NewRequest("GET", "http://host.example/ws", nil)
	r.Header = http.Header{
		"Upgrade":                {"websocket"},
		"Connection":             {"Upgrade"},
		"Sec-Websocket-Version":  {"13"},
		"Sec-Websocket-Key":      {"dGhlIHNhbXBsZSBub25jZQ=="},
		"Sec-Websocket-Protocol": {protocol.SubprotocolProto},
		"Origin":                 {"http://host.example"},
	}
	w := &discardHijacker{h: http.Header{}}
	b.Run("edge", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			clear(w.h)
			u, err := upgrade(w, r, nil, false)
			if err != nil {
				b.Fatal(err)
			}
			u.nc.Close()
		}
	})
	b.Run("coder-accept", func(b *testing.B) {
		b.ReportAllocs()
		opts := &websocket.AcceptOptions{Subprotocols: []string{protocol.SubprotocolProto, protocol.SubprotocolJSON}}
		for b.Loop() {
			clear(w.h)
			ws, err := websocket.Accept(w, r, opts)
			if err != nil {
				b.Fatal(err)
			}
			ws.CloseNow()
		}
	})
}

// discardHijacker is a ResponseWriter whose connection discards what is
// written, for BenchmarkHandshake; its Hijack allocates nothing.
type discardHijacker struct {
	h   http.Header
	c   memConn
	brw bufio.ReadWriter
}

func (d *discardHijacker) Header() http.Header         { return d.h }
func (d *discardHijacker) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardHijacker) WriteHeader(int)             {}
func (d *discardHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if d.brw.Reader == nil {
		d.c.out = new(bytes.Buffer)
		d.brw = bufio.ReadWriter{Reader: bufio.NewReaderSize(&d.c, 16), Writer: bufio.NewWriterSize(&d.c, 16)}
	}
	d.c.out.Reset()
	return &d.c, &d.brw, nil
}

// TestSubprotocolPicksTheEncoding: the 101 echoes the subprotocol as the
// client spelt it, and the encoding follows the same choice: a client that
// offers CORRAL.V1.PROTO is answered with it and served binary frames, not
// JSON behind a proto answer.
func TestSubprotocolPicksTheEncoding(t *testing.T) {
	for _, tc := range []struct {
		offer      []string
		echo       string
		enc        protocol.Encoding
		negotiated bool
	}{
		{[]string{"CORRAL.V1.PROTO"}, "CORRAL.V1.PROTO", protocol.Proto, true},
		{[]string{"Corral.V1.Json"}, "Corral.V1.Json", protocol.JSON, true},
		{[]string{"x, corral.v1.json", " corral.v1.PROTO "}, "corral.v1.PROTO", protocol.Proto, true},
		{[]string{"mqtt"}, "", 0, false},
		{nil, "", 0, false},
	} {
		echo, chosen := selectSubprotocol(tc.offer)
		enc, ok := protocol.EncodingOf(chosen)
		if echo != tc.echo || ok != tc.negotiated || (ok && enc != tc.enc) {
			t.Errorf("offer %q: echo %q, encoding %v (negotiated %v); want %q, %v (%v)", tc.offer, echo, enc, ok, tc.echo, tc.enc, tc.negotiated)
		}
	}
}

// TestOneOriginRule: an upgrade and an HTTP fallback's request (SSE,
// streaming) with the same Origin get the same answer: one rule,
// matchOrigin, decides both.
func TestOneOriginRule(t *testing.T) {
	for _, patterns := range [][]string{
		{"allowed.example", "*.wild.example", "https://schemed.example", "http://ported.example:8080"},
		{"[bad", "allowed.example"}, // a pattern path.Match cannot parse refuses
	} {
		oneOriginRule(t, patterns)
	}
}

func oneOriginRule(t *testing.T, patterns []string) {
	t.Helper()
	for _, origin := range []string{
		"http://host.example", "https://HOST.example", "http://host.example:", "http://host.example/x",
		"https://allowed.example", "http://a.wild.example", "https://schemed.example", "http://schemed.example",
		"http://ported.example:8080", "http://ported.example:9090", "https://schemed.example/x", "null", "http://[::1", "https://evil.example",
	} {
		r := httptest.NewRequest("GET", "http://host.example/ws", nil)
		r.Header.Set("Origin", origin)
		upgrade := checkOrigin(r, patterns) == nil
		if fallback := originAllowed(origin, r.Host, patterns); fallback != upgrade {
			t.Errorf("origin %q: an upgrade is allowed %v, a fallback %v", origin, upgrade, fallback)
		}
	}
}
