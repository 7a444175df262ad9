package core

import (
	"context"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/roomclass"
	"testing"

	"github.com/corral-rt/corral/core/linkserver"
	"github.com/corral-rt/corral/events"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/linktest"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Unit tests of the core's concepts, with the in-memory stores and a fake
// link whose queue the test reads instead of a stream.

// fakeLink is a link with no stream: what the core enqueues stays in its
// queue for the test to take.
func fakeLink(c *Core) *linkserver.Link {
	return linkserver.Unserved(c.linkOpts)
}

// frames, serverFrameOf and linkQueue: package linktest's.
var (
	frames        = linktest.Frames
	serverFrameOf = linktest.ServerFrame
)

type linkQueue = linktest.Queue

func newTestCore(t *testing.T, cfg Config) *Core {
	t.Helper()
	c := New(cfg)
	t.Cleanup(func() { c.Close() })
	return c
}

// oneClass is a class table with one class, for the rooms pattern
// matches: the default class changed by mod.
func oneClass(pattern string, mod func(*roomclass.Class)) *roomclass.Live {
	c := roomclass.Default()
	c.Name, c.Match = "test", roomclass.Patterns{pattern}
	mod(&c)
	return roomclass.NewLive(roomclass.NewTable(roomclass.Default(), []roomclass.Class{c}))
}

func TestResumeReplay(t *testing.T) {
	ctx := context.Background()
	c := newTestCore(t, Config{})
	l := fakeLink(c)
	id := &corralv1.Identity{UserId: "u", Join: []string{"*"}, Publish: []string{"*"}}
	s := c.life.Attach(ctx, l, 1, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{}})
	if s == nil {
		t.Fatal("attach refused")
	}
	welcome := frames(t, l, 1)[0].GetWelcome()
	c.handleClient(ctx, s, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: "r"}}})
	joined := frames(t, l, 1)[0].GetJoined()
	if joined == nil {
		t.Fatal("no Joined")
	}
	publish := func(n int) {
		for range n {
			if _, err := apiPublish(ctx, c, "r", []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(3)
	if got := frames(t, l, 3); got[2].GetMessage().GetSeq() != 3 {
		t.Fatalf("live: %v", got)
	}
	c.life.Detach(s, l, 1, false)
	publish(2) // missed while away: seqs 4 and 5

	s2 := c.life.Attach(ctx, l, 2, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{Resume: &corralv1.Resume{
		SessionId: welcome.GetSessionId(), ResumeToken: welcome.GetResumeToken(),
		Rooms: []*corralv1.RoomPosition{{Room: "r", Seq: 3, Epoch: joined.GetEpoch()}},
	}}})
	if s2 == nil {
		t.Fatal("resume refused")
	}
	got := frames(t, l, 4)
	if w := got[0].GetWelcome(); !w.GetResumed() || w.GetSessionId() != welcome.GetSessionId() {
		t.Fatalf("first frame %v, want a resumed Welcome", got[0])
	}
	if j := got[1].GetJoined(); j == nil || !j.GetReplay() || j.GetSeq() != 3 {
		t.Fatalf("second frame %v, want Joined at 3 with replay", got[1])
	}
	var seqs []uint64
	for _, f := range got[2].GetBatch().GetFrames() {
		seqs = append(seqs, f.GetMessage().GetSeq())
	}
	if len(seqs) != 2 || seqs[0] != 4 || seqs[1] != 5 {
		t.Fatalf("replayed %v, want [4 5]", seqs)
	}
	if e := got[3].GetReplayEnd(); e == nil || e.GetSeq() != 5 {
		t.Fatalf("fourth frame %v, want ReplayEnd at 5", got[3])
	}
	// Live again: the next message follows the replay.
	publish(1)
	if f := frames(t, l, 1)[0]; f.GetMessage().GetSeq() != 6 {
		t.Fatalf("after the replay %v, want seq 6", f)
	}
}

func TestDoorRefusals(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		cfg   Config
		join  []string // rooms joined first, all admitted
		frame *corralv1.ClientFrame
		code  corralv1.Code
	}{
		"bad name": {
			frame: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: "bad\x00name"}}},
			code:  corralv1.Code_CODE_INVALID_ARGUMENT,
		},
		"join not granted": {
			frame: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: "secret"}}},
			code:  corralv1.Code_CODE_FORBIDDEN,
		},
		"too many rooms": {
			cfg:   Config{Core: config.Core{MaxRoomsPerConn: 1}},
			join:  []string{"open:a"},
			frame: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: "open:b"}}},
			code:  corralv1.Code_CODE_LIMIT_EXCEEDED,
		},
		"read-only publish": {
			cfg:   Config{Classes: oneClass("open:news", func(c *roomclass.Class) { c.Publish, c.Signal = roomclass.None, roomclass.None })},
			join:  []string{"open:news"},
			frame: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "open:news", Payload: []byte("x")}}},
			code:  corralv1.Code_CODE_FORBIDDEN,
		},
		"read-only signal": {
			cfg:   Config{Classes: oneClass("open:news", func(c *roomclass.Class) { c.Signal = roomclass.None })},
			join:  []string{"open:news"},
			frame: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{Room: "open:news", Key: "k", Payload: []byte("x")}}},
			code:  corralv1.Code_CODE_FORBIDDEN,
		},
		"class max payload": {
			cfg:   Config{Classes: oneClass("open:news", func(c *roomclass.Class) { c.MaxPayload = 2 })},
			join:  []string{"open:news"},
			frame: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "open:news", Payload: []byte("xyz")}}},
			code:  corralv1.Code_CODE_TOO_LARGE,
		},
		"publish not granted": {
			join:  []string{"open:a"},
			frame: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "open:a", Payload: []byte("x")}}},
			code:  corralv1.Code_CODE_FORBIDDEN,
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := newTestCore(t, tc.cfg)
			l := fakeLink(c)
			id := &corralv1.Identity{UserId: "u", Join: []string{"open:*"}, Publish: []string{"open:news"}}
			s := c.life.Attach(ctx, l, 1, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{}})
			frames(t, l, 1) // Welcome
			for _, room := range tc.join {
				c.handleClient(ctx, s, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: room}}})
				if j := frames(t, l, 1)[0].GetJoined(); j == nil {
					t.Fatalf("join %s refused", room)
				}
			}
			if name == "publish not granted" {
				id.Publish = nil
			}
			c.handleClient(ctx, s, tc.frame)
			f := frames(t, l, 1)[0]
			if f.GetError().GetCode() != tc.code {
				t.Fatalf("got %v, want an Error with %v", f, tc.code)
			}
			if s.Room("open:b") != nil || s.Room("secret") != nil {
				t.Fatal("a refused room was joined")
			}
		})
	}
}

// logSource is a history store's side that commits message events to a
// log (core/eventlog).
type logSource struct{ log events.Log }

func (l logSource) Events() events.Log { return l.log }

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
