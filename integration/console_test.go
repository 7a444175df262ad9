package integration_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connectinprocess"
	"github.com/corral-rt/corral/apiclient"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/server"
)

// The internal API's methods the admin console added (docs/CONSOLE.md):
// Connections, Config and Reload, and every_core on Info, Rooms and
// Connections.

// TestConnections: Connections lists a user's or a session's connections
// on the core, with their rooms and edge, one page at a time; a missing
// target is invalid_argument.
func TestConnections(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			var sessions []string
			before := time.Now()
			for i := range 3 {
				c := dial(t, d, "dana", protocol.JSON)
				if _, err := c.Join(ctx, fmt.Sprintf("room:%d", i), 0, ""); err != nil {
					t.Fatal(err)
				}
				if _, err := c.Join(ctx, "room:all", 0, ""); err != nil {
					t.Fatal(err)
				}
				sessions = append(sessions, c.Welcome().GetSessionId())
			}
			dial(t, d, "eve", protocol.Proto)
			slices.Sort(sessions)

			var got []*corralv1.ConnectionInfo
			tok := ""
			for pages := 0; ; pages++ {
				if pages > 3 {
					t.Fatal("paging does not end")
				}
				res, err := d.api.Connections(ctx, &corralv1.ConnectionsRequest{Target: &corralv1.ConnectionsRequest_UserId{UserId: "dana"}, PageToken: tok, Limit: 2})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.GetConnections()) > 2 {
					t.Fatalf("page of %d, limit 2", len(res.GetConnections()))
				}
				got = append(got, res.GetConnections()...)
				if tok = res.GetNextPageToken(); tok == "" {
					break
				}
			}
			if len(got) != 3 {
				t.Fatalf("dana's connections: %v", got)
			}
			for i, c := range got {
				if c.GetSessionId() != sessions[i] || c.GetUserId() != "dana" || c.GetEdgeId() == "" ||
					c.GetProtocol() != protocol.SubprotocolJSON || c.GetAttachedMs() < before.UnixMilli() || c.GetAttachedMs() > time.Now().UnixMilli() {
					t.Fatalf("connection %d: %v, want session %s", i, c, sessions[i])
				}
				if rooms := strings.Join(c.GetRooms(), ","); !strings.HasPrefix(rooms, "room:") || !strings.Contains(rooms, "room:all") || len(c.GetRooms()) != 2 {
					t.Fatalf("connection %d rooms %q", i, rooms)
				}
			}
			one, err := d.api.Connections(ctx, &corralv1.ConnectionsRequest{Target: &corralv1.ConnectionsRequest_SessionId{SessionId: sessions[1]}})
			if err != nil || len(one.GetConnections()) != 1 || one.GetConnections()[0].GetSessionId() != sessions[1] {
				t.Fatalf("by session: %v %v", one, err)
			}
			none, err := d.api.Connections(ctx, &corralv1.ConnectionsRequest{Target: &corralv1.ConnectionsRequest_UserId{UserId: "nobody"}})
			if err != nil || len(none.GetConnections()) != 0 {
				t.Fatalf("nobody: %v %v", none, err)
			}
			for name, req := range map[string]*corralv1.ConnectionsRequest{
				"no target": {},
				"long id":   {Target: &corralv1.ConnectionsRequest_UserId{UserId: strings.Repeat("u", 300)}},
				"bad token": {Target: &corralv1.ConnectionsRequest_UserId{UserId: "dana"}, PageToken: "!"},
			} {
				if _, err := d.api.Connections(ctx, req); connect.CodeOf(err) != connect.CodeInvalidArgument {
					t.Fatalf("%s: %v, want invalid_argument", name, err)
				}
			}
		})
	}
}

