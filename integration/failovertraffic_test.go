package integration_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/protocol"
)

// failoverRun describes one Redis failover under traffic, for
// runFailover.
type failoverRun struct {
	// deps are the corral deployments on the one Redis: members join on
	// them in turn, resumers resume on the next one, the publisher uses
	// the first one's API.
	deps []*deployment
	// rooms get the traffic, round robin, 200 publishes/s in all; the
	// first one is on the master that fails.
	rooms []string
	// members per room; the first resumers of them cut their connection
	// right after the master's kill and resume (when their session was
	// lost with the old master, 4102, they join afresh from their
	// position).
	members, resumers int
	// fail runs the fault and returns when the master was killed; traffic
	// has run a second by then.
	fail func() time.Time
	// noLoss: every acknowledged message must reach every member (none is
	// covered by a reset only).
	noLoss bool
	// noResets: nobody may see a reset, every room keeps its epoch
	// (replica wait).
	noResets bool
	// resetRooms: every member of these rooms must have seen a reset (the
	// promoted replica lagged, or, without replica wait, any failover of
	// their master).
	resetRooms []string
}

// failoverFigures is what a failover run measured, logged for
// docs/DEPLOYMENT.md. A message counts as unstored when it was
// acknowledged in an epoch the failover ended, above the last seq the new
// master still had (the first seq acknowledged in the next epoch, minus
// one): replay cannot give it.
type failoverFigures struct {
	acked, refused int64
	epochs         int           // epoch rooms with acknowledged messages
	resets         int64         // Reset frames members saw
	lost           int           // acknowledged, delivered to no member: covered by resets
	unstored       int           // acknowledged, missing from the new master's history
	firstAfter     time.Duration // master kill → first accepted publish to rooms[0] begun after it
	resumed        int64         // resumers back with their session
	sessionsLost   int64         // resumes answered 4102, joined afresh from their position
	joinAgain      int64         // joins refused as unavailable, tried again
}

// epochRoom is the checker's room name for room in one epoch: seqs restart
// meaning with each epoch.
func epochRoom(room, epoch string) string { return room + "@" + epoch }

