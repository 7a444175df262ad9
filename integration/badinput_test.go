package integration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// rawDial opens a WebSocket without the client package, to send anything.
func rawDial(t *testing.T, d *deployment, sub string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, d.wsURL, &websocket.DialOptions{Subprotocols: []string{sub}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

// closeCode reads until the server closes and returns the close code and
// the code of the frame that explained it: a reconnect hint for the resume
// and retry classes, an error frame (no room) for the stop class. A
// reconnect hint before a stop-class close fails the test.
func closeCode(t *testing.T, ws *websocket.Conn, enc protocol.Encoding) (websocket.StatusCode, corralv1.Code) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var hint, refusal corralv1.Code
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			code := websocket.CloseStatus(err)
			if protocol.AdviceOf(corralv1.Code(code)) == protocol.AdviceStop {
				if hint != 0 {
					t.Errorf("stop-class close %d came after a reconnect hint %d", code, hint)
				}
				return code, refusal
			}
			return code, hint
		}
		var f corralv1.ServerFrame
		if protocol.DecodeServer(enc, data, &f) != nil {
			continue
		}
		frames := []*corralv1.ServerFrame{&f}
		if b := f.GetBatch(); b != nil {
			frames = b.GetFrames()
		}
		for _, f := range frames {
			if h := f.GetReconnect(); h != nil {
				hint = h.GetCode()
			}
			if e := f.GetError(); e != nil && e.GetRoom() == "" && e.GetRef() == "" {
				refusal = e.GetCode()
			}
		}
	}
}

