package edge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connectinprocess"
	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/core"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/protocol"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// startStreamEdge starts a core and an edge serving /ws and the HTTP
// fallbacks on one server that speaks HTTP/1.1 and h2c.
func startStreamEdge(t testing.TB, tune func(*Config)) (*Edge, string) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	co := core.New(core.Config{Logger: quiet})
	rpc := connect.NewServer()
	linkv1connect.RegisterLinkServiceHandler(rpc, co)
	cfg := Config{
		Core:   linkv1connect.NewLinkServiceClient(connect.NewClient(connectinprocess.New(rpc))),
		Auth:   auth.Dev{},
		Logger: quiet,
	}
	if tune != nil {
		tune(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ws", e)
	mux.Handle("/rt/", e.StreamHandler())
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Close(ctx)
		srv.Close()
		co.Close()
	})
	eventually.True(t, 10*time.Second, e.Ready, "the links to come up")
	return e, srv.URL
}

// TestStreamOverHTTP2: with no socket to hijack (HTTP/2), a stream is
// written through the ResponseWriter (httpOut): join, publish and receive
// over each fallback.
func TestStreamOverHTTP2(t *testing.T) {
	_, base := startStreamEdge(t, nil)
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: p}}
	for _, tc := range []struct {
		name string
		tr   client.Transport
		enc  protocol.Encoding
	}{
		{"sse", client.SSE, protocol.JSON},
		{"stream_proto", client.HTTPStream, protocol.Proto},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", client.Options{Token: "u-" + tc.name, Transport: tc.tr, Encoding: tc.enc, HTTPClient: hc})
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseNow()
			if _, err := c.Join(ctx, "r", 0, ""); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"a", "b", "c"} {
				if _, err := c.Publish(ctx, "r", tc.name+id, []byte(`{}`)); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range []string{"a", "b", "c"} {
				select {
				case f := <-c.Frames():
					for f.GetMessage() == nil {
						f = <-c.Frames()
					}
					if f.GetMessage().GetId() != tc.name+id {
						t.Fatalf("got %v, want message %s", f, tc.name+id)
					}
				case <-ctx.Done():
					t.Fatal("no message")
				}
			}
		})
	}
}