// runFailover runs traffic through run.fail and checks with the delivery
// checker that every member received each acknowledged message of its
// room in the epoch it was acknowledged in, or saw a reset out of that
// epoch; that no seq names two messages in one epoch; and no duplicates.
// It logs the figures.
func runFailover(t *testing.T, run failoverRun) failoverFigures {
	t.Helper()
	ctx := testCtx(t)
	chk := checker.New()

	type window struct {
		start uint64
		reset bool
	}
	var mu sync.Mutex                              // guards the following maps
	windows := make(map[string]map[string]*window) // member -> epoch room -> window
	got := make(map[string]map[uint64]bool)        // epoch room -> seqs some member received
	resetMembers := make(map[string]map[string]bool)
	// where is each member's room, epoch and newest seq handled (the
	// member's own variables, under mu), for the wait at the end.
	type position struct {
		room  string
		epoch *string
		last  *uint64
	}
	where := make(map[string]position)
	var resets, resumed, sessionsLost, joinAgain atomic.Int64
	killed := make(chan struct{}) // closed once the master is dead
	stop := make(chan struct{})   // members stop reading
	var wg sync.WaitGroup

	for ri, room := range run.rooms {
		for i := range run.members {
			name := fmt.Sprintf("m%d-%d", ri, i)
			home := (ri*run.members + i) % len(run.deps)
			c := dial(t, run.deps[home], name, protocol.Encoding(i%2))
			j, err := c.Join(ctx, room, 0, "")
			if err != nil {
				t.Fatal(err)
			}
			epoch, last := j.GetEpoch(), j.GetSeq()
			windows[name] = map[string]*window{epochRoom(room, epoch): {start: last}}
			where[name] = position{room, &epoch, &last}
			// handle records one frame. Lock must be held.
			handle := func(f *corralv1.ServerFrame) {
				switch {
				case f.GetMessage() != nil:
					m := f.GetMessage()
					er := epochRoom(room, epoch)
					chk.Received(name, er, m.GetSeq(), m.GetId())
					if got[er] == nil {
						got[er] = make(map[uint64]bool)
					}
					got[er][m.GetSeq()] = true
					last = max(last, m.GetSeq())
				case f.GetBatch() != nil:
					t.Errorf("%s: unexpected batch frame", name)
				case f.GetReset_() != nil:
					r := f.GetReset_()
					resets.Add(1)
					chk.Reset(name, epochRoom(room, epoch))
					windows[name][epochRoom(room, epoch)].reset = true
					if resetMembers[room] == nil {
						resetMembers[room] = make(map[string]bool)
					}
					resetMembers[room][name] = true
					epoch, last = r.GetEpoch(), r.GetSeq()
					if windows[name][epochRoom(room, epoch)] == nil {
						windows[name][epochRoom(room, epoch)] = &window{start: last}
					}
				case f.GetJoined() != nil && f.GetJoined().GetEpoch() != epoch:
					t.Errorf("%s: joined %s in epoch %q after %q without a reset", name, room, f.GetJoined().GetEpoch(), epoch)
				case f.GetError().GetRoom() == room:
					// The join of a resume failed (the store was
					// unavailable): join again from the position, as a
					// client does. A failure comes back here.
					if f.GetError().GetCode() != corralv1.Code_CODE_UNAVAILABLE {
						t.Errorf("%s: %v", name, f.GetError())
						return
					}
					joinAgain.Add(1)
					c, seq, ep := c, last, epoch
					go func() {
						time.Sleep(200 * time.Millisecond)
						jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
						defer cancel()
						c.Join(jctx, room, seq, ep)
					}()
				}
			}
			cut := killed // nil once this member has resumed
			if i >= run.resumers {
				cut = nil
			}
			next := run.deps[(home+1)%len(run.deps)]
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					case <-c.Done():
						t.Errorf("%s disconnected: %v", name, c.Err())
						return
					case f := <-c.Frames():
						mu.Lock()
						handle(f)
						mu.Unlock()
					case <-cut:
						// A network cut: frames in flight are dropped,
						// the resume names the last seq handled.
						cut = nil
						w := c.Welcome()
						c.CloseNow()
						c = rejoin(t, ctx, next, name, w, room, &mu, &last, &epoch, &resumed, &sessionsLost)
						if c == nil {
							return
						}
					}
				}
			})
		}
	}

	// The publisher: 200 msgs/s through the API, round robin over the
	// rooms; a refused publish is not acknowledged and not counted.
	okAt := make(map[string][]int64) // room -> start and end times of accepted publishes
	var acked, refused atomic.Int64
	upto := make(map[string]uint64) // epoch room -> newest acknowledged seq
	ackedSeqs := make(map[string][]uint64)
	epochOrder := make(map[string][]string) // room -> its epoch rooms, in order of first ack
	stopPub, pubDone := make(chan struct{}), make(chan struct{})
	api := run.deps[0].api
	go func() {
		defer close(pubDone)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stopPub:
				return
			case <-tick.C:
			}
			room := run.rooms[n%len(run.rooms)]
			began := time.Now().UnixNano()
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			res, err := api.Publish(pctx, &corralv1.PublishRequest{Room: room, Payload: payload(n)})
			cancel()
			if err != nil {
				refused.Add(1)
				continue
			}
			acked.Add(1)
			er := epochRoom(room, res.GetEpoch())
			chk.Acked(er, res.GetSeq(), "")
			mu.Lock()
			upto[er] = max(upto[er], res.GetSeq())
			okAt[room] = append(okAt[room], began, time.Now().UnixNano())
			if ackedSeqs[er] == nil {
				epochOrder[room] = append(epochOrder[room], er)
			}
			ackedSeqs[er] = append(ackedSeqs[er], res.GetSeq())
			mu.Unlock()
		}
	}()

	// Traffic before the failure: a second's worth at 200 msgs/s.
	eventually.True(t, 30*time.Second, func() bool { return acked.Load() >= 200 }, "traffic before the failure")
	killedAt := run.fail()
	close(killed)
	time.Sleep(3 * time.Second)
	close(stopPub)
	<-pubDone
	// Members keep reading until each is in its room's newest epoch with
	// every message acknowledged in it, and every member of a reset room
	// has seen a reset; or until a bound, after which the checks below
	// say what is missing. A core that publishes nothing itself learns of
	// the failover only when its subscription is back on the new master
	// (internal/pubsub: topology read with backoff, up to 2 s apart) and
	// catches up, which under a loaded CI can take seconds past the
	// traffic's end.
	settled := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for name, p := range where {
			ers := epochOrder[p.room]
			if len(ers) == 0 {
				continue
			}
			if epochRoom(p.room, *p.epoch) != ers[len(ers)-1] || *p.last < upto[ers[len(ers)-1]] {
				return false
			}
			if slices.Contains(run.resetRooms, p.room) && !resetMembers[p.room][name] {
				return false
			}
		}
		return true
	}
	ended := time.Now()
	if eventually.WithinEvery(30*time.Second, 50*time.Millisecond, settled) {
		t.Logf("members settled %v after the traffic ended", time.Since(ended).Round(time.Millisecond))
	} else {
		t.Log("members had not settled 30 s after the traffic ended")
	}
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	fig := failoverFigures{acked: acked.Load(), refused: refused.Load(), epochs: len(upto),
		resets: resets.Load(), resumed: resumed.Load(), sessionsLost: sessionsLost.Load(), joinAgain: joinAgain.Load()}
	// The first room's first publish begun after the kill and accepted
	// (one under way at the kill may succeed on the old master).
	at := okAt[run.rooms[0]]
	for i := 0; i < len(at); i += 2 {
		if at[i] > killedAt.UnixNano() {
			fig.firstAfter = time.Duration(at[i+1] - killedAt.UnixNano())
			break
		}
	}
	for er, seqs := range ackedSeqs {
		for _, seq := range seqs {
			if !got[er][seq] {
				fig.lost++
			}
		}
	}
	for _, ers := range epochOrder {
		for i := 1; i < len(ers); i++ {
			kept := slices.Min(ackedSeqs[ers[i]]) - 1
			for _, seq := range ackedSeqs[ers[i-1]] {
				if seq > kept {
					fig.unstored++
				}
			}
		}
	}
	for name, ws := range windows {
		for er, w := range ws {
			if !w.reset && upto[er] > w.start {
				chk.Member(name, er, w.start, upto[er])
			}
		}
	}
	t.Logf("acknowledged %d, refused %d, epochs %d, resets seen by members %d, "+
		"acknowledged but delivered to no member (covered by the resets) %d, acknowledged but missing from the new master's history %d, "+
		"first publish to %s accepted %v after the master kill, resumers back in their session %d, sessions lost (4102) %d, joins refused as unavailable and tried again %d",
		fig.acked, fig.refused, fig.epochs, fig.resets, fig.lost, fig.unstored, run.rooms[0], fig.firstAfter, fig.resumed, fig.sessionsLost, fig.joinAgain)
	if run.noLoss && fig.lost > 0 {
		t.Errorf("%d acknowledged messages were lost", fig.lost)
	}
	if fig.firstAfter == 0 {
		t.Error("no publish was accepted after the failover")
	}
	if err := chk.Check(); err != nil {
		t.Error(err)
	}
	if run.noResets && (fig.resets > 0 || fig.epochs != len(run.rooms)) {
		t.Errorf("a failover that must keep every epoch gave %d resets, %d epochs for %d rooms", fig.resets, fig.epochs, len(run.rooms))
	}
	for _, room := range run.resetRooms {
		if n := len(resetMembers[room]); n < run.members {
			t.Errorf("%s's master failed over but only %d of its %d members saw a reset", room, n, run.members)
		}
	}
	return fig
}

