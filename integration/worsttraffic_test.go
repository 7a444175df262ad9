package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// TestWorstTrafficKeepsReaders: the worst traffic the default limits
// allow one sender — its whole burst of 100 publishes of 60 KB sent at
// once, then 64 signals of 60 KB — into a room with a plain tight-loop
// reader and a reader that parses every frame's JSON: both stay and get
// every message. With a 1 MiB send queue and an unbounded signal tick,
// both were closed 4001.
func TestWorstTrafficKeepsReaders(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			const room, burst, signals = "worst", 100, 64
			parser := dial(t, d, "parser", protocol.JSON)
			if _, err := parser.Join(ctx, room, 0, ""); err != nil {
				t.Fatal(err)
			}
			tight := rawDial(t, d, protocol.SubprotocolJSON)
			tight.SetReadLimit(-1)
			for _, f := range []string{`{"hello":{"token":"tight"}}`, `{"join":{"room":"` + room + `"}}`} {
				if err := tight.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
					t.Fatal(err)
				}
			}
			var tightMsgs, tightJoined atomic.Int64
			tightErr := make(chan error, 1)
			go func() {
				for {
					_, data, err := tight.Read(context.Background())
					if err != nil {
						tightErr <- err
						return
					}
					// Counted by a byte search, not parsed: a tight loop.
					tightMsgs.Add(int64(strings.Count(string(data), `"message":`)))
					if strings.Contains(string(data), `"joined":`) {
						tightJoined.Store(1)
					}
				}
			}()
			for tightJoined.Load() == 0 {
				select {
				case err := <-tightErr:
					t.Fatalf("tight reader before its join: %v", err)
				case <-time.After(5 * time.Millisecond):
				}
			}
			var parsed atomic.Int64
			parserDone := make(chan struct{})
			go func() {
				defer close(parserDone)
				for f := range parser.Frames() {
					frames := []*corralv1.ServerFrame{f}
					if b := f.GetBatch(); b != nil {
						frames = b.GetFrames()
					}
					for _, f := range frames {
						if m := f.GetMessage(); m != nil {
							var v any
							if err := json.Unmarshal(m.GetPayload(), &v); err != nil {
								t.Errorf("payload: %v", err)
							}
							parsed.Add(1)
						}
					}
				}
			}()

			sender := dial(t, d, "sender", protocol.JSON)
			if _, err := sender.Join(ctx, room, 0, ""); err != nil {
				t.Fatal(err)
			}
			go func() {
				for range sender.Frames() { // the sender reads too
				}
			}()
			value := `"` + strings.Repeat("v", 60<<10) + `"`
			for i := range burst {
				if err := sender.SendRaw(ctx, []byte(fmt.Sprintf(`{"publish":{"room":%q,"id":"p%d","payload":%s}}`, room, i, value))); err != nil {
					t.Fatalf("publish %d: %v (the sender's connection: %v)", i, err, sender.Err())
				}
			}
			for i := range signals {
				if err := sender.SendRaw(ctx, []byte(fmt.Sprintf(`{"signal":{"room":%q,"key":"k%d","payload":%s}}`, room, i, value))); err != nil {
					t.Fatalf("signal %d: %v (the sender's connection: %v)", i, err, sender.Err())
				}
			}
			deadline := time.After(30 * time.Second)
			for parsed.Load() < burst || tightMsgs.Load() < burst {
				select {
				case err := <-tightErr:
					t.Fatalf("the tight-loop reader was closed after %d messages: %v", tightMsgs.Load(), err)
				case <-parserDone:
					t.Fatalf("the parsing reader was closed after %d messages: %v", parsed.Load(), parser.Err())
				case <-deadline:
					t.Fatalf("after 30 s: tight reader %d, parser %d messages of %d", tightMsgs.Load(), parsed.Load(), burst)
				case <-time.After(10 * time.Millisecond):
				}
			}
			// The signals too go out without closing anyone.
			time.Sleep(500 * time.Millisecond)
			select {
			case err := <-tightErr:
				t.Fatalf("the tight-loop reader was closed after the signals: %v", err)
			case <-parserDone:
				t.Fatalf("the parsing reader was closed after the signals: %v", parser.Err())
			default:
			}
		})
	}
}
