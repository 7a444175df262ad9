package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/protocol"
)

// DocEdit is a document being edited: Members standard clients (the Go
// SDK) join one room; Writers of them set its keyed state's "doc" key, a
// document of Size bytes, at Rate edits per second over all writers for
// Duration, each edit a small change (a word replaced) of the shared
// text, a JSON string. It measures the bytes of state frames the members received (each
// frame as the wire carries it in the run's encoding, WebSocket framing
// aside) and the server's CPU seconds in the edit window, and checks that
// every member rebuilt every version it got (deltas applied) to exactly
// what was written (checker.Values). Run it against a server whose room
// class has state.delta on, then off (corral-bench --spawn-state-delta).
type DocEdit struct {
	Members  int
	Writers  int
	Rate     float64
	Duration time.Duration
	Size     int
	Timeout  time.Duration
}

// NewDocEdit returns a small shared document: 50 members, 5 writers, 50
// edits/s of a 4 KB document for 20 s.
func NewDocEdit() *DocEdit {
	return &DocEdit{Members: 50, Writers: 5, Rate: 50, Duration: 20 * time.Second, Size: 4096, Timeout: 5 * time.Second}
}

func (d *DocEdit) Name() string { return "docedit" }

func (d *DocEdit) Describe() string {
	return `A document being edited through keyed room state (docs/STATE.md).

--members clients join one room; --writers of them set its "doc" key, a
--size-byte document, at --rate edits/s over all writers, each edit a word
replaced. Reports the bytes of state frames the members received, per
change, and the server's CPU in the edit window, and checks every member's
rebuilt values (deltas applied) against what was written. Compare a server
with state deltas (corral-bench --spawn --spawn-state-delta) with one
without (docs/BENCHMARKS.md).`
}

func (d *DocEdit) Flags(fs *flag.FlagSet) {
	fs.IntVar(&d.Members, "members", d.Members, "clients in the room (the writers among them)")
	fs.IntVar(&d.Writers, "writers", d.Writers, "members that edit")
	fs.Float64Var(&d.Rate, "rate", d.Rate, "edits per `second`, over all writers")
	fs.DurationVar(&d.Duration, "duration", d.Duration, "how long the writers edit")
	fs.IntVar(&d.Size, "size", d.Size, "the document's `bytes`")
	fs.DurationVar(&d.Timeout, "timeout", d.Timeout, "how long a set or a join may take")
}

// DocEditStats are docedit's figures.
type DocEditStats struct {
	Edits int `json:"edits"`
	// Changes are the state changes members applied; Deltas those that
	// came as deltas.
	Changes int `json:"changes"`
	Deltas  int `json:"deltas"`
	// WireBytes are the bytes of the state frames members received (each
	// frame encoded as the run's encoding carries it).
	WireBytes      int64   `json:"wireBytes"`
	BytesPerChange float64 `json:"bytesPerChange"`
	// ValueBytes is what the same changes weigh as whole values.
	ValueBytes int64 `json:"valueBytes"`
}

// docMember is one member's view of the document.
type docMember struct {
	c    *client.Conn
	enc  protocol.Encoding
	done chan struct{}

	mu sync.Mutex // guards the following fields
	// view, updates: what it rebuilt; err: the first change it refused.
	view    *client.State
	updates []checker.Update
	changes int
	deltas  int
	bytes   int64
	values  int64
	err     error
}

func (m *docMember) read() {
	defer close(m.done)
	var buf []byte
	for f := range m.c.Frames() {
		snap, ch := f.GetStateSnapshot(), f.GetStateChange()
		if snap == nil && ch == nil {
			continue
		}
		buf, _ = protocol.AppendServer(m.enc, buf[:0], f)
		m.mu.Lock()
		m.bytes += int64(len(buf))
		if snap != nil {
			m.view.Snapshot(snap)
			for _, e := range snap.GetEntries() {
				m.updates = append(m.updates[:0], checker.Update{Version: e.GetVersion(), Value: e.GetValue()})
			}
		} else if ok, err := m.view.Change(ch); err != nil && m.err == nil {
			m.err = err
		} else if ok {
			m.changes++
			e, _ := m.view.Get("doc")
			m.values += int64(len(e.Value))
			if len(ch.GetDelta()) > 0 {
				m.deltas++
				m.updates = append(m.updates, checker.Update{Version: ch.GetVersion(), Delta: ch.GetDelta(), IsDelta: true})
			} else {
				m.updates = append(m.updates, checker.Update{Version: ch.GetVersion(), Value: ch.GetValue()})
			}
		}
		m.mu.Unlock()
	}
}

