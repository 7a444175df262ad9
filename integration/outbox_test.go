package integration_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corral-rt/corral/apiclient"
	"github.com/corral-rt/corral/checker"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/faultproxy"
	"github.com/corral-rt/corral/internal/pgtest"
	"github.com/corral-rt/corral/internal/readytest"
	"github.com/corral-rt/corral/internal/redistest"
)

// outboxApp is a writing application: one writer per room commits its
// message to its own table and the outbox row in one transaction, every
// fifth rolled back instead; it remembers what it committed, in order.
type outboxApp struct {
	pool *pgxpool.Pool
	mu   sync.Mutex          // guards the following fields
	done map[string][]string // room -> committed payloads in commit order
}

func (a *outboxApp) committed(room string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.done[room])
}

// waitCommitted waits until the app committed n more rows, in all its
// rooms, than when called: the tests let the writers work for a number of
// rows, not for a time, so a slow machine does not leave a window empty.
func (a *outboxApp) waitCommitted(t *testing.T, n int) {
	t.Helper()
	total := func() int {
		a.mu.Lock()
		defer a.mu.Unlock()
		k := 0
		for _, rows := range a.done {
			k += len(rows)
		}
		return k
	}
	from := total()
	if !eventually.Within(30*time.Second, func() bool { return total() >= from+n }) {
		t.Fatalf("the app committed %d rows in 30 s, want %d", total()-from, n)
	}
}

