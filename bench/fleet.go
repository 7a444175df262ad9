package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// fleet is a run's WebSocket clients. Each member joins one room and has
// one goroutine that drains its frames and records what it read.
type fleet struct {
	r       *run
	room    func(i int) string
	dialTTL time.Duration
	connLat histogram // dial start to Joined
	target  int       // dials attempted
	// signal, when set, is called by a member's consumer for each
	// SignalEvent it reads, with the time it was read.
	signal func(m *member, ev *corralv1.SignalEvent, now time.Time)
	// presence, when set, makes members join with presence and counts
	// their Presence frames.
	presence *presenceTally
	// lateAfter is when the drain ended (unix nanoseconds; 0: not yet):
	// messages read after it are late, not lost.
	lateAfter atomic.Int64

	mu      sync.Mutex // guards the following field
	members []*member

	consumers sync.WaitGroup
}

// member is one client. got and resets belong to its consumer goroutine
// until done is closed.
type member struct {
	idx    int
	name   string
	room   string
	conn   *client.Conn
	joined uint64        // the room's seq at Joined
	last   atomic.Uint64 // highest seq read
	closed atomic.Bool   // the run closed it (not the server)
	done   chan struct{}

	got    []entry
	late   uint64 // messages read after the drain ended
	resets int
	// held is, per signal sender, the highest counter read (cursors).
	held []int64
	// pres counts Presence frames (nil without --presence).
	pres *presenceCount
}

type entry struct {
	seq uint64
	id  string
}

// frameBuffer is each client's frame channel: small, because 15,000 of
// them at the client's default (4,096) would hold 480 MiB of slots.
const frameBuffer = 256

func newFleet(r *run, room func(int) string) *fleet {
	return &fleet{r: r, room: room, dialTTL: 15 * time.Second}
}

// connect dials n clients paced by p, at most inflight at once, and waits
// until every dial has ended. It returns how many joined.
func (f *fleet) connect(ctx context.Context, n int, p profile, inflight int) int {
	var joined atomic.Int64
	base := f.target
	f.target += n
	paceGo(ctx, time.Now(), p, n, inflight, func(k int, at time.Time) {
		if f.dial(ctx, base+k, at) {
			joined.Add(1)
		}
	})
	return int(joined.Load())
}

// dial connects client i, says hello and joins its room.
func (f *fleet) dial(ctx context.Context, i int, scheduled time.Time) bool {
	m := &member{idx: i, name: "bench-" + strconv.Itoa(i), room: f.room(i), done: make(chan struct{})}
	token := f.r.o.Target.Token
	if token == "" {
		token = m.name
	}
	ctx, cancel := context.WithTimeout(ctx, f.dialTTL)
	defer cancel()
	if f.presence != nil {
		m.pres = new(presenceCount) // counted once connected
	}
	start := time.Now()
	f.r.sentOne(scheduled)
	c, err := client.Dial(ctx, f.r.o.Target.WS, client.Options{
		Token: token, Encoding: f.r.o.Encoding, Transport: f.r.o.Transport,
		OnFrame:    func(fr *corralv1.ServerFrame) { f.handle(m, fr) },
		HTTPClient: f.r.o.Client.httpClient(nil),
	})
	if err != nil {
		f.r.fail("connect:"+dialErrorKind(err), 0)
		return false
	}
	var j *corralv1.Joined
	if f.presence != nil {
		f.presence.add(m.pres)
		j, err = c.JoinPresence(ctx, m.room, []byte(`{"name":"`+m.name+`"}`))
	} else {
		j, err = c.Join(ctx, m.room, 0, "")
	}
	if err != nil {
		f.r.fail("join:"+dialErrorKind(err), 0)
		c.CloseNow()
		return false
	}
	f.connLat.observe(time.Since(start))
	m.conn, m.joined = c, j.GetSeq()
	f.r.conns.Add(1)
	f.mu.Lock()
	f.members = append(f.members, m)
	f.mu.Unlock()
	f.consumers.Add(1)
	go f.consume(m)
	return true
}

func (f *fleet) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.members)
}

func (f *fleet) all() []*member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*member(nil), f.members...)
}

