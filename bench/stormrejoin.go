package bench

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/retry"
	"github.com/corral-rt/corral/protocol"
)

// The storm's --rejoin clients: instead of a client.Session that resumes
// its session (hello.resume), each client holds a plain client.Conn and,
// when it drops, connects again with a NEW session and joins its room
// from the last seq it read and the room's epoch (a positioned join,
// Join.since_seq and epoch): the way clients built without corral's SDK
// come back. The server must replay what they missed, with nothing lost
// and nothing twice, as for a resume.

// rejoiner is one --rejoin client's connection.
type rejoiner struct {
	url  string
	opts client.Options

	mu       sync.Mutex // guards the following fields
	conn     *client.Conn
	epoch    string // the room's epoch at the last Joined
	attempts int    // dials the last reconnect took
	// cancel ends a reconnect in progress (close).
	cancel context.CancelFunc
}

// dialRejoin connects client i, with a new session, and joins its room
// live.
func (s *Storm) dialRejoin(ctx context.Context, r *run, f *fleet, st *stormState, wsURL string, i int, scheduled time.Time) *stormClient {
	m := &member{idx: i, name: "bench-" + strconv.Itoa(i), room: f.room(i), done: make(chan struct{})}
	token := r.o.Target.Token
	if token == "" {
		token = m.name
	}
	dctx, cancel := context.WithTimeout(ctx, f.dialTTL)
	defer cancel()
	t0 := time.Now()
	r.sentOne(scheduled)
	rj := &rejoiner{url: wsURL, opts: client.Options{Token: token, Encoding: r.o.Encoding, Transport: r.o.Transport, FrameBuffer: frameBuffer, HTTPClient: r.o.Client.httpClient(s.httpClient)}}
	conn, err := client.Dial(dctx, wsURL, rj.opts)
	if err != nil {
		r.fail("connect:"+dialErrorKind(err), 0)
		return nil
	}
	j, err := conn.Join(dctx, m.room, 0, "")
	if err != nil {
		r.fail("join:"+dialErrorKind(err), 0)
		conn.CloseNow()
		return nil
	}
	f.connLat.observe(time.Since(t0))
	m.joined = j.GetSeq()
	m.last.Store(j.GetSeq())
	rj.conn, rj.epoch = conn, j.GetEpoch()
	c := &stormClient{m: m, rj: rj}
	f.mu.Lock()
	f.members = append(f.members, m)
	f.mu.Unlock()
	r.conns.Add(1)
	rctx, rcancel := context.WithCancel(ctx)
	rj.cancel = rcancel
	go s.consumeRejoin(rctx, r, st, c)
	return c
}

// consumeRejoin reads c's frames; when its connection drops, it comes
// back with a new session and a positioned join, until the run closes it.
func (s *Storm) consumeRejoin(ctx context.Context, r *run, st *stormState, c *stormClient) {
	m, rj := c.m, c.rj
	defer close(m.done)
	defer r.conns.Add(-1)
	for {
		rj.mu.Lock()
		conn := rj.conn
		rj.mu.Unlock()
		for fr := range conn.Frames() {
			switch k := fr.GetKind().(type) {
			case *corralv1.ServerFrame_Message:
				s.received(r, m, k.Message)
			case *corralv1.ServerFrame_Batch:
				for _, b := range k.Batch.GetFrames() {
					if msg := b.GetMessage(); msg != nil {
						s.received(r, m, msg)
					}
				}
			case *corralv1.ServerFrame_Reset_:
				m.resets++
				r.fail("reset", 0)
			}
		}
		if m.closed.Load() || ctx.Err() != nil {
			return
		}
		if st.resetAt.Load() != 0 && !c.back.Load() {
			kind := "closed"
			if err := conn.Err(); err != nil {
				kind = dialErrorKind(err)
				if err.Code <= 0 && err.Err != nil {
					kind = dialErrorKind(err.Err)
				}
			}
			st.mu.Lock()
			st.disconnects[kind]++
			st.mu.Unlock()
		}
		if !s.rejoin(ctx, r, st, m, rj) {
			if st.resetAt.Load() != 0 && !c.back.Load() {
				c.back.Store(true)
				st.failed.Add(1)
				r.fail("session-ended", 0)
			}
			return
		}
		if at := st.resetAt.Load(); at != 0 && !c.back.Load() {
			c.back.Store(true)
			d := time.Duration(time.Now().UnixNano() - at)
			st.recovery.observe(d)
			st.resumed.Add(1)
			st.mu.Lock()
			st.perSecond[int64(d/time.Second)]++
			st.mu.Unlock()
		}
	}
}

// received records one message of m's room.
func (s *Storm) received(r *run, m *member, msg *corralv1.Message) {
	if msg.GetRoom() != m.room {
		return
	}
	if t, ok := sentTime(msg.GetPayload()); ok {
		r.delivered(t, time.Now())
	}
	m.got = append(m.got, entry{msg.GetSeq(), msg.GetId()})
	if q := msg.GetSeq(); q > m.last.Load() {
		m.last.Store(q)
	}
}

// rejoin connects again with a new session and joins m's room from the
// last seq read. With the W1 schedule (the default) it waits herdWait(n)
// before dial n, the first included, and records the first dial's failure
// by kind in st.first; with --schedule sdk it dials at once, then with
// jittered exponential backoff (internal/retry; a 503 of the server's
// admission control is one of them). It reports whether it got back
// before ctx ended.
func (s *Storm) rejoin(ctx context.Context, r *run, st *stormState, m *member, rj *rejoiner) bool {
	rj.mu.Lock()
	epoch := rj.epoch
	rj.mu.Unlock()
	b := retry.Backoff{Base: 100 * time.Millisecond, Cap: 4 * time.Second}
	w1 := s.Schedule != "sdk"
	for n := 1; ; n++ {
		if w1 && !retry.Sleep(ctx, herdWait(n)) {
			return false
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := client.Dial(dctx, rj.url, rj.opts)
		var j *corralv1.Joined
		kind := "connect:"
		if err == nil {
			j, err = conn.Join(dctx, m.room, m.last.Load(), epoch)
			if err != nil {
				kind = "join:"
				conn.CloseNow()
			}
		}
		cancel()
		if err == nil {
			rj.mu.Lock()
			rj.conn, rj.epoch, rj.attempts = conn, j.GetEpoch(), n
			rj.mu.Unlock()
			return true
		}
		if ctx.Err() != nil || m.closed.Load() {
			return false
		}
		if n == 1 && st.resetAt.Load() != 0 {
			st.first.add(kind + dialErrorKind(err))
		}
		var se *client.ServerError
		if errors.As(err, &se) && protocol.AdviceOf(se.Err.GetCode()) == protocol.AdviceStop {
			r.fail("rejoin:"+se.Err.GetCode().String(), 0)
			return false
		}
		if !w1 && !b.Wait(ctx) {
			return false
		}
	}
}

// close ends the client: no reconnect after this.
func (rj *rejoiner) close() {
	rj.mu.Lock()
	conn, cancel := rj.conn, rj.cancel
	rj.mu.Unlock()
	cancel()
	conn.CloseNow()
}

// lastAttempts is the dials the last reconnect took (0: none yet).
func (rj *rejoiner) lastAttempts() int {
	rj.mu.Lock()
	defer rj.mu.Unlock()
	return rj.attempts
}
