package integration_test

import (
	"context"
	"fmt"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/internal/readytest"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
	"github.com/redis/rueidis"
)

// TestEdgeFailsOverToAnotherCore: an edge linked to two cores on one Redis
// loses one core for good; the sessions it carried move to the other core
// and their clients see no disconnect and miss nothing.
func TestEdgeFailsOverToAnotherCore(t *testing.T) {
	redisURL := "redis://" + redistest.Start(t)
	prefix := redistest.Prefix(t)
	var cores []*server.Node
	var urls string
	for i := range 2 {
		n, err := server.Start(server.Options{Mode: server.CoreOnly, Node: config.Node{Addr: "127.0.0.1:0", RedisURL: redisURL, RedisPrefix: prefix}, Logger: quietLogger(),
			APIInsecure: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close(context.Background()) })
		cores = append(cores, n)
		if i > 0 {
			urls += ","
		}
		urls += "http://" + n.Addr()
	}
	edgeNode, err := server.Start(server.Options{
		Mode: server.EdgeOnly, Node: config.Node{Addr: "127.0.0.1:0", CoreURL: urls}, Auth: auth.Dev{}, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { edgeNode.Close(context.Background()) })
	readytest.Wait(t, "http://"+edgeNode.Addr()+"/readyz")
	d := &deployment{wsURL: "ws://" + edgeNode.Addr() + "/ws"}
	ctx := testCtx(t)

	const room, members, perPhase = "lobby", 8, 20
	chk := checker.New()
	var conns []*client.Conn
	for i := range members {
		c := dial(t, d, fmt.Sprintf("u%d", i), protocol.Encoding(i%2))
		if _, err := c.Join(ctx, room, 0, ""); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// The publisher goes through a core's API, not a session: it is not
	// affected by the failover.
	api := apiOver(&deployment{apiURL: "http://" + cores[1].Addr()}, "connect", "")
	n := 0
	publish := func(count int) {
		for range count {
			res, err := api.Publish(ctx, &corralv1.PublishRequest{Room: room, Payload: payload(n)})
			if err != nil {
				t.Fatal(err)
			}
			chk.Acked(room, res.GetSeq(), "") // API messages carry no id
			n++
		}
	}
	publish(perPhase)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	cores[0].Close(cctx) // for good
	cancel()
	publish(perPhase)
	for i, c := range conns {
		name := fmt.Sprintf("u%d", i)
		for got := 0; got < 2*perPhase; got++ {
			f := nextFrame(t, c, isMsg)
			chk.Received(name, room, f.GetMessage().GetSeq(), f.GetMessage().GetId())
		}
		chk.Member(name, room, 0, 2*perPhase)
		select {
		case <-c.Done():
			t.Fatalf("%s was disconnected: %v", name, c.Err())
		default:
		}
	}
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestCrossCoreLossDetection: two cores on one Redis, and a failover that
// loses the newest messages of a room, simulated deterministically on a
// single Redis: core A appends and delivers seqs 1-10; then the room's
// keys are made what a lagging replica promoted to master holds (the
// stream and seq key end at 7, and the here key, which only the master
// that wrote it has, is gone). Core B, which never saw 8-10, appends four
// messages: without the failover check they would get seqs 8-11 in the
// same epoch, A would drop 8-10 as duplicates of what it delivered and
// hand seq 11 to its member right after the old 10 — a silent gap and
// three reused seqs. The member must get a reset before any of B's
// messages.
func TestCrossCoreLossDetection(t *testing.T) {
	// Always a private server (not REDIS_URL's): the test rewrites keys.
	addr := redistest.StartProcess(t, 0).Addr()
	prefix := redistest.Prefix(t)
	tune := func(o *server.Options) { o.RedisURL, o.RedisPrefix = "redis://"+addr, prefix }
	a, b := start(t, "serve", nil, tune), start(t, "serve", nil, tune)
	ctx := testCtx(t)
	const room = "lossy"

	member := dial(t, a, "member", protocol.JSON)
	if _, err := member.Join(ctx, room, 0, ""); err != nil {
		t.Fatal(err)
	}
	pubA := dial(t, a, "pubA", protocol.JSON)
	if _, err := pubA.Join(ctx, room, 0, ""); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := pubA.Publish(ctx, room, fmt.Sprintf("a%d", i), payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	for got := 0; got < 10; {
		if m := nextFrame(t, member, isMsg).GetMessage(); m.GetSeq() != uint64(got+1) {
			t.Fatalf("member got %v, want seq %d", m, got+1)
		}
		got++
	}

	// The failover's loss, as the promoted replica holds the room.
	rc := redistest.Client(t, addr)
	base := prefix + ":{" + room + "}:"
	kept, err := rc.Do(ctx, rc.B().Xrange().Key(base+"log").Start("-").End("7-0").Build()).AsXRange()
	if err != nil {
		t.Fatal(err)
	}
	cmds := rueidis.Commands{rc.B().Set().Key(base + "seq").Value("7").Build(), rc.B().Del().Key(base+"log", base+"here").Build()}
	for _, e := range kept {
		cmds = append(cmds, rc.B().Xadd().Key(base+"log").Id(e.ID).FieldValue().FieldValue("m", e.FieldValues["m"]).Build())
	}
	for _, r := range rc.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			t.Fatal(err)
		}
	}

	pubB := dial(t, b, "pubB", protocol.JSON)
	if _, err := pubB.Join(ctx, room, 0, ""); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		res, err := pubB.Publish(ctx, room, fmt.Sprintf("b%d", i), payload(i))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("B appended b%d as seq %d", i, res.GetSeq())
	}
	for {
		f := nextFrame(t, member, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil || f.GetReset_() != nil })
		if r := f.GetReset_(); r != nil {
			t.Logf("member reset to seq %d of a new epoch", r.GetSeq())
			break
		}
		t.Fatalf("member got %v after seq 10 with no reset: a seq reused for another message, silently", f.GetMessage())
	}
}