// handle takes one of m's frames, on m's connection's read goroutine
// (client.Options.OnFrame: no hand-off per delivery).
func (f *fleet) handle(m *member, fr *corralv1.ServerFrame) {
	switch k := fr.GetKind().(type) {
	case *corralv1.ServerFrame_Message:
		msg := k.Message
		now := time.Now()
		if t, ok := sentTime(msg.GetPayload()); ok {
			f.r.delivered(t, now)
		}
		if at := f.lateAfter.Load(); at != 0 && now.UnixNano() > at {
			m.late++
		}
		m.got = append(m.got, entry{msg.GetSeq(), msg.GetId()})
		if msg.GetSeq() > m.last.Load() {
			m.last.Store(msg.GetSeq())
		}
	case *corralv1.ServerFrame_Signal:
		if f.signal != nil {
			f.signal(m, k.Signal, time.Now())
		}
	case *corralv1.ServerFrame_Presence:
		if m.pres != nil {
			m.pres.observe(f.r.o.Encoding, fr)
		}
	case *corralv1.ServerFrame_Reset_:
		m.resets++
		f.r.fail("reset", 0)
	case *corralv1.ServerFrame_Error:
		if k.Error.GetRef() == "" {
			f.r.fail("error:"+codeName(k.Error.GetCode()), 0)
		}
	}
}

// consume waits until m's connection ends (its frames go to handle) and
// counts how it ended.
func (f *fleet) consume(m *member) {
	defer f.consumers.Done()
	defer close(m.done)
	for range m.conn.Frames() {
	}
	if !m.closed.Load() {
		kind := "close:lost"
		if e := m.conn.Err(); e != nil && e.Code > 0 {
			kind = "close:" + strconv.Itoa(int(e.Code))
		} else if e != nil && e.Err != nil {
			// No close frame: say how the connection went.
			kind += "-" + dialErrorKind(e.Err)
		}
		f.r.fail(kind, 0)
	}
	f.r.conns.Add(-1)
}

// keepAlive pings every member about twice per heartbeat, so that idle
// clients outlive the server's heartbeat timeout, until ctx is done.
func (f *fleet) keepAlive(ctx context.Context) {
	const tick = time.Second
	every := 10 * time.Second
	t := time.NewTicker(tick)
	defer t.Stop()
	next := 0
	var id uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ms := f.all()
		if len(ms) == 0 {
			continue
		}
		if hb := ms[0].conn.Welcome().GetHeartbeatMs(); hb > 0 {
			every = max(time.Duration(hb)*time.Millisecond/2, 2*time.Second)
		}
		batch := max(1, len(ms)*int(tick)/int(every))
		for range min(batch, len(ms)) {
			m := ms[next%len(ms)]
			next++
			id++
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_ = m.conn.Send(pctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Id: id}}})
			cancel()
			if ctx.Err() != nil {
				return
			}
		}
	}
}

