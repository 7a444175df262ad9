package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// TestWorstTrafficKeepsReaders: the worst traffic the default limits
// allow one sender — its whole burst of 100 publishes of 60 KB sent at
// once, then a signal of 60 KB on each of the 64 keys it may hold — into a
// room with a plain tight-loop reader and a reader that parses every
// frame's JSON: both stay and get every message and every key's value.
// The tight reader takes nothing until the parser has had the whole burst
// (for at most 2 s, inside the write timeout), as a reader paused for a
// moment (a collection, a busy tab, a loaded machine) would: the send
// queue holds one sender's whole burst, not only what a reader left
// behind. With a 1 MiB send queue and an unbounded
// signal tick, both were closed 4001; with a queue sized for the publishes
// and one tick of signals, the paused reader was (CI, under load: after 76
// messages).
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
			var tightKeys atomic.Int64
			tightErr := make(chan error, 1)
			resume := make(chan struct{}) // closed when the tight reader reads on
			var resumeOnce sync.Once
			release := func() { resumeOnce.Do(func() { close(resume) }) }
			t.Cleanup(release)
			go func() {
				seen := make(map[string]bool)
				for {
					_, data, err := tight.Read(context.Background())
					if err != nil {
						tightErr <- err
						return
					}
					// Counted by a byte search, not parsed: a tight loop.
					tightMsgs.Add(int64(strings.Count(string(data), `"message":`)))
					for _, m := range signalKey.FindAllSubmatch(data, -1) {
						if !seen[string(m[1])] {
							seen[string(m[1])] = true
							tightKeys.Add(1)
						}
					}
					if tightJoined.Load() == 0 && strings.Contains(string(data), `"joined":`) {
						tightJoined.Store(1)
						<-resume // paused through the burst
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
			var parsed, parsedKeys atomic.Int64
			parserDone := make(chan struct{})
			go func() {
				defer close(parserDone)
				seenKeys := make(map[string]bool)
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
						if s := f.GetSignal(); s != nil && s.GetKey() != "" && !seenKeys[s.GetKey()] {
							seenKeys[s.GetKey()] = true
							parsedKeys.Add(1)
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
			const pause = 2 * time.Second // from the burst's first frame
			paused := time.After(pause)
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
			// The tight reader reads nothing until the parser has the whole
			// burst, so that the tight reader's queue has been offered all
			// of it too, or for at most pause, well inside the edge's write
			// timeout (5 s): a reader stuck longer than that is cut, and
			// should be. On a loaded machine the pause may end first; the
			// queue still holds what came meanwhile.
			deadline := time.After(30 * time.Second)
		wait:
			for parsed.Load() < burst || parsedKeys.Load() < signals {
				select {
				case err := <-tightErr:
					t.Fatalf("the paused tight-loop reader was closed: %v", err)
				case <-parserDone:
					t.Fatalf("the parsing reader was closed after %d messages and %d keys: %v", parsed.Load(), parsedKeys.Load(), parser.Err())
				case <-paused:
					t.Logf("the tight reader reads on after %v, the parser at %d messages and %d keys", pause, parsed.Load(), parsedKeys.Load())
					break wait
				case <-time.After(10 * time.Millisecond):
				}
			}
			release()
			for parsed.Load() < burst || parsedKeys.Load() < signals || tightMsgs.Load() < burst || tightKeys.Load() < signals {
				select {
				case <-parserDone:
					t.Fatalf("the parsing reader was closed after %d messages and %d keys: %v", parsed.Load(), parsedKeys.Load(), parser.Err())
				case err := <-tightErr:
					t.Fatalf("the tight-loop reader was closed after %d messages and %d keys: %v", tightMsgs.Load(), tightKeys.Load(), err)
				case <-deadline:
					t.Fatalf("after 30 s: tight reader %d messages of %d, %d keys of %d; parser %d messages, %d keys", tightMsgs.Load(), burst, tightKeys.Load(), signals, parsed.Load(), parsedKeys.Load())
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	}
}

// signalKey finds a signal's key in a JSON frame by a byte search.
var signalKey = regexp.MustCompile(`"key":"(k[0-9]+)"`)
