package integration_test

import (
	"errors"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// TestSentinelFailover: a Sentinel failover under a publisher at 200
// msgs/s, with members resuming right after the master's kill. Without
// replica wait every member gets a reset into a new epoch (the promoted
// replica may lack acknowledged messages): with the replica in sync every
// acknowledged message still reached every member; with it made to lag
// (paused while the master acknowledges) acknowledged messages are lost,
// each delivered or covered by the reset. With --redis-replicas 1 there
// is no reset and nothing acknowledged is lost. In every case no seq
// names two messages in one epoch.
func TestSentinelFailover(t *testing.T) {
	for _, tt := range []struct {
		name     string
		replicas int  // replica servers
		wait     int  // --redis-replicas
		lag      bool // the replica misses the last acknowledged writes
	}{
		{"async-in-sync-replica", 1, 0, false},
		{"async-lagging-replica", 1, 0, true},
		{"replica-wait", 2, 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) { testSentinelFailover(t, tt.replicas, tt.wait, tt.lag) })
	}
}

func testSentinelFailover(t *testing.T, replicas, wait int, lag bool) {
	sn := redistest.StartSentinel(t, replicas)
	d := start(t, "serve", nil, func(o *server.Options) {
		o.RedisURL, o.RedisPrefix = sn.URL(), redistest.Prefix(t)
		o.RedisReplicas, o.RedisReplicaTimeout = wait, time.Second
	})
	run := failoverRun{deps: []*deployment{d}, rooms: []string{"ha"}, members: 4, resumers: 2,
		noLoss: !lag, noResets: wait > 0}
	run.fail = func() time.Time {
		if lag {
			// The replica misses what the master acknowledges from now on.
			rep := sn.Replica(0)
			rep.Pause()
			sn.DropReplicaLinks()
			time.Sleep(300 * time.Millisecond)
			go func() {
				time.Sleep(300 * time.Millisecond)
				rep.Resume()
			}()
		}
		sn.Failover()
		return sn.KilledAt()
	}
	if wait == 0 {
		run.resetRooms = run.rooms
	}
	runFailover(t, run)
}

// TestSessionLostInFailover: a session created while the replica lagged
// exists only on the old master; after the failover its resume is closed
// with 4102 (connect again without resume), never a silent fresh
// session, while a session the replica had resumes.
func TestSessionLostInFailover(t *testing.T) {
	sn := redistest.StartSentinel(t, 1)
	d := start(t, "serve", nil, func(o *server.Options) { o.RedisURL, o.RedisPrefix = sn.URL(), redistest.Prefix(t) })
	kept := dial(t, d, "kept", protocol.JSON)
	kw := kept.Welcome()
	before := attached(t, d)
	kept.CloseNow()
	waitDetached(t, d, before) // the detach's writes, if any
	sn.WaitReplicated()        // and the replica has them all
	rep := sn.Replica(0)
	rep.Pause()
	sn.DropReplicaLinks()
	lost := dial(t, d, "lost", protocol.JSON)
	lw := lost.Welcome()
	lost.CloseNow()
	go func() {
		time.Sleep(300 * time.Millisecond)
		rep.Resume()
	}()
	sn.Failover()

	// resume retries while the store is unavailable (4103).
	resume := func(user string, w *corralv1.Welcome) (*client.Conn, error) {
		var c *client.Conn
		var err error
		eventually.WithinEvery(30*time.Second, 200*time.Millisecond, func() bool {
			c, err = resumeConn(t, d.wsURL, user, w, "", 0, "")
			var ce *client.CloseError
			return !errors.As(err, &ce) || ce.Code != websocket.StatusCode(corralv1.Code_CODE_UNAVAILABLE)
		})
		return c, err
	}
	c, err := resume("lost", lw)
	if err == nil {
		t.Fatalf("a session the new master never had resumed: %v", c.Welcome())
	}
	var ce *client.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusCode(corralv1.Code_CODE_SESSION_EXPIRED) {
		t.Fatalf("resume of a session the new master never had: %v, want close %d", err, corralv1.Code_CODE_SESSION_EXPIRED)
	}
	c, err = resume("kept", kw)
	if err != nil || !c.Welcome().GetResumed() {
		t.Fatalf("resume of a replicated session: %v", err)
	}
}