// sseEvent reads one event (comments are returned as event ":").
func sseEvent(t *testing.T, br *bufio.Reader) (event, data string) {
	t.Helper()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if event != "" || data != "" {
				return event, data
			}
		case strings.HasPrefix(line, ":"):
			event = ":"
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// TestSSEOpenHeartbeatClose: the raw stream: its head, the corral-open
// event, a heartbeat comment while nothing else is written, and, with no
// hello in time, the close frame then corral-close 4405 and the end.
func TestSSEOpenHeartbeatClose(t *testing.T) {
	_, base := startStreamEdge(t, func(c *Config) {
		c.StreamHeartbeat = 50 * time.Millisecond
		c.Heartbeat = 400 * time.Millisecond    // the sweeper's tick: 200 ms
		c.HelloTimeout = 500 * time.Millisecond // before the heartbeat timeout (800 ms)
	})
	resp, err := http.Get(base + SSEPath + "?stream=0123456789abcdefXYZ")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for k, want := range map[string]string{
		"Content-Type": "text/event-stream", "Cache-Control": "no-cache, no-store", "X-Accel-Buffering": "no",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	br := bufio.NewReader(resp.Body)
	if ev, data := sseEvent(t, br); ev != "corral-open" || !strings.Contains(data, `"secret":"`) {
		t.Fatalf("first event %q %q, want corral-open with the secret", ev, data)
	}
	if ev, _ := sseEvent(t, br); ev != ":" {
		t.Fatalf("got event %q, want a heartbeat comment", ev)
	}
	for {
		ev, data := sseEvent(t, br)
		if ev == ":" {
			continue
		}
		if ev != "" || !strings.Contains(data, `"code":4405`) {
			t.Fatalf("got %q %q, want the error frame 4405", ev, data)
		}
		break
	}
	if ev, data := sseEvent(t, br); ev != "corral-close" || !strings.Contains(data, `"code":4405`) {
		t.Fatalf("got %q %q, want corral-close 4405", ev, data)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after corral-close: %v, want the end of the body", err)
	}
}

// TestStreamRefusals: every refusal of a fallback request has its status
// (docs/TRANSPORTS.md) and, where it is a refusal, its typed reason.
func TestStreamRefusals(t *testing.T) {
	e, base := startStreamEdge(t, func(c *Config) {
		c.OriginPatterns = []string{"app.example"}
		c.MaxPostBytes = 1 << 10
	})
	// An open stream to POST to.
	resp, err := http.Get(base + SSEPath + "?stream=open-stream-0000000001")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, open := sseEvent(t, bufio.NewReader(resp.Body))
	secret := open[strings.Index(open, `"secret":"`)+10:]
	secret = secret[:strings.IndexByte(secret, '"')]

	post := func(id, sec, ct string, body []byte) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, base+SendPath+"?stream="+id, bytes.NewReader(body))
		r.Header.Set("X-Corral-Stream", id)
		r.Header.Set("X-Corral-Secret", sec)
		r.Header.Set("Content-Type", ct)
		return r
	}
	get := func(path string, h ...string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, base+path, nil)
		for i := 0; i < len(h); i += 2 {
			r.Header.Set(h[i], h[i+1])
		}
		return r
	}
	opts, _ := http.NewRequest(http.MethodOptions, base+SendPath, nil)
	opts.Header.Set("Origin", "https://app.example")
	for _, tc := range []struct {
		name   string
		req    *http.Request
		status int
		reason refuseReason
	}{
		{"bad id", get(SSEPath + "?stream=short"), http.StatusBadRequest, refusedStreamID},
		{"id in use", get(SSEPath + "?stream=open-stream-0000000001"), http.StatusConflict, refusedStreamID},
		{"EventSource reconnect", get(SSEPath+"?stream=another-stream-000001", "Last-Event-ID", "7"), http.StatusNoContent, numRefuseReasons},
		{"origin", get(SSEPath+"?stream=another-stream-000002", "Origin", "https://evil.example"), http.StatusForbidden, refusedOrigin},
		{"unknown stream", post("nowhere-stream-000001", "x", "application/json", nil), http.StatusNotFound, refusedStreamUnknown},
		{"wrong secret", post("open-stream-0000000001", "nope", "application/json", nil), http.StatusForbidden, refusedStreamSecret},
		{"content type", post("open-stream-0000000001", secret, "text/plain", nil), http.StatusUnsupportedMediaType, refusedPostType},
		{"too large", post("open-stream-0000000001", secret, "application/json", make([]byte, 2<<10)), http.StatusRequestEntityTooLarge, refusedPostTooLarge},
		{"preflight", opts, http.StatusNoContent, numRefuseReasons},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before float64
			if tc.reason != numRefuseReasons {
				before = testutil.ToFloat64(e.metrics.refusedBy[tc.reason])
			}
			resp, err := http.DefaultClient.Do(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.reason != numRefuseReasons {
				if got := testutil.ToFloat64(e.metrics.refusedBy[tc.reason]); got != before+1 {
					t.Errorf("%s counted %v, want %v", tc.reason, got, before+1)
				}
			}
			if tc.name == "preflight" {
				if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "https://app.example" {
					t.Errorf("Allow-Origin %q", got)
				}
				if got := resp.Header.Get("Access-Control-Allow-Headers"); !strings.Contains(got, "X-Corral-Secret") {
					t.Errorf("Allow-Headers %q", got)
				}
			}
		})
	}
	// The stream is untouched by all of it: a hello still works.
	hello, _ := protocol.AppendClient(protocol.JSON, nil, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{}}})
	r := post("open-stream-0000000001", secret, "application/json", hello)
	r.Header.Set("Authorization", "Bearer alice")
	resp2, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusNoContent {
		t.Fatalf("hello: status %d", resp2.StatusCode)
	}
}

// openSSE opens a stream with id over the network and returns its
// response (to close) and secret.
func openSSE(t testing.TB, base, id string) (io.Closer, string) {
	t.Helper()
	resp, err := http.Get(base + SSEPath + "?stream=" + id)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("open %s: %s", id, resp.Status)
	}
	br := bufio.NewReader(resp.Body)
	var open string
	for open == "" {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			open = line
		}
	}
	secret := open[strings.Index(open, `"secret":"`)+10:]
	return resp.Body, secret[:strings.IndexByte(secret, '"')]
}

