package integration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/apiclient"
	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/config"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/readytest"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
	"github.com/corral-rt/corral/state"
)

// TestKeyedStateReattach: in split mode on Redis the core restarts while
// members of a canvas room stay connected to the edge; 300 changes are
// written while it is down (more than a core's mirror keeps, fewer than
// the store does). The edge re-attaches the sessions with each room's
// keyed-state position as the frames passing through stated it, so the
// members get the changes they missed, not a snapshot; every member's
// state, deltas applied (checker.Values), equals the store's.
func TestKeyedStateReattach(t *testing.T) {
	_, classes := classFile(t, keyedClasses)
	redisAddr := redistest.Start(t)
	prefix := redistest.Prefix(t)
	coreOpts := server.Options{Mode: server.CoreOnly, Node: config.Node{Addr: "127.0.0.1:0", RedisURL: "redis://" + redisAddr, RedisPrefix: prefix},
		Logger: quietLogger(), APIKeys: []string{testAPIKey}}
	classes(&coreOpts)
	core1, err := server.Start(coreOpts)
	if err != nil {
		t.Fatal(err)
	}
	coreAddr := core1.Addr()
	edgeNode, err := server.Start(server.Options{
		Mode: server.EdgeOnly, Node: config.Node{Addr: "127.0.0.1:0", CoreURL: "http://" + coreAddr}, Auth: auth.Dev{}, Logger: quietLogger(),
		CoreAPIKey: testAPIKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { edgeNode.Close(context.Background()) })
	readytest.Wait(t, "http://"+edgeNode.Addr()+"/readyz")
	d := &deployment{wsURL: "ws://" + edgeNode.Addr() + "/ws", api: apiclient.New("http://"+coreAddr, testAPIKey, nil)}
	ctx := testCtx(t)

	const room = "canvas:reattach"
	var members []*stateMember
	for i := range 4 {
		c := dial(t, d, fmt.Sprintf("u%d", i), protocol.Encoding(i%2))
		m := followState(t, c, room, nil)
		if _, err := c.Join(ctx, room, 0, ""); err != nil {
			t.Fatal(err)
		}
		members = append(members, m)
	}
	full := map[string]map[uint64][]byte{}
	record := func(key string, version uint64, value []byte) {
		if full[key] == nil {
			full[key] = map[uint64][]byte{}
		}
		full[key][version] = value
	}
	shape := func(id, i int) []byte {
		return fmt.Appendf(nil, `{"id":%d,"x":%d,"label":"%s"}`, id, i, strings.Repeat("shape label ", 8))
	}
	viaAPI := func(n, from int) {
		for i := range n {
			key, v := fmt.Sprintf("obj%d", i%5), shape(i%5, from+i)
			var res *corralv1.SetStateResponse
			eventually.WithinEvery(10*time.Second, 20*time.Millisecond, func() bool {
				res, err = d.api.SetState(ctx, &corralv1.SetStateRequest{Room: room, Key: key, Value: v})
				return err == nil
			})
			if err != nil {
				t.Fatal(err)
			}
			record(key, res.GetVersion(), v)
		}
	}
	viaAPI(20, 0)
	waitConverged(t, d, room, members...)

	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	core1.Close(cctx)
	cancel()
	// Written while the core is down, straight to the store.
	st := state.NewRedis(redistest.Client(t, redisAddr), state.RedisOptions{Prefix: prefix})
	for i := range 300 {
		key, v := fmt.Sprintf("obj%d", i%5), shape(i%5, 100+i)
		res, err := st.Set(ctx, room, state.Set{Key: key, Value: v})
		if err != nil {
			t.Fatal(err)
		}
		record(key, res.Version, v)
	}
	var core2 *server.Node
	eventually.WithinEvery(10*time.Second, 50*time.Millisecond, func() bool {
		opts := coreOpts
		opts.Addr = coreAddr
		core2, err = server.Start(opts)
		return err == nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { core2.Close(context.Background()) })
	viaAPI(20, 1000)
	waitConverged(t, d, room, members...)

	for i, m := range members {
		select {
		case <-m.c.Done():
			t.Fatalf("u%d was disconnected: %v", i, m.c.Err())
		default:
		}
		m.mu.Lock()
		if m.snapshots != 0 || m.changes < 340 {
			t.Errorf("u%d through the reattach: %d snapshots, %d changes; want 0 and the 340 written", i, m.snapshots, m.changes)
		}
		for key, ups := range m.updates {
			if err := checker.Values(ups, full[key]); err != nil {
				t.Errorf("u%d, key %s: %v", i, key, err)
			}
		}
		m.mu.Unlock()
	}
}