// TestBadInput: every kind of bad input gets its documented answer, and a
// bystander in the same room keeps receiving in order.
func TestBadInput(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, func(o *server.Options) { o.Edge.ReadLimit = 4096 })
			ctx := testCtx(t)
			bystander := dial(t, d, "bystander", protocol.JSON)
			publisher := dial(t, d, "publisher", protocol.Proto)
			for _, c := range []*client.Conn{bystander, publisher} {
				if _, err := c.Join(ctx, "calm", 0, ""); err != nil {
					t.Fatal(err)
				}
			}
			seq := uint64(0)
			checkBystander := func(t *testing.T) {
				t.Helper()
				seq++
				if _, err := publisher.Publish(ctx, "calm", strings.Repeat("x", int(seq)), payload(int(seq))); err != nil {
					t.Fatal(err)
				}
				got := nextFrame(t, bystander, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil })
				if got.GetMessage().GetSeq() != seq {
					t.Fatalf("bystander got seq %d, want %d", got.GetMessage().GetSeq(), seq)
				}
			}
			hello := `{"hello":{"token":"mallory"}}`

			closes := map[string]struct {
				sub    string
				frames []string
				want   corralv1.Code
			}{
				"garbage before hello": {protocol.SubprotocolJSON, []string{"\x00\xffnot json"}, corralv1.Code_CODE_BAD_FRAME},
				"frame before hello":   {protocol.SubprotocolJSON, []string{`{"join":{"room":"calm"}}`}, corralv1.Code_CODE_HELLO_REQUIRED},
				"garbage after hello":  {protocol.SubprotocolJSON, []string{hello, "{{{{"}, corralv1.Code_CODE_BAD_FRAME},
				"wrong field type":     {protocol.SubprotocolJSON, []string{hello, `{"join":{"room":42}}`}, corralv1.Code_CODE_BAD_FRAME},
				"oversize frame":       {protocol.SubprotocolJSON, []string{hello, `{"publish":{"room":"calm","payload":"` + strings.Repeat("a", 5000) + `"}}`}, corralv1.Code_CODE_TOO_LARGE},
				"truncated protobuf":   {protocol.SubprotocolProto, []string{"\x0a\x05\x0a"}, corralv1.Code_CODE_BAD_FRAME},
				"invalid payload json": {protocol.SubprotocolJSON, []string{hello, `{"publish":{"room":"calm","payload":{oops}}}`}, corralv1.Code_CODE_BAD_FRAME},
			}
			for name, tc := range closes {
				t.Run(name, func(t *testing.T) {
					ws := rawDial(t, d, tc.sub)
					enc, _ := protocol.EncodingOf(tc.sub)
					typ := websocket.MessageText
					if enc == protocol.Proto {
						typ = websocket.MessageBinary
					}
					for _, f := range tc.frames {
						if err := ws.Write(ctx, typ, []byte(f)); err != nil {
							t.Fatal(err)
						}
					}
					code, hint := closeCode(t, ws, enc)
					if code != websocket.StatusCode(tc.want) || hint != tc.want {
						t.Fatalf("closed with %d (hint %d), want %d", code, hint, tc.want)
					}
					if protocol.AdviceOf(tc.want) != protocol.AdviceStop {
						t.Fatalf("code %d should advise stop", tc.want)
					}
					checkBystander(t)
				})
			}

			// wantFrame: the kind the Error names as refused (Error.frame;
			// none for what no request kind covers).
			errorsKept := map[string]struct {
				frame     string
				want      corralv1.Code
				wantFrame string
			}{
				"unknown frame type":    {`{"teleport":{"room":"calm"}}`, corralv1.Code_CODE_UNKNOWN_FRAME, ""},
				"publish without join":  {`{"publish":{"room":"elsewhere","id":"p1","payload":1}}`, corralv1.Code_CODE_NOT_JOINED, "publish"},
				"empty room name":       {`{"join":{"room":""}}`, corralv1.Code_CODE_INVALID_ARGUMENT, "join"},
				"second hello":          {hello, corralv1.Code_CODE_BAD_FRAME, "hello"},
				"control chars in room": {`{"join":{"room":"a\u0001b"}}`, corralv1.Code_CODE_INVALID_ARGUMENT, "join"},
				"leave a room not in":   {`{"leave":{"room":"nowhere"}}`, corralv1.Code_CODE_NOT_JOINED, "leave"},
				// A growing message needs the room joined, as a publish does.
				"append outside the room": {`{"append":{"room":"elsewhere","id":"m1","dataBase64":"SGk="}}`, corralv1.Code_CODE_NOT_JOINED, "append"},
				// Keyed state needs the room joined, as a publish does.
				"set state without join":    {`{"setState":{"room":"calm","key":"k","value":1,"ref":"s1"}}`, corralv1.Code_CODE_NOT_JOINED, "setState"},
				"delete state without join": {`{"deleteState":{"room":"calm","key":"k","ref":"s2"}}`, corralv1.Code_CODE_NOT_JOINED, "deleteState"},
			}
			for name, tc := range errorsKept {
				t.Run(name, func(t *testing.T) {
					c := dial(t, d, "clumsy", protocol.JSON)
					if err := c.SendRaw(ctx, []byte(tc.frame)); err != nil {
						t.Fatal(err)
					}
					f := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetError() != nil })
					if f.GetError().GetCode() != tc.want || f.GetError().GetFrame() != tc.wantFrame {
						t.Fatalf("error %v, want code %d naming frame %q", f.GetError(), tc.want, tc.wantFrame)
					}
					// Still open and served.
					if _, err := c.Join(ctx, "calm", 0, ""); err != nil {
						t.Fatalf("connection unusable after a refused frame: %v", err)
					}
					checkBystander(t)
				})
			}
		})
	}
}

// TestWelcomeFirst: frames sent right behind the hello, before the
// Welcome came back — a second hello, an unknown kind, a call, a ping, a
// join — are answered after the Welcome, never before it (client.proto:
// the Welcome comes first). The edge answered the first three at once.
func TestWelcomeFirst(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			for round := range 5 {
				ws := rawDial(t, d, protocol.SubprotocolJSON)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				for _, f := range []string{
					`{"hello":{"token":"early"}}`, `{"hello":{"token":"early"}}`, `{"teleport":{"room":"x"}}`,
					`{"call":{"id":1,"method":"m","payload":1}}`, `{"ping":{"id":7}}`, `{"join":{"room":"early"}}`,
				} {
					if err := ws.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
						t.Fatal(err)
					}
				}
				var kinds []string
				for len(kinds) < 6 {
					_, data, err := ws.Read(ctx)
					if err != nil {
						t.Fatalf("round %d: after %v: %v", round, kinds, err)
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
						kind := fmt.Sprintf("%T", f.GetKind())
						if len(kinds) == 0 && f.GetWelcome() == nil {
							t.Fatalf("round %d: the first frame is %s, not the Welcome", round, kind)
						}
						kinds = append(kinds, kind)
					}
				}
				ws.CloseNow()
			}
		})
	}
}
