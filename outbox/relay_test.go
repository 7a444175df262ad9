package outbox_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/pgtest"
	"github.com/corral-rt/corral/outbox"
)

// fakeCore stands for the core's Publish: it remembers idempotency keys
// (as the history's dedupe window does) and records each room's messages
// in the order they were appended.
type fakeCore struct {
	mu    sync.Mutex // guards the following fields
	keys  map[string]bool
	rooms map[string][]string // room -> payloads in append order
	calls map[string]int      // key -> Publish calls
	// fail, when set, answers a publish instead of appending.
	fail func(req *corralv1.PublishRequest) error
}

func newFakeCore() *fakeCore {
	return &fakeCore{keys: map[string]bool{}, rooms: map[string][]string{}, calls: map[string]int{}}
}

func (f *fakeCore) Publish(_ context.Context, req *corralv1.PublishRequest) (*corralv1.PublishResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[req.GetIdempotencyKey()]++
	if f.fail != nil {
		if err := f.fail(req); err != nil {
			return nil, err
		}
	}
	if f.keys[req.GetIdempotencyKey()] {
		return &corralv1.PublishResponse{Duplicate: true}, nil
	}
	f.keys[req.GetIdempotencyKey()] = true
	f.rooms[req.GetRoom()] = append(f.rooms[req.GetRoom()], string(req.GetPayload()))
	return &corralv1.PublishResponse{Seq: uint64(len(f.rooms[req.GetRoom()]))}, nil
}

func (f *fakeCore) delivered() map[string][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]string{}
	for r, p := range f.rooms {
		out[r] = append([]string(nil), p...)
	}
	return out
}

func (f *fakeCore) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.rooms {
		n += len(p)
	}
	return n
}

// setup starts Postgres and applies the migrations.
func setup(t *testing.T) (*pgtest.Server, *pgxpool.Pool) {
	t.Helper()
	pg := pgtest.Start(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, conn); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	conn.Close(ctx)
	pool, err := pgxpool.New(ctx, pg.URL+"&pool_max_conns=20")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, "CREATE TABLE app_log (payload text PRIMARY KEY, room text NOT NULL, xid xid8 NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return pg, pool
}

// startRelay runs a relay until the returned stop is called (or the test
// ends).
func startRelay(t *testing.T, url string, pub outbox.Publisher, reg prometheus.Registerer) (stop func()) {
	t.Helper()
	r, err := outbox.New(outbox.Config{URL: url, Batch: 50, Poll: 200 * time.Millisecond, Registerer: reg}, pub)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// write is one application transaction: the message in the app's table
// and its outbox row, then a pause (other writers of the room wait), then
// commit or, when rollback, roll back.
func write(ctx context.Context, pool *pgxpool.Pool, room, payload string, pause time.Duration, rollback bool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "INSERT INTO app_log (payload, room, xid) VALUES ($1, $2, pg_current_xact_id())", payload, room); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO corral_outbox (room, payload) VALUES ($1, $2)", room, []byte(payload)); err != nil {
		return err
	}
	time.Sleep(pause)
	if rollback {
		return tx.Rollback(ctx)
	}
	return tx.Commit(ctx)
}