// TestConfigReload: Config describes the classes in force, Reload puts a
// valid file in force and refuses an invalid one (a result, not a failed
// call) keeping the old; Config then reports the last reload. A node
// without a config file says so.
func TestConfigReload(t *testing.T) {
	table := func(version string, size int) *roomclass.Table {
		c := roomclass.Default()
		c.Name, c.Match, c.History.Size = "chat", roomclass.Patterns{"chat:*"}, size
		tb := roomclass.NewTable(roomclass.Default(), []roomclass.Class{c})
		tb.Version, tb.Hash = version, "hash-"+version
		return tb
	}
	var next atomic.Pointer[roomclass.Table] // nil: the file is invalid
	for _, mode := range []string{"serve", "split"} {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, func(o *server.Options) {
				o.Core.Classes = roomclass.NewLive(table("v1", 50))
				o.Reload = func() (*roomclass.Table, error) {
					if tb := next.Load(); tb != nil {
						return tb, nil
					}
					return nil, errors.New("corral.yaml:3: history.size: must be at least 1")
				}
			})
			ctx := testCtx(t)
			cfg, err := d.api.Config(ctx, &corralv1.ConfigRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.GetVersion() != "v1" || cfg.GetHash() != "hash-v1" || !cfg.GetReloadable() || cfg.GetLastReload() != nil || cfg.GetLoadedMs() == 0 {
				t.Fatalf("config: %v", cfg)
			}
			if cls := cfg.GetClasses(); len(cls) != 2 || cls[0].GetName() != "chat" || cls[1].GetName() != "default" ||
				!slices.Contains(cls[0].GetSettings(), "history.size: 50") || !slices.Equal(cls[0].GetRooms(), []string{"chat:*"}) {
				t.Fatalf("classes: %v", cls)
			}

			next.Store(table("v2", 70))
			res, err := d.api.Reload(ctx, &corralv1.ReloadRequest{})
			if err != nil || !res.GetReloaded() || res.GetVersion() != "v2" || res.GetError() != "" || res.GetAtMs() == 0 {
				t.Fatalf("reload: %v %v", res, err)
			}
			next.Store(nil)
			res, err = d.api.Reload(ctx, &corralv1.ReloadRequest{})
			if err != nil || res.GetReloaded() || res.GetVersion() != "v2" || !strings.Contains(res.GetError(), "history.size") {
				t.Fatalf("refused reload: %v %v", res, err)
			}
			cfg, err = d.api.Config(ctx, &corralv1.ConfigRequest{})
			if err != nil || cfg.GetVersion() != "v2" || cfg.GetLastReload().GetReloaded() || !slices.Contains(cfg.GetClasses()[0].GetSettings(), "history.size: 70") {
				t.Fatalf("config after a refused reload: %v %v", cfg, err)
			}
		})
	}
	t.Run("every core", func(t *testing.T) {
		// Two cores on one Redis, each with its own file: a reload with
		// every_core through core a reloads both.
		var files [2]atomic.Pointer[roomclass.Table]
		files[0].Store(table("v2", 70))
		files[1].Store(table("v2", 70))
		var started atomic.Int32
		a, b, _, _ := twoCores(t, func(o *server.Options) {
			i := started.Add(1) - 1
			o.Core.Classes = roomclass.NewLive(table("v1", 50))
			o.Reload = func() (*roomclass.Table, error) { return files[i].Load(), nil }
		})
		ctx := testCtx(t)
		apiA := apiclient.New("", "", &apiclient.Options{Transport: connectinprocess.New(a.APIServer())})
		apiB := apiclient.New("", "", &apiclient.Options{Transport: connectinprocess.New(b.APIServer())})
		var res *corralv1.ReloadResponse
		waitUntil(t, "the other core answers", func() bool {
			var err error
			res, err = apiA.Reload(ctx, &corralv1.ReloadRequest{EveryCore: true})
			if err != nil {
				t.Fatal(err)
			}
			return len(res.GetOthers()) == 1
		})
		if !res.GetReloaded() || res.GetVersion() != "v2" || !res.GetOthers()[0].GetReloaded() || res.GetOthers()[0].GetVersion() != "v2" || res.GetCoresMissing() != 0 {
			t.Fatalf("reload every core: %v", res)
		}
		cfg, err := apiB.Config(ctx, &corralv1.ConfigRequest{})
		if err != nil || cfg.GetVersion() != "v2" || !cfg.GetLastReload().GetReloaded() {
			t.Fatalf("core b after a's reload: %v %v", cfg, err)
		}
	})
	t.Run("no config file", func(t *testing.T) {
		d := start(t, "serve", nil, nil)
		ctx := testCtx(t)
		cfg, err := d.api.Config(ctx, &corralv1.ConfigRequest{})
		if err != nil || cfg.GetReloadable() {
			t.Fatalf("config: %v %v", cfg, err)
		}
		if _, err := d.api.Reload(ctx, &corralv1.ReloadRequest{}); connect.CodeOf(err) != connect.CodeFailedPrecondition {
			t.Fatalf("reload: %v, want failed_precondition", err)
		}
	})
}

