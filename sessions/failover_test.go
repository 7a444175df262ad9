package sessions_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/internal/redisurl"
	"github.com/corral-rt/corral/sessions"
)

// TestRedisSessionLostInFailover: a session the old master never passed
// to the promoted replica is unknown afterwards: Resume fails with
// ErrNotFound (the client's 4102), never a silent fresh session; a session
// the replica had resumes.
func TestRedisSessionLostInFailover(t *testing.T) {
	sn := redistest.StartSentinel(t, 1)
	o, err := redisurl.Options(sn.URL())
	if err != nil {
		t.Fatal(err)
	}
	o.DisableCache = true
	client, err := rueidis.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	s := sessions.NewRedis(client, sessions.Options{Prefix: "fo"})
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	kept, err := s.Create(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Do(ctx, client.B().Wait().Numreplicas(1).Timeout(5000).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	rep := sn.Replica(0)
	rep.Pause()
	sn.DropReplicaLinks()
	lost, err := s.Create(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		rep.Resume()
	}()
	sn.Failover()

	dl, _ := ctx.Deadline()
	if !eventually.Within(time.Until(dl), func() bool {
		_, err = s.Resume(ctx, lost.ID, lost.Token, "u", sessions.Attempt{})
		return err == nil || errors.Is(err, sessions.ErrNotFound)
	}) {
		t.Fatalf("resume after the failover: %v", err)
	}
	if err == nil {
		t.Fatal("a session the new master never had resumed")
	}
	if _, err := s.Resume(ctx, kept.ID, kept.Token, "u", sessions.Attempt{}); err != nil {
		t.Fatalf("a replicated session did not resume: %v", err)
	}
}