// FuzzStreamRequest sends the fallbacks' request decoders arbitrary input:
// a GET /rt/sse with any stream id and Last-Event-ID, and a POST /rt/send
// with any stream id header, Content-Type and body to a live stream (its
// frames read as a client's). Nothing may crash the edge, and every
// answer is one of the documented statuses (docs/TRANSPORTS.md).
func FuzzStreamRequest(f *testing.F) {
	e, base := startStreamEdge(f, nil)
	hello, _ := protocol.AppendClient(protocol.JSON, nil, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{Token: "fuzz"}}})
	join, _ := protocol.AppendClient(protocol.JSON, nil, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: "r"}}})
	phello, _ := protocol.AppendClient(protocol.Proto, nil, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{Token: "fuzz"}}})
	f.Add("", "application/json", "", append(append(append(hello, '\n'), join...), '\n'))
	f.Add("", "application/x-protobuf", "3", append([]byte{0, 0, 0, byte(len(phello))}, phello...))
	f.Add("", "application/x-protobuf", "", []byte{0, 0, 0, 9, 1})
	f.Add("bad id!", "application/json; charset=utf-8", "x", []byte("{\n}\n\n"))
	f.Add("0123456789abcdef", "text/plain", "", []byte(nil))
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, id, ctype, lastEventID string, body []byte) {
		sid := fmt.Sprintf("fuzz-stream-%012d", n.Add(1))
		closer, secret := openSSE(t, base, sid)
		defer closer.Close()

		ctx, cancel := context.WithCancel(context.Background())
		cancel() // an opened stream's handler returns at once
		get := httptest.NewRequestWithContext(ctx, http.MethodGet, SSEPath+"?stream="+url.QueryEscape(id), nil)
		get.Header.Set("Last-Event-ID", lastEventID)
		rec := httptest.NewRecorder()
		e.serveRT(rec, get)
		switch rec.Code {
		case http.StatusOK, http.StatusNoContent, http.StatusBadRequest, http.StatusConflict, http.StatusServiceUnavailable:
		default:
			t.Fatalf("GET: status %d", rec.Code)
		}

		target := sid
		if id != "" {
			target = id
		}
		post := httptest.NewRequest(http.MethodPost, SendPath+"?stream="+url.QueryEscape(target), bytes.NewReader(body))
		post.Header.Set("X-Corral-Stream", target)
		post.Header.Set("X-Corral-Secret", secret)
		post.Header.Set("Content-Type", ctype)
		rec = httptest.NewRecorder()
		e.serveRT(rec, post)
		switch rec.Code {
		case http.StatusNoContent, http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound,
			http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		default:
			t.Fatalf("POST: status %d", rec.Code)
		}
	})
}

// FuzzSplitFrames: a POST body splits into frames without a panic, and
// the frames of a body that splits are its records, whole.
func FuzzSplitFrames(f *testing.F) {
	f.Add([]byte("{}\n{}"), false)
	f.Add([]byte{0, 0, 0, 1, 8, 0, 0, 0, 0}, true)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, true)
	f.Fuzz(func(t *testing.T, body []byte, proto bool) {
		enc := protocol.JSON
		if proto {
			enc = protocol.Proto
		}
		frames, err := splitFrames(enc, body)
		if !proto || err != nil {
			return
		}
		var back []byte
		for _, fr := range frames {
			back = binary.BigEndian.AppendUint32(back, uint32(len(fr)))
			back = append(back, fr...)
		}
		if !bytes.Equal(back, body) {
			t.Fatalf("records %x do not make the body %x", back, body)
		}
	})
}

// FuzzStreamID: validStreamID accepts exactly 16 to 64 characters of
// [A-Za-z0-9_-].
func FuzzStreamID(f *testing.F) {
	f.Add("0123456789abcdef")
	f.Add("short")
	f.Add("0123456789abcdef/")
	re := regexp.MustCompile(`^[A-Za-z0-9_-]{16,64}$`)
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := validStreamID(id), re.MatchString(id); got != want {
			t.Fatalf("validStreamID(%q) = %v, want %v", id, got, want)
		}
	})
}

