package eventlog_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/corral-rt/corral/core/eventlog"
	"github.com/corral-rt/corral/events"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/reasontest"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// member is a connection of a session, as the core's session is.
type member struct{ user, id string }

func (m *member) UserID() string    { return m.user }
func (m *member) SessionID() string { return m.id }

// logStore is a history store that commits to log.
type logStore struct{ log events.Log }

func (l logStore) Events() events.Log { return l.log }

// TestReasonsHaveMetricsAndDocs: every reason the event log counts has
// its series at 0 from the start and its row in docs/SECURITY.md.
func TestReasonsHaveMetricsAndDocs(t *testing.T) {
	reg := prometheus.NewRegistry()
	eventlog.New[*member](eventlog.Options{Limit: 1, Registerer: reg})
	reasontest.Check(t, reg, "corral_core_events_dropped_total", eventlog.DropReasonNames[:])
}

// TestNoStoreNoLog: a history store without an event log makes a Log
// that keeps nothing and needs no Run.
func TestNoStoreNoLog(t *testing.T) {
	e := eventlog.New[*member](eventlog.Options{Store: struct{}{}, Limit: 1})
	if e.Store() != nil {
		t.Fatal("a store without Events gave a log")
	}
	e.EmitLeft(&member{"u", "s"}, "r") // no log: nothing, no panic
	if n := counterValue(e.Dropped(eventlog.DropQueueFull)); n != 0 {
		t.Fatalf("%v drops without a log", n)
	}
}

func TestEventLogOrderAndFilter(t *testing.T) {
	log := events.NewMemory(events.MemoryOptions{})
	e := eventlog.New[*member](eventlog.Options{Store: logStore{log}, Limit: 2, Logger: slog.Default()})
	s := &member{id: "s1", user: "u"}
	e.EmitJoined(s, "game:1", false)
	e.EmitLeft(s, "chat:1")
	e.EmitLeft(s, "game:2") // over the bound of 2: dropped, counted
	if n := counterValue(e.Dropped(eventlog.DropQueueFull)); n != 1 {
		t.Fatalf("queue_full drops = %v, want 1", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	evs := readN(t, log, 2)
	if len(evs) != 2 || evs[0].GetRoom() != "game:1" || evs[1].GetRoom() != "chat:1" {
		t.Fatalf("log holds %v, want game:1 joined then chat:1 left", evs)
	}
	cancel()
	<-done
	e.EmitLeft(s, "game:3") // after close: dropped as closed
	if n := counterValue(e.Dropped(eventlog.DropClosed)); n != 1 {
		t.Fatalf("closed drops = %v, want 1", n)
	}

	for name, tc := range map[string]struct {
		req  *corralv1.EventsRequest
		want []string // rooms kept
	}{
		"all":        {req: &corralv1.EventsRequest{}, want: []string{"game:1", "chat:1"}},
		"by room":    {req: &corralv1.EventsRequest{Rooms: []string{"game:*"}}, want: []string{"game:1"}},
		"by kind":    {req: &corralv1.EventsRequest{Kinds: []corralv1.EventKind{corralv1.EventKind_EVENT_KIND_LEFT}}, want: []string{"chat:1"}},
		"both, none": {req: &corralv1.EventsRequest{Rooms: []string{"game:*"}, Kinds: []corralv1.EventKind{corralv1.EventKind_EVENT_KIND_LEFT}}},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := eventlog.NewFilter(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range f.Keep(evs) {
				got = append(got, ev.GetRoom())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("kept %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("kept %v, want %v", got, tc.want)
				}
			}
		})
	}
	for name, req := range map[string]*corralv1.EventsRequest{
		"empty pattern": {Rooms: []string{""}},
		"unknown kind":  {Kinds: []corralv1.EventKind{corralv1.EventKind(99)}},
	} {
		if _, err := eventlog.NewFilter(req); err == nil {
			t.Errorf("%s was accepted", name)
		}
	}
}

// TestKickNamesDisconnect: the disconnected events of a kicked connection
// carry the kick's code and reason; another connection of the same
// session, and the same one's next end, do not.
func TestKickNamesDisconnect(t *testing.T) {
	log := events.NewMemory(events.MemoryOptions{})
	e := eventlog.New[*member](eventlog.Options{Store: logStore{log}, Limit: 10, Logger: slog.Default()})
	old, now := &member{"u", "s1"}, &member{"u", "s1"}
	e.RecordKick(old, corralv1.Code_CODE_SESSION_EXPIRED, "spam", time.Now())
	rooms := func(yield func(string) bool) { yield("r") }
	e.EmitDisconnected(now, rooms, false)
	e.EmitDisconnected(old, rooms, false)
	e.EmitDisconnected(old, rooms, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	evs := readN(t, log, 3)
	var got []string
	for _, ev := range evs {
		got = append(got, ev.GetDisconnected().GetReason())
	}
	if got[0] != "" || got[1] != "spam" || got[2] != "" {
		t.Fatalf("reasons %q, want only the kicked connection's first end to say spam", got)
	}
	if c := evs[1].GetDisconnected().GetCode(); c != corralv1.Code_CODE_SESSION_EXPIRED {
		t.Fatalf("code %v", c)
	}
}

// readN reads the log from its head until it holds n events.
func readN(t *testing.T, log events.Log, n int) []*corralv1.Event {
	t.Helper()
	ctx := context.Background()
	head, _ := log.Head(ctx)
	evs, err := log.Read(ctx, head, 10, 10*time.Second)
	for err == nil && len(evs) < n {
		var more []*corralv1.Event
		more, err = log.Read(ctx, evs[len(evs)-1].GetPosition(), 10, 10*time.Second)
		evs = append(evs, more...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// TestMemoryAppendAllocs: appending to the memory log, which never waits,
// takes no context and timer of a deadline per batch (a batch is an event
// when Run keeps up: a reconnect herd's every join and disconnect); the
// old code's 4 more allocations per event fail the bound.
func TestMemoryAppendAllocs(t *testing.T) {
	log := events.NewMemory(events.MemoryOptions{})
	e := eventlog.New[*member](eventlog.Options{Store: logStore{log}, Limit: 1 << 20, Logger: slog.Default()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	s := &member{id: "s1", user: "u"}
	pos, _ := log.Head(ctx)
	one := func() {
		e.EmitJoined(s, "game:1", false)
		for {
			evs, err := log.Read(ctx, pos, 1, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) > 0 {
				pos = evs[0].GetPosition()
				return
			}
		}
	}
	// 13 here, 17 on the old code.
	if n := testing.AllocsPerRun(100, one); n > 15 {
		t.Fatalf("%v allocations per event emitted, appended and read, want at most 15", n)
	}
}

// deadlineLog is a log other than Memory: its appends may wait.
type deadlineLog struct {
	events.Log
	deadline chan bool
}

func (l deadlineLog) Append(ctx context.Context, evs []*corralv1.Event) error {
	_, ok := ctx.Deadline()
	l.deadline <- ok
	return l.Log.Append(ctx, evs)
}

// TestAppendDeadline: a log other than Memory is appended to within a
// deadline, as before.
func TestAppendDeadline(t *testing.T) {
	log := deadlineLog{events.NewMemory(events.MemoryOptions{}), make(chan bool, 1)}
	e := eventlog.New[*member](eventlog.Options{Store: logStore{log}, Limit: 16, Logger: slog.Default()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	e.EmitJoined(&member{id: "s1", user: "u"}, "game:1", false)
	if !<-log.deadline {
		t.Fatal("an append to a log other than Memory had no deadline")
	}
}