// write runs one room's writer until ctx ends.
func (a *outboxApp) write(ctx context.Context, t *testing.T, room string) {
	for k := 0; ctx.Err() == nil; k++ {
		p := fmt.Sprintf("%s-%d", room, k)
		tx, err := a.pool.Begin(ctx)
		if err != nil {
			return
		}
		_, err = tx.Exec(ctx, "INSERT INTO chat_messages (room, body) VALUES ($1, $2)", room, p)
		if err == nil {
			_, err = tx.Exec(ctx, "INSERT INTO corral_outbox (room, payload) VALUES ($1, $2)", room, []byte(p))
		}
		if err != nil || k%5 == 4 {
			tx.Rollback(context.WithoutCancel(ctx))
			continue
		}
		// Not under ctx: a commit cut by the writer's end may have
		// happened, and then the app would not know what it committed.
		if err := tx.Commit(context.WithoutCancel(ctx)); err != nil {
			t.Errorf("commit %s: %v", p, err)
			return
		}
		a.mu.Lock()
		a.done[room] = append(a.done[room], p)
		a.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
}

// startOutboxApp starts Postgres, creates the app's table and the outbox
// (the migrations, as an app would apply them) and returns the app.
func startOutboxApp(t *testing.T) (*pgtest.Server, *outboxApp) {
	t.Helper()
	pg := pgtest.Start(t)
	pool, err := pgxpool.New(context.Background(), pg.URL+"&pool_max_conns=4")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(context.Background(), "CREATE TABLE chat_messages (id bigserial PRIMARY KEY, room text, body text)"); err != nil {
		t.Fatal(err)
	}
	return pg, &outboxApp{pool: pool, done: map[string][]string{}}
}

// waitOutboxEmpty waits until corral deleted every committed row.
func waitOutboxEmpty(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var n int
	var err error
	if !eventually.Within(30*time.Second, func() bool {
		err = pool.QueryRow(context.Background(), "SELECT count(*) FROM corral_outbox").Scan(&n)
		return err == nil && n == 0
	}) {
		t.Fatalf("corral_outbox still holds %d rows after 30s (%v)", n, err)
	}
}

// readRoom reads a room's whole history through the internal API.
func readRoom(t *testing.T, api string, room string) (payloads []string, epoch string) {
	t.Helper()
	rc := apiclient.New(api, "", nil)
	var after uint64
	for {
		res, err := rc.History(testCtx(t), &corralv1.HistoryRequest{Room: room, AfterSeq: after})
		if err != nil {
			t.Fatalf("history of %s: %v", room, err)
		}
		chk := res
		for _, m := range chk.GetMessages() {
			payloads = append(payloads, string(m.GetPayload()))
			after = m.GetSeq()
		}
		if !chk.GetMore() {
			return payloads, chk.GetEpoch()
		}
	}
}

// duplicates scrapes corral_outbox_rows_total{result="duplicate"}.
func duplicates(t *testing.T, metricsURL string) int {
	t.Helper()
	res, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	m := regexp.MustCompile(`corral_outbox_rows_total\{result="duplicate"\} (\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no corral_outbox_rows_total in %s", metricsURL)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestOutboxKill9Redis: an application commits (and rolls back) messages
// with their outbox rows in two rooms while corral, on a slow Redis, is
// killed
// with SIGKILL again and again — until one kill landed between a publish
// and its delete (the restarted corral counts a duplicate), and at least
// three times. Afterwards every committed row is in its room's history
// once, in commit order, and no rolled-back row is: the checker sees one
// order, no gap, no duplicate.
func TestOutboxKill9Redis(t *testing.T) {
	bin := buildCorral(t)
	redisAddr := redistest.Start(t)
	pg, app := startOutboxApp(t)
	// corral reaches Redis through 5 ms of latency: a batch's publishes
	// take a while, and a kill during them leaves published rows that
	// were not deleted.
	tox, err := faultproxy.StartToxic(redisAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tox.Close)
	if err := tox.Add("slow", "latency", "upstream", map[string]any{"latency": 5}); err != nil {
		t.Fatal(err)
	}
	addr, internal := freeAddr(t), freeAddr(t)
	p := &process{t: t, bin: bin, args: []string{
		"serve", "--insecure-dev", "--addr", addr, "--internal-addr", internal, "--log-level", "warn",
		"--redis", "redis://" + tox.Addr(), "--redis-prefix", redistest.Prefix(t),
		"--outbox", pg.URL,
	}}
	p.start()
	t.Cleanup(p.kill9)
	readytest.Wait(t, "http://"+addr+"/readyz")

	ctx, stop := context.WithCancel(context.Background())
	rooms := []string{"outbox:a", "outbox:b"}
	var wg sync.WaitGroup
	for _, room := range rooms {
		wg.Go(func() { app.write(ctx, t, room) })
	}
	sawDuplicate := false
	for kill := 0; kill < 3 || !sawDuplicate; kill++ {
		if kill == 15 {
			t.Fatal("15 kills and none landed between a publish and its delete")
		}
		app.waitCommitted(t, 30+10*kill) // a kill later into each run
		p.kill9()
		app.waitCommitted(t, 20) // rows committed while corral is down
		p.start()
		readytest.Wait(t, "http://"+addr+"/readyz")
		// The restarted corral re-publishes what its predecessor had
		// published and not deleted, as duplicates, before anything else
		// (once connected and leader).
		sawDuplicate = sawDuplicate || eventually.Within(2*time.Second, func() bool {
			return duplicates(t, "http://"+internal+"/metrics") > 0
		})
	}
	stop()
	wg.Wait()
	waitOutboxEmpty(t, app.pool)

	chk := checker.New()
	for _, room := range rooms {
		got, _ := readRoom(t, "http://"+internal, room)
		want := app.committed(room)
		if len(want) < 50 {
			t.Fatalf("%s: the app committed only %d rows", room, len(want))
		}
		for i, p := range got {
			chk.Received("history", room, uint64(i+1), p)
			chk.Acked(room, uint64(i+1), p)
		}
		chk.Member("history", room, 0, uint64(len(got)))
		if !slices.Equal(got, want) {
			t.Errorf("%s: history holds %d rows, the app committed %d; first difference at %d",
				room, len(got), len(want), firstDiff(got, want))
		}
	}
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestOutboxKill9Memory: the same on the memory engine, whose history dies
// with the process: after the last kill the restarted corral's history of
// each room holds, once and in commit order, every row the app committed
// since that kill, preceded only by rows of the batch the dead process had
// published and not deleted; no rolled-back row. Rows delivered before a
// kill went to the members of an epoch that no longer exists (docs/OUTBOX.md).
func TestOutboxKill9Memory(t *testing.T) {
	bin := buildCorral(t)
	pg, app := startOutboxApp(t)
	addr, internal := freeAddr(t), freeAddr(t)
	p := &process{t: t, bin: bin, args: []string{
		"serve", "--insecure-dev", "--addr", addr, "--internal-addr", internal, "--log-level", "warn",
		"--outbox", pg.URL,
	}}
	p.start()
	t.Cleanup(p.kill9)
	readytest.Wait(t, "http://"+addr+"/readyz")

	ctx, stop := context.WithCancel(context.Background())
	const room = "outbox:m"
	var wg sync.WaitGroup
	wg.Go(func() { app.write(ctx, t, room) })
	app.waitCommitted(t, 100)
	p.kill9()
	atKill := len(app.committed(room))
	app.waitCommitted(t, 40) // rows committed while corral is down
	p.start()
	readytest.Wait(t, "http://"+addr+"/readyz")
	app.waitCommitted(t, 100) // rows committed after the restart
	stop()
	wg.Wait()
	waitOutboxEmpty(t, app.pool)

	got, _ := readRoom(t, "http://"+internal, room)
	want := app.committed(room)
	if len(got) == 0 {
		t.Fatal("nothing delivered after the restart")
	}
	start := slices.Index(want, got[0])
	if start < 0 {
		t.Fatalf("history begins with %q, which the app never committed", got[0])
	}
	if !slices.Equal(got, want[start:]) {
		t.Fatalf("history after the kill is not the committed rows %d.. in order: differs at %d", start, firstDiff(got, want[start:]))
	}
	if start > atKill {
		t.Fatalf("rows %d..%d committed before the restart were lost", atKill, start)
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func tableExists(url string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return false, err
	}
	defer pool.Close()
	var ok bool
	err = pool.QueryRow(ctx, "SELECT to_regclass('corral_outbox') IS NOT NULL").Scan(&ok)
	return ok, err
}
