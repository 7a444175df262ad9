package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"connectrpc.com/connect/v2"
	"github.com/coder/websocket"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// TestCloseReasonStaysUTF8: a bad frame whose error echoes multi-byte
// input closes with its documented code (4400) and a reason that is valid
// UTF-8 and within a close frame's 123 bytes, as a real client sees it (the
// Go client, like browsers, refuses a close reason that is not UTF-8:
// Chromium reports 1006, which CODES.md says to treat as "resume"). The
// error frame before the close carries the same bounded reason.
func TestCloseReasonStaysUTF8(t *testing.T) {
	d := start(t, "serve", nil, nil)
	ctx := testCtx(t)
	for name, frame := range map[string]string{
		"sinceSeq":      `{"join":{"room":"lobby","sinceSeq":"` + strings.Repeat("é", 80) + `"}}`,
		"code":          `{"ack":{"room":"lobby","seq":"` + strings.Repeat("€", 80) + `x"}}`,
		"invalid bytes": `{"join":{"room":"lobby","sinceSeq":"` + strings.Repeat("\\u00e9", 80) + `"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, d, "careless", protocol.JSON)
			if err := c.SendRaw(ctx, []byte(frame)); err != nil {
				t.Fatal(err)
			}
			ce := waitClosed(t, c)
			if ce == nil || ce.Code != websocket.StatusCode(corralv1.Code_CODE_BAD_FRAME) {
				t.Fatalf("closed with %v, want %d", ce, corralv1.Code_CODE_BAD_FRAME)
			}
			if !utf8.ValidString(ce.Reason) || len(ce.Reason) > 123 {
				t.Fatalf("close reason %q: %d bytes, UTF-8 %v", ce.Reason, len(ce.Reason), utf8.ValidString(ce.Reason))
			}
			if !strings.Contains(ce.Reason, "sinceSeq") && !strings.Contains(ce.Reason, "seq") {
				t.Errorf("close reason %q does not say which field", ce.Reason)
			}
			// A stop-class close comes with an error frame, not a reconnect
			// hint (CODES.md), carrying the same bounded reason.
			if r := ce.Refusal; r.GetCode() != corralv1.Code_CODE_BAD_FRAME || r.GetMessage() != ce.Reason {
				t.Errorf("refusal %v, want code %d and the close reason", r, corralv1.Code_CODE_BAD_FRAME)
			}
		})
	}
}

// badNames are names that look like others or hide in a log line; every
// door refuses them (see safetext.CheckName and docs/SECURITY.md).
var badNames = map[string]string{
	"U+0085 next line":      "lobby\u0085",
	"U+009B CSI":            "lobby\u009b31m",
	"U+202E right-to-left":  "\u202eybbol",
	"U+2028 line separator": "lob\u2028by",
	"U+200B zero width":     "lob\u200bby",
	"U+00A0 no-break space": "the\u00a0lobby",
	"U+FEFF byte order":     "\ufefflobby",
	"trailing space":        "lobby ",
}

// TestNamesRefusedEverywhere: a room name, a signal key, a user id (dev
// token) and the API's room, sender and grant user with an invisible or
// control character are refused with INVALID_ARGUMENT (4401 for a user
// id at connect), and the connection stays usable.
func TestNamesRefusedEverywhere(t *testing.T) {
	d := start(t, "serve", nil, nil)
	ctx := testCtx(t)
	c := dial(t, d, "alice", protocol.JSON)
	if _, err := c.Join(ctx, "lobby", 0, ""); err != nil {
		t.Fatal(err)
	}
	for name, bad := range badNames {
		t.Run(name, func(t *testing.T) {
			_, err := c.Join(ctx, bad, 0, "")
			wantCode(t, err, corralv1.Code_CODE_INVALID_ARGUMENT)

			if err := c.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{
				Room: "lobby", Key: bad, Payload: []byte(`1`),
			}}}); err != nil {
				t.Fatal(err)
			}
			f := nextFrame(t, c, func(f *corralv1.ServerFrame) bool {
				return f.GetError() != nil || f.GetBatch() != nil || f.GetSignal() != nil
			})
			if f.GetError().GetCode() != corralv1.Code_CODE_INVALID_ARGUMENT {
				t.Fatalf("signal with key %q: got %v, want an INVALID_ARGUMENT error", bad, f)
			}

			_, err = client.Dial(ctx, d.wsURL, client.Options{Token: bad})
			var ce *client.CloseError
			if !asCloseError(err, &ce) || ce.Code != websocket.StatusCode(corralv1.Code_CODE_UNAUTHENTICATED) {
				t.Fatalf("dial as %q: %v, want a close with %d", bad, err, corralv1.Code_CODE_UNAUTHENTICATED)
			}

			for what, call := range map[string]func() error{
				"publish room": func() error {
					_, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: bad, Payload: []byte(`1`)})
					return err
				},
				"publish sender": func() error {
					_, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "lobby", Sender: bad, Payload: []byte(`1`)})
					return err
				},
				"history room": func() error {
					_, err := d.api.History(ctx, &corralv1.HistoryRequest{Room: bad})
					return err
				},
				"grant user": func() error {
					_, err := d.api.Grant(ctx, &corralv1.GrantRequest{UserId: bad, Join: []string{"lobby"}})
					return err
				},
				"grant pattern": func() error {
					_, err := d.api.Grant(ctx, &corralv1.GrantRequest{UserId: "bob", Join: []string{bad}})
					return err
				},
			} {
				if err := call(); connect.CodeOf(err) != connect.CodeInvalidArgument {
					t.Errorf("%s %q: %v, want invalid_argument", what, bad, err)
				}
			}
		})
	}
	// Still served.
	if _, err := c.Publish(ctx, "lobby", "after", []byte(`1`)); err != nil {
		t.Fatal(err)
	}
}

func asCloseError(err error, ce **client.CloseError) bool {
	e, ok := err.(*client.CloseError)
	*ce = e
	return ok
}

// logBuffer is a logger that keeps what it logged, for tests that check
// the log has what a client must not see.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// unreachableHistory is the in-memory history that, once down, fails as
// a Redis history does when its server is unreachable: with the address
// in the error.
type unreachableHistory struct {
	*history.Memory
	down atomic.Bool
}

const storeAddr = "10.9.8.7:6379"

func (h *unreachableHistory) err(op, room string) error {
	return fmt.Errorf("history: %s %q: dial tcp %s: connect: connection refused", op, room, storeAddr)
}

func (h *unreachableHistory) Append(ctx context.Context, room string, msg *corralv1.Message, key string) (history.AppendResult, error) {
	if h.down.Load() {
		return history.AppendResult{}, h.err("append to", room)
	}
	return h.Memory.Append(ctx, room, msg, key)
}

func (h *unreachableHistory) Read(ctx context.Context, q history.Query) (history.Page, error) {
	if h.down.Load() {
		return history.Page{}, h.err("read", q.Room)
	}
	return h.Memory.Read(ctx, q)
}

func (h *unreachableHistory) ReadMany(ctx context.Context, qs []history.Query) ([]history.Page, error) {
	if h.down.Load() {
		return nil, h.err("read", "")
	}
	return h.Memory.ReadMany(ctx, qs)
}

func (h *unreachableHistory) State(ctx context.Context, room string) (history.State, error) {
	if h.down.Load() {
		return history.State{}, h.err("state of", room)
	}
	return h.Memory.State(ctx, room)
}

// TestStoreErrorsHidden: when the history store fails with its address in
// the error, a client's publish and join get CODE_UNAVAILABLE with a text
// that names neither the address nor the store's error, the internal
// API's Publish and History get Unavailable likewise, and the log keeps
// the error.
func TestStoreErrorsHidden(t *testing.T) {
	hist := &unreachableHistory{Memory: history.NewMemory(history.MemoryOptions{})}
	logs := &logBuffer{}
	d := start(t, "serve", nil, func(o *server.Options) {
		o.Core.History = hist
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	ctx := testCtx(t)
	c := dial(t, d, "alice", protocol.JSON)
	if _, err := c.Join(ctx, "lobby", 0, ""); err != nil {
		t.Fatal(err)
	}
	hist.down.Store(true)
	leaks := func(s string) bool {
		return strings.Contains(s, storeAddr) || strings.Contains(s, "dial") ||
			strings.Contains(s, "refused") || strings.Contains(s, "history:")
	}

	_, err := c.Publish(ctx, "lobby", "p1", []byte(`1`))
	e := serverErr(t, err)
	if e.GetCode() != corralv1.Code_CODE_UNAVAILABLE || leaks(e.GetMessage()) {
		t.Fatalf("publish with the store down: %v, want UNAVAILABLE naming no address", e)
	}
	_, err = c.Join(ctx, "elsewhere", 0, "")
	e = serverErr(t, err)
	if e.GetCode() != corralv1.Code_CODE_UNAVAILABLE || leaks(e.GetMessage()) {
		t.Fatalf("join with the store down: %v, want UNAVAILABLE naming no address", e)
	}

	_, err = d.api.Publish(ctx, &corralv1.PublishRequest{Room: "lobby", Payload: []byte(`1`)})
	if connect.CodeOf(err) != connect.CodeUnavailable || leaks(err.Error()) {
		t.Fatalf("API publish with the store down: %v, want unavailable naming no address", err)
	}
	_, err = d.api.History(ctx, &corralv1.HistoryRequest{Room: "lobby"})
	if connect.CodeOf(err) != connect.CodeUnavailable || leaks(err.Error()) {
		t.Fatalf("API history with the store down: %v, want unavailable naming no address", err)
	}
	if !strings.Contains(logs.String(), storeAddr) {
		t.Fatalf("the log does not keep the store's error:\n%s", logs.String())
	}

	hist.down.Store(false)
	if _, err := c.Publish(ctx, "lobby", "p2", []byte(`2`)); err != nil {
		t.Fatalf("publish once the store is back: %v", err)
	}
}

// lenientAuth accepts any token as the user id, unchecked, as a careless
// custom Authenticator would.
type lenientAuth struct{}

func (lenientAuth) Authenticate(_ context.Context, token string) (*corralv1.Identity, error) {
	return &corralv1.Identity{UserId: token, Join: []string{"*"}, Publish: []string{"*"}}, nil
}

// TestEdgeChecksUserID: whatever the authenticator returns, the edge
// refuses a user id that breaks the rule for names (4401), and serves a
// valid one.
func TestEdgeChecksUserID(t *testing.T) {
	d := start(t, "serve", lenientAuth{}, nil)
	ctx := testCtx(t)
	for name, bad := range badNames {
		t.Run(name, func(t *testing.T) {
			_, err := client.Dial(ctx, d.wsURL, client.Options{Token: bad})
			var ce *client.CloseError
			if !asCloseError(err, &ce) || ce.Code != websocket.StatusCode(corralv1.Code_CODE_UNAUTHENTICATED) {
				t.Fatalf("dial as %q: %v, want a close with %d", bad, err, corralv1.Code_CODE_UNAUTHENTICATED)
			}
		})
	}
	dial(t, d, "alice", protocol.JSON)
}