// TestSSESlowConsumer: an SSE client that stops reading is a slow
// consumer like a WebSocket one: its queue's bounds hold, the edge cuts
// it (queue_full, or write_timeout once its socket is full), and its
// stream is gone; the room goes on.
func TestSSESlowConsumer(t *testing.T) {
	e, base := startStreamEdge(t, func(c *Config) {
		c.QueueFrames, c.QueueBytes = 64, 256<<10
		c.WriteTimeout = time.Second
		c.MessageRate = -1
	})
	u, _ := url.Parse(base)
	raw, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.(*net.TCPConn).SetReadBuffer(4 << 10)
	const id = "slow-stream-00000000001"
	if _, err := raw.Write([]byte("GET " + SSEPath + "?stream=" + id + " HTTP/1.1\r\nHost: corral\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(raw, 4<<10)
	var open string
	for !strings.HasPrefix(open, "data: ") {
		if open, err = br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	secret := open[strings.Index(open, `"secret":"`)+10:]
	secret = secret[:strings.IndexByte(secret, '"')]
	// Hello and join by POST; from now on nothing is read.
	var body []byte
	for _, f := range []*corralv1.ClientFrame{
		{Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{Token: "slow"}}},
		{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: "r"}}},
	} {
		b, _ := protocol.AppendClient(protocol.JSON, nil, f)
		body = append(append(body, b...), '\n')
	}
	req, _ := http.NewRequest(http.MethodPost, base+SendPath+"?stream="+id, bytes.NewReader(body))
	req.Header.Set("X-Corral-Stream", id)
	req.Header.Set("X-Corral-Secret", secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("hello: %s", resp.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pub, err := client.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", client.Options{Token: "pub"})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.CloseNow()
	if _, err := pub.Join(ctx, "r", 0, ""); err != nil {
		t.Fatal(err)
	}
	cut := func() float64 {
		return testutil.ToFloat64(e.metrics.slowBy[slowQueueFull]) + testutil.ToFloat64(e.metrics.slowBy[slowWriteTimeout])
	}
	big := []byte(`"` + strings.Repeat("a", 32<<10) + `"`)
	for i := 0; cut() == 0; i++ {
		if i == 2000 {
			t.Fatal("2000 messages of 32 KiB and the edge did not cut the reader that stopped")
		}
		if _, err := pub.Publish(ctx, "r", fmt.Sprintf("m%d", i), big); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the slow stream to end", func() bool { return e.streamConn(id) == nil })
	// The room goes on for its other member.
	if _, err := pub.Publish(ctx, "r", "after", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
}

// TestLockPostWaitsForTheOpeningHello: the Welcome can reach a client
// before the opening request of its HTTP stream has released the reader
// token; the client's next POST then waits for that hello instead of
// being refused 409, while a POST meeting another POST is still refused.
func TestLockPostWaitsForTheOpeningHello(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &stream{opening: make(chan struct{})}
		s.post.Lock() // the opening request's hello
		got := make(chan bool, 1)
		go func() { got <- s.lockPost(context.Background(), time.Minute) }()
		synctest.Wait() // the POST is blocked, waiting for the hello
		select {
		case ok := <-got:
			t.Fatalf("lockPost returned %v while the hello held the token", ok)
		default:
		}
		s.post.Unlock()
		close(s.opening)
		if !<-got {
			t.Fatal("a POST after the opening hello was refused")
		}
		// Now a POST holds the token: another is refused at once.
		if s.lockPost(context.Background(), time.Minute) {
			t.Fatal("a second POST took the token")
		}
		s.post.Unlock()

		// A hello that never ends: the POST gives up after its wait.
		slow := &stream{opening: make(chan struct{})}
		slow.post.Lock()
		if slow.lockPost(context.Background(), time.Second) {
			t.Fatal("took a token the hello still holds")
		}

		// An SSE stream (no hello in its opening request) refuses at once.
		sse := &stream{}
		sse.post.Lock()
		if sse.lockPost(context.Background(), time.Minute) {
			t.Fatal("took a held token")
		}
	})
}

// TestStreamCloseQueuedWhileTheHeadIsWritten: a close queued while the
// opening request still holds the writer token (a hello POSTed as soon as
// the client read the secret, refused), with the reader's finish already
// waiting, is written: the Error frame, then corral-close, then the end.
// Released and taken again, the token let finish cut the stream first.
func TestStreamCloseQueuedWhileTheHeadIsWritten(t *testing.T) {
	_, base := startStreamEdge(t, nil)
	afterStreamHead = func(c *conn) {
		c.closeWith(corralv1.Code_CODE_UNAUTHENTICATED, "refused in the window", 0, false)
		go c.stream.end(c) // the reader's finish, as after a refused hello
		eventually.True(t, 10*time.Second, func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.ended
		}, "finish to wait for the writer")
	}
	t.Cleanup(func() { afterStreamHead = nil })
	resp, err := http.Get(base + SSEPath + "?stream=head-window-000000001")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if ev, _ := sseEvent(t, br); ev != "corral-open" {
		t.Fatalf("first event %q, want corral-open", ev)
	}
	if ev, data := sseEvent(t, br); ev != "" || !strings.Contains(data, `"code":4401`) {
		t.Fatalf("got %q %q, want the error frame 4401", ev, data)
	}
	if ev, data := sseEvent(t, br); ev != "corral-close" || !strings.Contains(data, `"code":4401`) {
		t.Fatalf("got %q %q, want corral-close 4401", ev, data)
	}
}