// committedOrder is, per room, the payloads the app committed in the order
// their transactions committed (by commit timestamp).
func committedOrder(t *testing.T, pool *pgxpool.Pool) map[string][]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT room, payload FROM app_log
		ORDER BY pg_xact_commit_timestamp(xid::text::xid), xid`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for rows.Next() {
		var room, payload string
		if err := rows.Scan(&room, &payload); err != nil {
			t.Fatal(err)
		}
		out[room] = append(out[room], payload)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitDelivered waits until n messages were delivered.
func waitDelivered(t *testing.T, f *fakeCore, n int) {
	t.Helper()
	if !eventually.Within(30*time.Second, func() bool { return f.count() >= n }) {
		t.Fatalf("delivered %d of %d after 30s", f.count(), n)
	}
}

// checkSame fails unless every room got exactly the committed payloads in
// commit order: none lost, none twice, none rolled back.
func checkSame(t *testing.T, want, got map[string][]string) {
	t.Helper()
	for room, w := range want {
		g := got[room]
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("room %s: delivered %d %v\nwant (commit order) %d %v", room, len(g), g, len(w), w)
		}
	}
	for room := range got {
		if _, ok := want[room]; !ok {
			t.Errorf("room %s delivered but never committed: %v", room, got[room])
		}
	}
}

// TestCommitOrderPerRoom: writers of the same rooms commit concurrently,
// each pausing between its insert and its commit, some rolling back; every
// committed row is delivered once, in commit order per room, and no
// rolled-back row is. Without the room lock of the insert trigger, a
// writer that inserts first and commits last is delivered before one that
// committed ahead of it whenever the relay reads both in one batch.
func TestCommitOrderPerRoom(t *testing.T) {
	pg, pool := setup(t)
	f := newFakeCore()
	startRelay(t, pg.URL, f, nil)

	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	committed := 0
	for w := range 16 {
		wg.Go(func() {
			for i := range 25 {
				room := fmt.Sprintf("chat:%d", (w+i)%3)
				rollback := rand.N(5) == 0
				err := write(ctx, pool, room, fmt.Sprintf("w%d-%d", w, i), time.Duration(rand.N(3))*time.Millisecond, rollback)
				if err != nil {
					t.Error(err)
					return
				}
				if !rollback {
					mu.Lock()
					committed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	waitDelivered(t, f, committed)
	// The relay deletes a batch after publishing it: once the table is
	// empty, a row delivered twice would have shown.
	waitEmpty(t, pool)
	checkSame(t, committedOrder(t, pool), f.delivered())
}

// TestInsertFirstCommitLast: the case the room lock exists for, made
// deterministic. A inserts, B inserts (and waits for A's room lock), A
// commits after a pause, then B: both are read in one batch and delivered
// A, B — the order they committed in.
func TestInsertFirstCommitLast(t *testing.T) {
	pg, pool := setup(t)
	ctx := context.Background()
	a, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Rollback(ctx)
	if _, err := a.Exec(ctx, "INSERT INTO corral_outbox (room, payload) VALUES ('r', 'A')"); err != nil {
		t.Fatal(err)
	}
	bDone := make(chan error, 1)
	go func() { bDone <- write(ctx, pool, "r", "B", 0, false) }()
	select {
	case err := <-bDone:
		t.Fatalf("B committed while A held the room's lock: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	f := newFakeCore()
	startRelay(t, pg.URL, f, nil)
	waitDelivered(t, f, 2)
	if got := f.delivered()["r"]; fmt.Sprint(got) != "[A B]" {
		t.Fatalf("delivered %v, want [A B] (commit order)", got)
	}
}

// TestCrashBetweenPublishAndDelete: a relay that stops after publishing and
// before deleting leaves its rows; the next relay publishes them again,
// and their idempotency keys make that a duplicate: each row is delivered
// once.
func TestCrashBetweenPublishAndDelete(t *testing.T) {
	pg, pool := setup(t)
	ctx := context.Background()
	for i := range 20 {
		if err := write(ctx, pool, "r", fmt.Sprint(i), 0, false); err != nil {
			t.Fatal(err)
		}
	}
	f := newFakeCore()
	crashed := make(chan struct{})
	reg := prometheus.NewRegistry()
	stop := startRelay(t, pg.URL, crashAfter{f, "9", crashed}, nil)
	<-crashed
	stop()
	var left int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM corral_outbox").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left == 0 {
		t.Fatal("no row left after the crash: the test did not stop the relay before its delete")
	}
	startRelay(t, pg.URL, f, reg)
	waitDelivered(t, f, 20)
	want := make([]string, 20)
	for i := range want {
		want[i] = fmt.Sprint(i)
	}
	waitEmpty(t, pool)
	if got := f.delivered()["r"]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	dup := testutil.ToFloat64(metric(t, reg, "corral_outbox_rows_total", "duplicate"))
	if dup == 0 {
		t.Fatal("the second relay counted no duplicate: it did not re-publish the rows left")
	}
}

// crashAfter publishes, and after the message whose payload is at it
// closes crashed and blocks until the relay is stopped: published, never
// deleted.
type crashAfter struct {
	*fakeCore
	at      string
	crashed chan struct{}
}

func (c crashAfter) Publish(ctx context.Context, req *corralv1.PublishRequest) (*corralv1.PublishResponse, error) {
	res, err := c.fakeCore.Publish(ctx, req)
	if string(req.GetPayload()) == c.at {
		close(c.crashed)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return res, err
}

// TestOneRelayDelivers: of two relays on one database, only the one
// holding the lock publishes; when it stops, the other takes over and
// every row reaches the room once, in commit order. Both publish to one
// core, as in production: rows the first published but had not yet
// deleted when it stopped are published again by the second under the
// same idempotency keys, and the core's dedupe answers them duplicate.
func TestOneRelayDelivers(t *testing.T) {
	pg, pool := setup(t)
	ctx := context.Background()
	core := newFakeCore()
	pa, pb := &countingPub{core: core}, &countingPub{core: core}
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	stopA := startRelay(t, pg.URL, pa, regA)
	waitLeader(t, regA)
	startRelay(t, pg.URL, pb, regB)
	for i := range 50 {
		if err := write(ctx, pool, "r", fmt.Sprint(i), 0, false); err != nil {
			t.Fatal(err)
		}
	}
	waitDelivered(t, core, 50)
	if n := pb.count(); n != 0 {
		t.Fatalf("the standby published %d rows", n)
	}
	stopA()
	waitLeader(t, regB)
	for i := 50; i < 100; i++ {
		if err := write(ctx, pool, "r", fmt.Sprint(i), 0, false); err != nil {
			t.Fatal(err)
		}
	}
	waitDelivered(t, core, 100)
	waitEmpty(t, pool)
	want := make([]string, 100)
	for i := range want {
		want[i] = fmt.Sprint(i)
	}
	checkSame(t, map[string][]string{"r": want}, core.delivered())
	if pb.count() == 0 {
		t.Fatal("the second relay published nothing after taking over")
	}
}

// countingPub passes publishes to one core and counts them: which relay
// published what.
type countingPub struct {
	core *fakeCore
	mu   sync.Mutex // guards n
	n    int
}

func (c *countingPub) Publish(ctx context.Context, req *corralv1.PublishRequest) (*corralv1.PublishResponse, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.core.Publish(ctx, req)
}

func (c *countingPub) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestBackpressureAndFailedRows: while the core refuses as overloaded the
// relay waits and loses nothing; a row the core can never take moves to
// corral_outbox_failed and its room's later rows still go.
func TestBackpressureAndFailedRows(t *testing.T) {
	pg, pool := setup(t)
	ctx := context.Background()
	f := newFakeCore()
	var mu sync.Mutex
	refusals := 5
	f.fail = func(req *corralv1.PublishRequest) error {
		mu.Lock()
		defer mu.Unlock()
		if string(req.GetPayload()) == "bad" {
			return connect.NewError(connect.CodeInvalidArgument, "core: payload exceeds the room's limit")
		}
		if refusals > 0 {
			refusals--
			return connect.NewError(connect.CodeResourceExhausted, "core: overloaded")
		}
		return nil
	}
	for _, p := range []string{"1", "2", "bad", "3"} {
		if err := write(ctx, pool, "r", p, 0, false); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	startRelay(t, pg.URL, f, reg)
	waitDelivered(t, f, 3)
	waitEmpty(t, pool)
	if got := f.delivered()["r"]; fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("delivered %v, want [1 2 3]", got)
	}
	var reason string
	if err := pool.QueryRow(ctx, "SELECT reason FROM corral_outbox_failed WHERE payload = 'bad'").Scan(&reason); err != nil {
		t.Fatalf("the bad row is not in corral_outbox_failed: %v", err)
	}
	if w := testutil.ToFloat64(metric(t, reg, "corral_outbox_waits_total", "overloaded")); w != 5 {
		t.Fatalf("waits{overloaded} = %v, want 5", w)
	}
}

func waitEmpty(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var n int
	if !eventually.Within(10*time.Second, func() bool {
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM corral_outbox").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	}) {
		t.Fatalf("%d rows still in corral_outbox after 10s", n)
	}
}

func waitLeader(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	eventually.True(t, 10*time.Second, func() bool {
		return testutil.ToFloat64(metric(t, reg, "corral_outbox_leader", "")) == 1
	}, "the leader")
}

// metric finds one gauge or counter of reg by name and label value ("" for
// none).
func metric(t *testing.T, reg *prometheus.Registry, name, label string) prometheus.Collector {
	t.Helper()
	return collectorFunc(func(ch chan<- prometheus.Metric) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Error(err)
			return
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				if label != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != label) {
					continue
				}
				v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
				ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, "", nil, nil), prometheus.GaugeValue, v)
				return
			}
		}
	})
}

type collectorFunc func(chan<- prometheus.Metric)

func (f collectorFunc) Describe(chan<- *prometheus.Desc)    {}
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }
