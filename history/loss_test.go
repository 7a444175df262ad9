package history_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
)

// loseTail makes the room's history end at last, as a replica promoted
// before it received the newer messages would.
func loseTail(t *testing.T, c rueidis.Client, prefix, room string, last uint64) {
	t.Helper()
	ctx := context.Background()
	base := prefix + ":{" + room + "}:"
	// A stream remembers its top id past XDEL: rebuild it as a replica
	// that never had the newer entries holds it.
	kept, err := c.Do(ctx, c.B().Xrange().Key(base+"log").Start("-").End(itoa(last)+"-0").Build()).AsXRange()
	if err != nil {
		t.Fatal(err)
	}
	cmds := rueidis.Commands{c.B().Set().Key(base + "seq").Value(itoa(last)).Build(), c.B().Del().Key(base + "log").Build()}
	for _, e := range kept {
		cmds = append(cmds, c.B().Xadd().Key(base+"log").Id(e.ID).FieldValue().FieldValue("m", e.FieldValues["m"]).Build())
	}
	for _, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRedisLossDetection(t *testing.T) {
	tests := map[string]struct {
		known    func(epoch string) history.State
		wantBump bool
	}{
		"tail lost":         {known: func(e string) history.State { return history.State{Epoch: e, Last: 5} }, wantBump: true},
		"nothing lost":      {known: func(e string) history.State { return history.State{Epoch: e, Last: 3} }},
		"nothing known":     {known: func(string) history.State { return history.State{} }},
		"another epoch":     {known: func(string) history.State { return history.State{Epoch: "old", Last: 9} }},
		"known behind tail": {known: func(e string) history.State { return history.State{Epoch: e, Last: 1} }},
	}
	for name, tt := range tests {
		for _, how := range []string{"append", "fence"} {
			t.Run(name+"/"+how, func(t *testing.T) {
				var losses atomic.Int64
				s, client, _ := newRedis(t, history.RedisOptions{Prefix: "loss", OnLoss: func(string) { losses.Add(1) }})
				ctx := context.Background()
				var epoch string
				for i := range 5 {
					res, err := s.Append(ctx, "r", newMsg("r", 1, i), "")
					if err != nil {
						t.Fatal(err)
					}
					epoch = res.Epoch
				}
				loseTail(t, client, "loss", "r", 3)
				known := tt.known(epoch)
				var gotEpoch string
				if how == "append" {
					res, err := s.AppendKnown(ctx, "r", newMsg("r", 2, 0), "", known)
					if err != nil {
						t.Fatal(err)
					}
					if res.Seq != 4 {
						t.Fatalf("appended seq %d, want 4 (surviving messages keep their seqs)", res.Seq)
					}
					gotEpoch = res.Epoch
				} else {
					st, err := s.Fence(ctx, "r", known)
					if err != nil {
						t.Fatal(err)
					}
					if st.Last != 3 {
						t.Fatalf("fence reports last %d, want 3", st.Last)
					}
					gotEpoch = st.Epoch
				}
				if bumped := gotEpoch != epoch; bumped != tt.wantBump {
					t.Fatalf("epoch %q -> %q: bumped %v, want %v", epoch, gotEpoch, bumped, tt.wantBump)
				}
				if n := losses.Load(); (n == 1) != tt.wantBump || n > 1 {
					t.Fatalf("OnLoss called %d times", n)
				}
				// The surviving messages are readable in the room's epoch now.
				page, err := s.Read(ctx, history.Query{Room: "r"})
				if err != nil {
					t.Fatal(err)
				}
				if page.Epoch != gotEpoch || len(page.Messages) < 3 || page.Messages[0].GetSeq() != 1 {
					t.Fatalf("history after: %+v", page)
				}
			})
		}
	}
}

// TestRedisFenceNoHistory checks that Fence never creates a room.
func TestRedisFenceNoHistory(t *testing.T) {
	s, client, _ := newRedis(t, history.RedisOptions{Prefix: "fence"})
	st, err := s.Fence(context.Background(), "none", history.State{Epoch: "e", Last: 3})
	if err != nil || st.Epoch != "" || st.Last != 0 {
		t.Fatalf("fence of a room without history: %+v, %v", st, err)
	}
	n, err := client.Do(context.Background(), client.B().Exists().Key("fence:{none}:epoch", "fence:{none}:seq").Build()).AsInt64()
	if err != nil || n != 0 {
		t.Fatalf("fence created %d keys (%v)", n, err)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestRedisReplicatedHistory: a history that reached the server by
// replication (simulated: the master-only here key deleted, as a promoted
// replica lacks it) moves to a new epoch at its next append, by a caller
// that knows nothing, keeping the surviving seqs; subscribers hear "catch
// up" (nil) before the message. A room whose epoch a read created, and a
// room appended to since, never move.
func TestRedisReplicatedHistory(t *testing.T) {
	var replicated atomic.Int64
	s, client, _ := newRedis(t, history.RedisOptions{Prefix: "repl", OnReplicated: func(string) { replicated.Add(1) }})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan *corralv1.Message, 16)
	sub, err := s.Subscribe(ctx, func(room string, msg *corralv1.Message) { got <- msg })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	if err := sub.Add(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	// A read creates the epoch; appends then keep it.
	st, err := s.State(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		res, err := s.Append(ctx, "r", newMsg("r", 1, i), "")
		if err != nil || res.Epoch != st.Epoch {
			t.Fatalf("append %d: %+v, %v; want epoch %q", i, res, err, st.Epoch)
		}
		if m := <-got; m.GetSeq() != res.Seq {
			t.Fatalf("subscriber got %v, want seq %d", m, res.Seq)
		}
	}
	if err := client.Do(ctx, client.B().Del().Key("repl:{r}:here").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	res, err := s.Append(ctx, "r", newMsg("r", 2, 0), "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Seq != 4 || res.Epoch == st.Epoch {
		t.Fatalf("first append after the failover: %+v, want seq 4 in a new epoch", res)
	}
	if n := replicated.Load(); n != 1 {
		t.Fatalf("OnReplicated called %d times", n)
	}
	if m := <-got; m != nil {
		t.Fatalf("subscriber got %v before the new epoch's message, want nil (catch up)", m)
	}
	if m := <-got; m.GetSeq() != 4 {
		t.Fatalf("subscriber got %v, want seq 4", m)
	}
	again, err := s.Append(ctx, "r", newMsg("r", 2, 1), "")
	if err != nil || again.Seq != 5 || again.Epoch != res.Epoch {
		t.Fatalf("second append: %+v, %v; want seq 5 in epoch %q", again, err, res.Epoch)
	}
	if n := replicated.Load(); n != 1 {
		t.Fatalf("OnReplicated called %d times", n)
	}
}