// Run implements Scenario.
func (d *DocEdit) Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	if d.Members <= 0 || d.Writers <= 0 || d.Writers > d.Members || d.Rate <= 0 || d.Size < 64 || d.Duration <= 0 {
		return nil, errors.New("bench: docedit needs positive --members, --writers (at most --members), --rate, --duration and --size of at least 64")
	}
	ctx, cancel := context.WithTimeout(ctx, d.Duration+2*time.Minute)
	defer cancel()
	room := "docedit-" + runID()
	started := time.Now()
	res := &Result{Scenario: d.Name(), Started: started, Target: o.Target, Best: -1, Errors: ErrorCounts{},
		Params: map[string]any{"members": d.Members, "writers": d.Writers, "rate": d.Rate, "duration": d.Duration.String(), "size": d.Size}}
	members := make([]*docMember, 0, d.Members)
	defer func() {
		for _, m := range members {
			m.c.CloseNow()
		}
	}()
	for i := range d.Members {
		dctx, dcancel := context.WithTimeout(ctx, d.Timeout)
		c, err := client.Dial(dctx, o.Target.WS, client.Options{Token: fmt.Sprintf("doc%d", i), Encoding: o.Encoding, Transport: o.Transport})
		if err == nil {
			_, err = c.Join(dctx, room, 0, "")
		}
		dcancel()
		if err != nil {
			return nil, fmt.Errorf("bench: docedit member %d: %w", i, err)
		}
		m := &docMember{c: c, enc: o.Encoding, done: make(chan struct{}), view: client.NewState(room)}
		go m.read()
		members = append(members, m)
	}
	res.Connect = &ConnectStats{Target: d.Members, Joined: len(members)}

	// The document: a JSON string (inline in the JSON subprotocol, as an
	// editor's text field would be); an edit replaces a word of 6 bytes.
	doc := make([]byte, d.Size)
	for i := range doc {
		doc[i] = "abcdefghijklmnopqrstuvwxyz "[i%27]
	}
	doc[0], doc[len(doc)-1] = '"', '"'
	var docMu sync.Mutex
	written := map[uint64][]byte{}
	sampler := newCostSampler(o.Target)
	before, cerr := sampler.sample(ctx)
	var edits int
	var editMu sync.Mutex
	interval := time.Duration(float64(time.Second) * float64(d.Writers) / d.Rate)
	end := time.Now().Add(d.Duration)
	var wg sync.WaitGroup
	for w := range d.Writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			t := time.NewTicker(interval)
			defer t.Stop()
			for time.Now().Before(end) {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				docMu.Lock()
				at := 1 + rng.IntN(d.Size-8)
				copy(doc[at:], fmt.Sprintf("w%05d", rng.IntN(100000)))
				value := append([]byte(nil), doc...)
				sctx, scancel := context.WithTimeout(ctx, d.Timeout)
				// Under the document's lock: the sets reach the server in
				// the order of the edits, as one editor's would.
				u, err := members[w].c.SetState(sctx, room, "doc", value, client.StateOptions{})
				scancel()
				if err == nil {
					written[u.GetVersion()] = value
				}
				docMu.Unlock()
				editMu.Lock()
				if err != nil {
					res.Errors["set"]++
				} else {
					edits++
				}
				editMu.Unlock()
			}
		})
	}
	wg.Wait()
	// Every member holds the last version, or the drain ends.
	docMu.Lock()
	var last uint64
	for v := range written {
		last = max(last, v)
	}
	docMu.Unlock()
	drainEnd := time.Now().Add(o.Drain)
	for _, m := range members {
		for {
			m.mu.Lock()
			e, _ := m.view.Get("doc")
			m.mu.Unlock()
			if e.Version >= last || time.Now().After(drainEnd) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	after, cerr2 := sampler.sample(ctx)
	if cerr == nil && cerr2 == nil {
		res.Server = sampler.window(before, after, 0)
	}
	st := &DocEditStats{Edits: edits}
	var violations []string
	for i, m := range members {
		m.mu.Lock()
		st.Changes += m.changes
		st.Deltas += m.deltas
		st.WireBytes += m.bytes
		st.ValueBytes += m.values
		if m.err != nil {
			violations = append(violations, fmt.Sprintf("member %d: %v", i, m.err))
		} else if err := checker.Values(m.updates, written); err != nil {
			violations = append(violations, fmt.Sprintf("member %d: %v", i, err))
		}
		if e, _ := m.view.Get("doc"); e.Version < last {
			violations = append(violations, fmt.Sprintf("member %d at version %d, last written %d", i, e.Version, last))
		}
		m.mu.Unlock()
	}
	if st.Changes > 0 {
		st.BytesPerChange = float64(st.WireBytes) / float64(st.Changes)
	}
	res.DocEdit = st
	res.Delivery = Delivery{Published: uint64(edits), Expected: uint64(edits * len(members)), Received: uint64(st.Changes), Violations: violations}
	secs := d.Duration.Seconds()
	res.Steps = []Step{{Name: fmt.Sprintf("%g edits/s", d.Rate), Rate: d.Rate, Unit: "edits/s", Seconds: secs,
		Achieved: float64(edits) / secs, DeliveriesPerSec: float64(st.Changes) / secs, Errors: res.Errors, OK: len(violations) == 0}}
	if len(violations) == 0 {
		res.Best = 0
	}
	cpu := "-"
	if res.Server != nil {
		cpu = fmt.Sprintf("%.2f s", res.Server.CPUSeconds)
	}
	res.Headline = fmt.Sprintf("docedit: %d edits of a %d B document to %d members: %d changes, %d as deltas, %.0f B of state frames per change (%.0f B as whole values); server CPU %s",
		edits, d.Size, len(members), st.Changes, st.Deltas, st.BytesPerChange, float64(st.ValueBytes)/max(float64(st.Changes), 1), cpu)
	res.Seconds = time.Since(started).Seconds()
	if len(violations) > 0 {
		return res, fmt.Errorf("%w: %v", ErrViolation, violations[0])
	}
	return res, nil
}