// TestEventsAfterLostTail: a failover to a replica that lacked the event
// log's newest entries (simulated on one Redis: the stream rewritten to
// hold only its first 7 events, as the promoted replica holds it). A
// backend following the log live, and one resuming after the position
// it had reached, both get out_of_range once new events are appended,
// never the new events under numbers they already passed.
func TestEventsAfterLostTail(t *testing.T) {
	// Always a private server (not REDIS_URL's): the test rewrites keys.
	addr := redistest.StartProcess(t, 0).Addr()
	prefix := redistest.Prefix(t)
	d := start(t, "serve", nil, func(o *server.Options) { o.RedisURL, o.RedisPrefix = "redis://"+addr, prefix })
	ctx := testCtx(t)
	publish := func(n int) {
		for i := range n {
			if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "ev", Payload: payload(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	live := follow(t, d.api, &corralv1.EventsRequest{})
	pos := live.next(t).GetPosition()
	publish(10)
	for seen := 0; seen < 10; {
		res := live.next(t)
		seen += len(res.GetEvents())
		pos = res.GetPosition()
	}

	rc := redistest.Client(t, addr)
	key := prefix + ":events"
	kept, err := rc.Do(ctx, rc.B().Xrange().Key(key).Start("-").End("+").Count(7).Build()).AsXRange()
	if err != nil || len(kept) != 7 {
		t.Fatalf("the log's first 7 events: %d, %v", len(kept), err)
	}
	cmds := rueidis.Commands{rc.B().Del().Key(key).Build()}
	for _, e := range kept {
		// n and x first: the scripts read them by position.
		fv := rc.B().Xadd().Key(key).Id(e.ID).FieldValue().FieldValue("n", e.FieldValues["n"]).FieldValue("x", e.FieldValues["x"])
		for f, v := range e.FieldValues {
			if f != "n" && f != "x" {
				fv = fv.FieldValue(f, v)
			}
		}
		cmds = append(cmds, fv.Build())
	}
	for _, r := range rc.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			t.Fatal(err)
		}
	}
	publish(5) // numbered 8-12 on the "new master"

	if err := live.firstError(t); codeOf(err) != connect.CodeOutOfRange {
		t.Errorf("live follower: %v, want out_of_range", err)
	}
	if err := follow(t, d.api, &corralv1.EventsRequest{After: pos}).firstError(t); codeOf(err) != connect.CodeOutOfRange {
		t.Errorf("resume after the lost position: %v, want out_of_range", err)
	}
}

// TestStandaloneRedisRestart: a standalone Redis without persistence
// killed and restarted empty under a publisher at 200 msgs/s, members
// resuming right after: every room starts a new epoch and every member
// gets a reset; the resumers' sessions are gone (4102) and they join
// afresh from their position; the checker finds no silent gap.
func TestStandaloneRedisRestart(t *testing.T) {
	srv := redistest.StartProcess(t, 0)
	d := start(t, "serve", nil, func(o *server.Options) { o.RedisURL, o.RedisPrefix = "redis://"+srv.Addr(), redistest.Prefix(t) })
	run := failoverRun{deps: []*deployment{d}, rooms: []string{"solo"}, members: 4, resumers: 2, resetRooms: []string{"solo"}}
	run.fail = func() time.Time {
		killed := time.Now()
		srv.Restart()
		return killed
	}
	runFailover(t, run)
}