// drain waits until every member has read its room up to upto, or d
// passes. It reports whether every member has.
func (f *fleet) drain(ctx context.Context, upto map[string]uint64, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if !f.behind(upto) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// behind reports whether a connected member has not read its room up to
// upto yet.
func (f *fleet) behind(upto map[string]uint64) bool {
	for _, m := range f.all() {
		if m.last.Load() < upto[m.room] && !isDone(m.done) {
			return true
		}
	}
	return false
}

// settle follows a drain that ended with members behind: what they read
// from now on is late, not lost. It waits, at most d, until they have
// caught up or the server says it holds nothing more for its clients (its
// queue gauges, read twice in a row at 0: see costSample.queued). It
// returns the server's queued frames when it stopped waiting, or -1 when
// the server does not say.
func (f *fleet) settle(ctx context.Context, upto map[string]uint64, d time.Duration) float64 {
	f.lateAfter.Store(time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	queued, empty := -1.0, 0
	for {
		if s, err := f.r.cost.scrape(ctx); err == nil && s.queuedKnown {
			queued = s.queued
			if queued == 0 {
				empty++
			} else {
				empty = 0
			}
		}
		if !f.behind(upto) || empty >= 2 {
			return queued
		}
		select {
		case <-ctx.Done():
			return queued
		case <-t.C:
		}
	}
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// closeAll closes every client normally (so the server forgets their
// sessions) and waits for their consumers, at most d.
func (f *fleet) closeAll(d time.Duration) {
	ms := f.all()
	work := make(chan *member)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range work {
				m.closed.Store(true)
				_ = m.conn.Close()
			}
		}()
	}
	for _, m := range ms {
		work <- m
	}
	close(work)
	wg.Wait()
	done := make(chan struct{})
	go func() { f.consumers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// ack is a publish the server acknowledged.
type ack struct {
	room string
	seq  uint64
	id   string
	step *stepRec
}

// check runs the delivery check over everything the members read (call
// after closeAll) against the acknowledged publishes: each member must
// have read every seq of its room after its join up to upto[room].
func (f *fleet) check(upto map[string]uint64, acks []ack) Delivery {
	ck := checker.New()
	stepOf := make(map[string]map[uint64]*stepRec)
	for _, a := range acks {
		ck.Acked(a.room, a.seq, a.id)
		if stepOf[a.room] == nil {
			stepOf[a.room] = make(map[uint64]*stepRec)
		}
		stepOf[a.room][a.seq] = a.step
	}
	// A seq nobody was told about (a publish that timed out but was
	// applied) is charged to the step of the nearest acknowledged one
	// before it.
	charge := func(room string, seq uint64) *stepRec {
		for s := seq; s > 0; s-- {
			if st, ok := stepOf[room][s]; ok {
				return st
			}
		}
		return nil
	}
	d := Delivery{Published: uint64(len(acks))}
	var have []uint8
	for _, m := range f.all() {
		if !isDone(m.done) {
			d.Violations = append(d.Violations, m.name+": still connected at the check")
			continue
		}
		up := upto[m.room]
		if up > m.joined {
			ck.Member(m.name, m.room, m.joined, up)
			d.Expected += up - m.joined
			have = append(have[:0], make([]uint8, up-m.joined)...)
		} else {
			have = have[:0]
		}
		d.Late += m.late
		for _, e := range m.got {
			ck.Received(m.name, m.room, e.seq, e.id)
			d.Received++
			if e.seq <= m.joined || e.seq > up {
				continue
			}
			h := &have[e.seq-m.joined-1]
			if *h < 255 {
				*h++
			}
			if *h == 2 {
				d.Duplicated++
				if st := charge(m.room, e.seq); st != nil {
					st.dups++
				}
			}
		}
		if m.resets == 0 {
			for i, h := range have {
				if h == 0 {
					d.Lost++
					if st := charge(m.room, m.joined+uint64(i)+1); st != nil {
						st.lost++
					}
				}
			}
		}
		m.got = nil
	}
	if err := ck.Check(); err != nil {
		d.Violations = append(d.Violations, strings.Split(err.Error(), "\n")...)
	}
	return d
}

// sentTime reads the scheduled time from a payload the generator made.
func sentTime(p []byte) (int64, bool) {
	const prefix = `{"t":`
	if !bytes.HasPrefix(p, []byte(prefix)) {
		return 0, false
	}
	var t int64
	i := len(prefix)
	for ; i < len(p) && p[i] >= '0' && p[i] <= '9'; i++ {
		t = t*10 + int64(p[i]-'0')
	}
	return t, i > len(prefix)
}

// payload makes {"t":<scheduled unix nanos>,"n":<k>,"p":"xxx…"} of about
// size bytes.
func payload(buf []byte, at time.Time, k int, size int) []byte {
	buf = append(buf[:0], `{"t":`...)
	buf = strconv.AppendInt(buf, at.UnixNano(), 10)
	buf = append(buf, `,"n":`...)
	buf = strconv.AppendInt(buf, int64(k), 10)
	if pad := size - len(buf) - len(`,"p":""}`); pad > 0 {
		buf = append(buf, `,"p":"`...)
		buf = append(buf, bytes.Repeat([]byte{'x'}, pad)...)
		buf = append(buf, '"')
	}
	return append(buf, '}')
}

// dialErrorKind names why a dial or join failed, for the error table.
func dialErrorKind(err error) string {
	var ce *client.CloseError
	var se *client.ServerError
	switch {
	case errors.As(err, &se):
		return codeName(se.Err.GetCode())
	case errors.As(err, &ce) && ce.Code > 0:
		return strconv.Itoa(int(ce.Code))
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "no-source-port"
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "too-many-files"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case strings.Contains(err.Error(), "status code 101 but got "):
		// Refused before the upgrade, e.g. 503 from admission control.
		_, code, _ := strings.Cut(err.Error(), "status code 101 but got ")
		return "http-" + strings.Fields(code + " ?")[0]
	}
	return "other"
}

func codeName(c corralv1.Code) string {
	if s, ok := corralv1.Code_name[int32(c)]; ok {
		return strings.TrimPrefix(s, "CODE_")
	}
	return fmt.Sprint(int32(c))
}
