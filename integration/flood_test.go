package integration_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// sample returns the value of a sample in a metrics text (the full
// series name with its labels, e.g. `x{reason="y"}`), 0 if absent.
func sample(t *testing.T, text, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// floodKind is one client frame kind: how to build the i-th frame of a
// flood, the edge bucket that bounds it, and its refusal reason.
type floodKind struct {
	frame  func(i int) *corralv1.ClientFrame // nil: raw
	raw    []byte
	limit  func(o *server.Options, rate float64, burst int)
	reason string
}

var floodKinds = map[string]floodKind{
	"unknown": {
		nil, []byte(`{"fromTheFuture":{}}`),
		func(o *server.Options, r float64, b int) { o.Edge.MiscRate, o.Edge.MiscBurst = r, b }, "rate_misc",
	},
	"hello": {
		func(int) *corralv1.ClientFrame {
			return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{Token: "flood"}}}
		}, nil,
		func(o *server.Options, r float64, b int) { o.Edge.MiscRate, o.Edge.MiscBurst = r, b }, "rate_misc",
	},
	"join": {
		func(i int) *corralv1.ClientFrame {
			return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: fmt.Sprint("j", i)}}}
		}, nil,
		func(o *server.Options, r float64, b int) { o.Edge.ControlRate, o.Edge.ControlBurst = r, b }, "rate_control",
	},
	"leave": {
		func(i int) *corralv1.ClientFrame {
			return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Leave{Leave: &corralv1.Leave{Room: fmt.Sprint("j", i)}}}
		}, nil,
		func(o *server.Options, r float64, b int) { o.Edge.ControlRate, o.Edge.ControlBurst = r, b }, "rate_control",
	},
	"publish": {
		func(i int) *corralv1.ClientFrame {
			return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "r", Id: fmt.Sprint("f", i), Payload: payload(i)}}}
		}, nil,
		func(o *server.Options, r float64, b int) { o.Edge.MessageRate, o.Edge.MessageBurst = r, b }, "rate_messages",
	},
	"signal": {
		func(i int) *corralv1.ClientFrame {
			return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{Room: "r", Key: "k", Payload: payload(i)}}}
		}, nil,
		func(o *server.Options, r float64, b int) { o.Edge.SignalRate, o.Edge.SignalBurst = r, b }, "rate_signals",
	},
	"ack": {
		func(i int) *corralv1.ClientFrame {
			return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ack{Ack: &corralv1.Ack{Room: "r", Seq: uint64(i)}}}
		}, nil,
		func(o *server.Options, r float64, b int) { o.Edge.AckRate, o.Edge.AckBurst = r, b }, "rate_acks",
	},
	"ping": {
		func(i int) *corralv1.ClientFrame {
			return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Id: uint64(i)}}}
		}, nil,
		func(o *server.Options, r float64, b int) { o.Edge.MiscRate, o.Edge.MiscBurst = r, b }, "rate_misc",
	},
	"setPresence": {
		func(i int) *corralv1.ClientFrame {
			return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_SetPresence{SetPresence: &corralv1.SetPresence{Room: "r", State: payload(i)}}}
		}, nil,
		func(o *server.Options, r float64, b int) { o.Edge.PresenceRate, o.Edge.PresenceBurst = r, b }, "rate_presence",
	},
	"call": {
		func(i int) *corralv1.ClientFrame {
			return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Call{Call: &corralv1.Call{Id: uint64(i), Method: "m", Payload: payload(i)}}}
		}, nil,
		func(o *server.Options, r float64, b int) { o.Edge.CallRate, o.Edge.CallBurst = r, b }, "rate_calls",
	},
	"presenceQuery": {
		func(i int) *corralv1.ClientFrame {
			return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_PresenceQuery{PresenceQuery: &corralv1.PresenceQuery{Room: "r"}}}
		}, nil,
		func(o *server.Options, r float64, b int) { o.Edge.QueryRate, o.Edge.QueryBurst = r, b }, "rate_queries",
	},
}