// rejoin brings a member whose connection was cut back into room at its
// position (*last in *epoch, under mu): by resuming its session on d, or,
// when the session is gone (4102, lost with the old master), by a fresh
// connection joining from the position. Refusals for an unavailable store
// are retried until ctx ends. It returns nil after failing the test.
func rejoin(t *testing.T, ctx context.Context, d *deployment, name string, w *corralv1.Welcome, room string,
	mu *sync.Mutex, last *uint64, epoch *string, resumed, lost *atomic.Int64) *client.Conn {
	time.Sleep(100 * time.Millisecond)
	var back *client.Conn
	// try resumes once (or, the session lost, joins anew): it holds when
	// the member is back or ctx ended; it is retried as a client would,
	// every 200 ms.
	try := func() bool {
		if ctx.Err() != nil {
			return true
		}
		mu.Lock()
		seq, ep := *last, *epoch
		mu.Unlock()
		c, err := resumeConn(t, d.wsURL, name, w, room, seq, ep)
		if err == nil {
			if c.Welcome().GetResumed() {
				resumed.Add(1)
				back = c
				return true
			}
			c.CloseNow()
			err = errors.New("welcome without resumed")
		}
		var ce *client.CloseError
		if errors.As(err, &ce) && ce.Code == 4102 {
			lost.Add(1)
			c := dial(t, d, name, protocol.JSON)
			jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := c.Join(jctx, room, seq, ep)
			cancel()
			if err == nil {
				back = c
				return true
			}
			c.CloseNow()
		}
		t.Logf("%s: rejoin: %v; retrying", name, err)
		return false
	}
	for !eventually.WithinEvery(time.Minute, 200*time.Millisecond, try) {
	}
	if back == nil {
		t.Errorf("%s: could not rejoin %s", name, room)
	}
	return back
}