// TestEveryCore: with two cores sharing Redis, Info, Rooms, Members and
// Connections with every_core answer for both: each core listed, a room
// with members on both counted once with its members summed, a user's
// connections on both listed, whichever core takes the call; Disconnect
// with every_core closes a user's connections on both.
func TestEveryCore(t *testing.T) {
	a, b, da, db := twoCores(t, nil)
	ctx := testCtx(t)
	apiA := apiclient.New("", "", &apiclient.Options{Transport: connectinprocess.New(a.APIServer())})
	apiB := apiclient.New("", "", &apiclient.Options{Transport: connectinprocess.New(b.APIServer())})
	onA := dial(t, da, "fay", protocol.JSON)
	onB := dial(t, db, "fay", protocol.Proto)
	other := dial(t, db, "gus", protocol.JSON)
	for _, j := range []struct {
		c    *client.Conn
		room string
	}{{onA, "shared"}, {onB, "shared"}, {other, "shared"}, {onA, "only-a"}, {other, "only-b"}} {
		if _, err := j.c.Join(ctx, j.room, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	for name, api := range map[string]corralv1connect.RoomServiceClient{"core a": apiA, "core b": apiB} {
		// The other core's subscriptions come up as it starts: wait for
		// both to answer.
		var info *corralv1.InfoResponse
		waitUntil(t, name+": both cores answer", func() bool {
			var err error
			info, err = api.Info(ctx, &corralv1.InfoRequest{EveryCore: true})
			return err == nil && info.GetCoresAnswered() == 2
		})
		var cores, conns uint32
		for _, n := range info.GetNodes() {
			if n.GetRole() == "core" {
				cores++
				conns += n.GetConnections()
			}
		}
		if cores != 2 || conns != 3 || info.GetCoresMissing() != 0 {
			t.Fatalf("%s: info %v", name, info)
		}
		rooms, err := api.Rooms(ctx, &corralv1.RoomsRequest{EveryCore: true})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rooms.GetRooms() {
			got = append(got, fmt.Sprintf("%s=%d", r.GetName(), r.GetMembers()))
		}
		if s := strings.Join(got, ","); s != "only-a=1,only-b=1,shared=3" || rooms.GetCoresAnswered() != 2 {
			t.Fatalf("%s: rooms %s (%v)", name, s, rooms)
		}
		// Paged over both cores: one room a page, each once.
		got = nil
		tok := ""
		for range 5 {
			page, err := api.Rooms(ctx, &corralv1.RoomsRequest{EveryCore: true, Limit: 1, PageToken: tok})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.GetRooms() {
				got = append(got, r.GetName())
			}
			if tok = page.GetNextPageToken(); tok == "" {
				break
			}
		}
		if s := strings.Join(got, ","); s != "only-a,only-b,shared" {
			t.Fatalf("%s: paged rooms %s", name, s)
		}
		cs, err := api.Connections(ctx, &corralv1.ConnectionsRequest{Target: &corralv1.ConnectionsRequest_UserId{UserId: "fay"}, EveryCore: true})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{onA.Welcome().GetSessionId(), onB.Welcome().GetSessionId()}
		slices.Sort(want)
		var sessions []string
		for _, c := range cs.GetConnections() {
			sessions = append(sessions, c.GetSessionId())
		}
		if !slices.Equal(sessions, want) || cs.GetCoresAnswered() != 2 {
			t.Fatalf("%s: fay's connections %v, want %v", name, cs, want)
		}
		// Without every_core, this core's alone.
		local, err := api.Connections(ctx, &corralv1.ConnectionsRequest{Target: &corralv1.ConnectionsRequest_UserId{UserId: "fay"}})
		if err != nil || len(local.GetConnections()) != 1 {
			t.Fatalf("%s: local connections %v %v", name, local, err)
		}
	}
	// A room's members on both cores: fay once, with both connections.
	want := []string{onA.Welcome().GetSessionId(), onB.Welcome().GetSessionId()}
	slices.Sort(want)
	members, err := apiB.Members(ctx, &corralv1.MembersRequest{Room: "shared", EveryCore: true})
	if err != nil {
		t.Fatal(err)
	}
	if m := members.GetMembers(); len(m) != 2 || m[0].GetUserId() != "fay" || m[0].GetConnections() != 2 || !slices.Equal(m[0].GetSessionIds(), want) ||
		m[1].GetUserId() != "gus" || members.GetConnections() != 3 || members.GetCoresAnswered() != 2 {
		t.Fatalf("members of shared on every core: %v", members)
	}
	// Disconnect with every_core closes fay's connections on both cores.
	res, err := apiA.Disconnect(ctx, &corralv1.DisconnectRequest{Target: &corralv1.DisconnectRequest_UserId{UserId: "fay"}, Code: corralv1.Code_CODE_GOING_AWAY, EveryCore: true})
	if err != nil || !slices.Equal(res.GetSessionIds(), want) || res.GetCoresAnswered() != 2 {
		t.Fatalf("disconnect every core: %v %v, want %v", res, err, want)
	}
	for _, c := range []*client.Conn{onA, onB} {
		waitUntil(t, "fay's connection closed", func() bool {
			select {
			case <-c.Done():
				return true
			default:
				return false
			}
		})
	}
}

// TestSignalsSample: Signals lists a room's latest signal per key, in key
// order, without cleared keys, bounded by limit (more says the rest);
// with every_core a key held on the other core is listed too.
func TestSignalsSample(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			c := dial(t, d, "hal", protocol.JSON)
			if _, err := c.Join(ctx, "board", 0, ""); err != nil {
				t.Fatal(err)
			}
			signal := func(key, payload string, clear bool) {
				f := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{Room: "board", Key: key, Payload: []byte(payload), Clear: clear}}}
				if err := c.Send(ctx, f); err != nil {
					t.Fatal(err)
				}
			}
			signal("cursor:hal", `{"x":1}`, false)
			signal("typing:hal", `true`, false)
			signal("cursor:hal", `{"x":2}`, false)
			signal("gone", `1`, false)
			signal("gone", ``, true)
			var res *corralv1.SignalsResponse
			waitUntil(t, "the latest cursor sampled", func() bool {
				var err error
				res, err = d.api.Signals(ctx, &corralv1.SignalsRequest{Room: "board"})
				if err != nil {
					t.Fatal(err)
				}
				return len(res.GetSignals()) == 2 && string(res.GetSignals()[0].GetPayload()) == `{"x":2}`
			})
			if s := res.GetSignals(); s[0].GetKey() != "cursor:hal" || s[1].GetKey() != "typing:hal" || res.GetMore() {
				t.Fatalf("signals %v", res)
			}
			one, err := d.api.Signals(ctx, &corralv1.SignalsRequest{Room: "board", Limit: 1})
			if err != nil || len(one.GetSignals()) != 1 || !one.GetMore() {
				t.Fatalf("limit 1: %v %v", one, err)
			}
			if _, err := d.api.Signals(ctx, &corralv1.SignalsRequest{Room: ""}); connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("no room: %v", err)
			}
		})
	}
	t.Run("every core", func(t *testing.T) {
		a, _, da, db := twoCores(t, nil)
		ctx := testCtx(t)
		api := apiclient.New("", "", &apiclient.Options{Transport: connectinprocess.New(a.APIServer())})
		for _, x := range []struct {
			d    *deployment
			user string
		}{{da, "ida"}, {db, "jon"}} {
			c := dial(t, x.d, x.user, protocol.JSON)
			if _, err := c.Join(ctx, "board", 0, ""); err != nil {
				t.Fatal(err)
			}
			f := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{Room: "board", Key: "cursor:" + x.user, Payload: []byte(`1`)}}}
			if err := c.Send(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(t, "both cores' cursors", func() bool {
			res, err := api.Signals(ctx, &corralv1.SignalsRequest{Room: "board", EveryCore: true})
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, s := range res.GetSignals() {
				keys = append(keys, s.GetKey())
			}
			return slices.Equal(keys, []string{"cursor:ida", "cursor:jon"}) && res.GetCoresAnswered() == 2
		})
	})
}