// TestFloodEachFrameKind: a client in a room with presence floods one kind
// of frame. The edge passes on only its bucket's burst (every other frame
// is refused and counted by the kind's reason), the core never holds more
// than that for the connection, and a bystander in the room receives a
// third client's messages, all of them, in order.
func TestFloodEachFrameKind(t *testing.T) {
	const burst, flood, messages = 5, 300, 20
	for _, mode := range []string{"serve", "redis"} {
		for name, k := range floodKinds {
			t.Run(mode+"/"+name, func(t *testing.T) {
				d := start(t, mode, nil, func(o *server.Options) {
					k.limit(o, 0.001, burst) // next to no refill
					o.Edge.RateStrikes = -1
				})
				ctx := testCtx(t)
				flooder := dial(t, d, "flood", protocol.JSON)
				bystander := dial(t, d, "bystander", protocol.Proto)
				if _, err := flooder.JoinPresence(ctx, "r", []byte(`"on"`)); err != nil {
					t.Fatal(err)
				}
				if _, err := bystander.Join(ctx, "r", 0, ""); err != nil {
					t.Fatal(err)
				}
				// The third client is a service (the internal API): the
				// edge's limits, set low here, are not for it.
				for i := range flood {
					var err error
					if k.frame == nil {
						err = flooder.SendRaw(ctx, k.raw)
					} else {
						err = flooder.Send(ctx, k.frame(i))
					}
					if err != nil {
						t.Fatalf("flood frame %d: %v", i, err)
					}
					if i%(flood/messages) == 0 {
						if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "r", Payload: []byte(fmt.Sprintf(`"m%d"`, i/(flood/messages)))}); err != nil {
							t.Fatal(err)
						}
					}
				}
				for i := range messages {
					want := fmt.Sprintf(`"m%d"`, i)
					f := nextFrame(t, bystander, func(f *corralv1.ServerFrame) bool {
						return strings.HasPrefix(string(f.GetMessage().GetPayload()), `"m`)
					})
					if got := string(f.GetMessage().GetPayload()); got != want {
						t.Fatalf("bystander got %s, want %s", got, want)
					}
				}
				// The flooder's last frame is refused too: wait for its
				// answer, so every refusal is counted.
				last := fmt.Sprint("f", flood-1)
				nextFrame(t, flooder, func(f *corralv1.ServerFrame) bool {
					e := f.GetError()
					if r := f.GetCallResult(); r != nil {
						e = r.GetError() // a call's refusal is its callResult
					}
					return e.GetCode() == corralv1.Code_CODE_RATE_LIMITED && (name != "publish" || e.GetRef() == last)
				})
				series := `corral_edge_refused_total{reason="` + k.reason + `"}`
				var n float64
				// The flooder's bucket passed at most its burst (less the
				// join, for joins and leaves).
				if !eventually.Within(10*time.Second, func() bool {
					n = sample(t, scrape(t, edgeBase(d)), series)
					return n >= flood-burst
				}) {
					t.Fatalf("%s = %v, want >= %d: the edge passed on more than the burst", series, n, flood-burst)
				}
				if b := sample(t, scrape(t, coreBase(d)), "corral_core_conn_backlog_frames"); b > burst {
					t.Fatalf("core backlog %v frames", b)
				}
			})
		}
	}
}

// TestFloodBacklogDetach: with the edge's limits lifted and the store
// stalled (Redis paused for writes), a connection flooding publishes fills
// its core work queue: past --conn-backlog-frames the core refuses
// (conn_backlog) and closes it with 4105 BACKLOG_FULL, and its session is
// released while the store is still stalled (its detach does not wait for
// the backlog or the store call in flight). Once the store is back, the
// bystander receives every message of the room in order.
func TestFloodBacklogDetach(t *testing.T) {
	const bound = 32
	redis := redistest.StartProcess(t, 0)
	d := start(t, "redis", nil, func(o *server.Options) {
		o.RedisURL = "redis://" + redis.Addr()
		o.Core.ConnQueueFrames = bound
	})
	ctx := testCtx(t)
	flooder := dial(t, d, "flood", protocol.JSON)
	bystander := dial(t, d, "bystander", protocol.Proto)
	speaker := dial(t, d, "speaker", protocol.JSON)
	for _, c := range []*client.Conn{flooder, bystander, speaker} {
		if _, err := c.Join(ctx, "r", 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if _, err := speaker.Publish(ctx, "r", fmt.Sprint("m", i), payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	rc := redistest.Client(t, redis.Addr())
	if err := rc.Do(ctx, rc.B().ClientPause().Timeout(30000).Write().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	unpaused := false
	unpause := func() {
		if !unpaused {
			unpaused = true
			if err := rc.Do(context.Background(), rc.B().ClientUnpause().Build()).Error(); err != nil {
				t.Error(err)
			}
		}
	}
	defer unpause()
	for i := range 10 * bound {
		if err := flooder.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{
			Room: "r", Id: fmt.Sprint("f", i), Payload: payload(i),
		}}}); err != nil {
			break // closed
		}
	}
	ce := waitClosed(t, flooder)
	if int(ce.Code) != int(corralv1.Code_CODE_BACKLOG_FULL) || ce.Hint.GetDelayMs() == 0 {
		t.Fatalf("flooder closed with %v (hint %v), want 4105 with a delay", ce, ce.Hint)
	}
	if protocol.AdviceOf(corralv1.Code_CODE_BACKLOG_FULL) != protocol.AdviceRetry {
		t.Fatal("4105 should advise retry")
	}
	// Still paused: the flooder's session is released all the same.
	var m string
	if !eventually.Within(10*time.Second, func() bool {
		m = scrape(t, coreBase(d))
		return sample(t, m, "corral_core_sessions_attached") == 2 && sample(t, m, "corral_core_conn_backlog_frames") == 0
	}) {
		t.Fatalf("flooder's session still attached or its backlog kept while the store is stalled:\nsessions %v, backlog %v",
			sample(t, m, "corral_core_sessions_attached"), sample(t, m, "corral_core_conn_backlog_frames"))
	}
	wantCounted(t, scrape(t, coreBase(d)), "corral_core_refused_total", "conn_backlog")
	unpause()
	for i := 5; i < 10; i++ {
		if _, err := speaker.Publish(ctx, "r", fmt.Sprint("m", i), payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for len(got) < 10 {
		f := nextFrame(t, bystander, func(f *corralv1.ServerFrame) bool { return strings.HasPrefix(f.GetMessage().GetId(), "m") })
		got = append(got, f.GetMessage().GetId())
	}
	if want := "[m0 m1 m2 m3 m4 m5 m6 m7 m8 m9]"; fmt.Sprint(got) != want {
		t.Fatalf("bystander got %v, want %v", got, want)
	}
}
