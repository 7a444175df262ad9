package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// OutboxBurst is W4's burst of persisted chat posts written by an
// application into its own PostgreSQL (pool of Pool connections, Workers
// request handlers), delivered to Sockets members of one room. Mode
// "outbox": each post and its corral_outbox row in one transaction, corral
// (started with --outbox on DB) publishes them. Mode "dual-write": the
// post is committed, then published through the internal API; for
// CrashFor from CrashAt the application "crashes" between the two (every
// post committed then is never published), which is what a dual write
// loses.
type OutboxBurst struct {
	DB          string
	Mode        string
	Sockets     int
	Rate        float64
	Duration    time.Duration
	Pool        int
	Workers     int
	Size        int
	ConnectRate float64
	CrashAt     time.Duration
	CrashFor    time.Duration
	SLO         time.Duration
}

// NewOutboxBurst returns W4's figures: 6,000 members in one room, 180
// posts/s for 10 s, the app's pool bounded at 10.
func NewOutboxBurst() *OutboxBurst {
	return &OutboxBurst{
		Mode: "outbox", Sockets: 6000, Rate: 180, Duration: 10 * time.Second,
		Pool: 10, Workers: 50, Size: 100, ConnectRate: 2000,
		CrashAt: 5 * time.Second, CrashFor: 500 * time.Millisecond, SLO: 500 * time.Millisecond,
	}
}

func (c *OutboxBurst) Name() string { return "outbox-burst" }

func (c *OutboxBurst) Describe() string {
	return `W4 (seed 004) through the Postgres outbox (docs/OUTBOX.md).

An application persists chat posts in its own PostgreSQL (--db, the URL
corral runs with as --outbox) at --rate posts/s for --duration, from
--workers handlers sharing a pool of --pool connections, to --sockets
members of one room. --mode outbox writes the post and its corral_outbox
row in one transaction; --mode dual-write commits the post and then calls
RoomService Publish, and "crashes" for --crash-for at --crash-at (what it
committed then is never published). Reports delivery latency (post
scheduled -> member received), the pool's acquire wait, the outbox's lag
(rows and seconds, sampled every 50 ms) and, from the room's history
against the committed posts, what was lost and what duplicated.`
}

func (c *OutboxBurst) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.DB, "db", c.DB, "the application's PostgreSQL `URL` (corral's --outbox)")
	fs.StringVar(&c.Mode, "mode", c.Mode, "outbox or dual-write")
	fs.IntVar(&c.Sockets, "sockets", c.Sockets, "members of the room")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "posts per `second`")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "how long to post")
	fs.IntVar(&c.Pool, "pool", c.Pool, "the application's pool `size`")
	fs.IntVar(&c.Workers, "workers", c.Workers, "the application's request handlers")
	fs.IntVar(&c.Size, "size", c.Size, "payload `bytes`")
	fs.Float64Var(&c.ConnectRate, "connect-rate", c.ConnectRate, "new connections per `second` while setting up")
	fs.DurationVar(&c.CrashAt, "crash-at", c.CrashAt, "dual-write: when the application crashes between commit and publish")
	fs.DurationVar(&c.CrashFor, "crash-for", c.CrashFor, "dual-write: how long it stays down")
	fs.DurationVar(&c.SLO, "slo", c.SLO, "passes with delivery p99 within this, nothing lost or duplicated")
}

func (c *OutboxBurst) params() map[string]any {
	return map[string]any{
		"mode": c.Mode, "sockets": c.Sockets, "rate": c.Rate, "duration": c.Duration.String(),
		"pool": c.Pool, "workers": c.Workers, "size": c.Size, "connect-rate": c.ConnectRate,
		"crash-at": c.CrashAt.String(), "crash-for": c.CrashFor.String(), "slo": c.SLO.String(),
	}
}

// OutboxStats are what outbox-burst measures besides delivery.
type OutboxStats struct {
	Mode      string `json:"mode"`
	Committed int    `json:"committed"`
	// Pending are committed rows still in corral_outbox when the run
	// stopped waiting (--drain after the last post): late, not lost.
	Pending   int     `json:"pending"`
	Lost      int     `json:"lost"`
	Duplicate int     `json:"duplicate"`
	PoolWait  Latency `json:"poolWait"`
	// LagRows and LagSeconds are the most rows waiting in corral_outbox
	// and the oldest row's largest age, sampled every 50 ms.
	LagRows    int     `json:"lagRows"`
	LagSeconds float64 `json:"lagSeconds"`
}

func (c *OutboxBurst) Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	if c.DB == "" || (c.Mode != "outbox" && c.Mode != "dual-write") || c.Sockets <= 0 || c.Rate <= 0 || c.Pool <= 0 || c.Workers <= 0 {
		return nil, errors.New("bench: outbox-burst needs --db, --mode outbox|dual-write and positive --sockets, --rate, --pool, --workers")
	}
	restore, err := prepare(ctx, o, c.Sockets, true)
	if err != nil {
		return nil, err
	}
	defer restore()
	pcfg, err := pgxpool.ParseConfig(c.DB)
	if err != nil {
		return nil, errors.New("bench: --db does not parse")
	}
	pcfg.MaxConns = int32(c.Pool)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("bench: --db: %w", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS chat_posts (id bigserial PRIMARY KEY, room text NOT NULL, body bytea NOT NULL)"); err != nil {
		return nil, fmt.Errorf("bench: --db: %w", err)
	}
	api := apiClient(o.Target)

	p := steady(c.Rate, c.Duration)
	setup := time.Duration(float64(c.Sockets)/c.ConnectRate*float64(time.Second)) + 30*time.Second
	horizon := setup + p.duration() + o.Drain + 2*time.Minute
	ctx, cancel := context.WithTimeout(ctx, horizon)
	defer cancel()
	room := roomNamer(runID(), 1)
	r := newRun(c.Name(), o, horizon)
	f := newFleet(r, room)
	r.startTicker(ctx)
	defer r.stopTicker()
	r.setPhase("connecting")
	// Members are pinged from their dial on: a fleet that dials for
	// longer than two heartbeats would lose its first members to the
	// server's silence timeout (4003) while the last still dial.
	kctx, stopKeep := context.WithCancel(ctx)
	defer stopKeep()
	go f.keepAlive(kctx)
	if f.connect(ctx, c.Sockets, steady(c.ConnectRate, setup), 1024) == 0 {
		f.closeAll(10 * time.Second)
		return nil, fmt.Errorf("bench: no client could connect to %s: %v", o.Target.WS, r.errors())
	}

	// The outbox's lag, sampled on a connection of its own (not the app's
	// pool).
	var lagRows atomic.Int64
	var lagSec atomic.Uint64 // float64 bits
	lctx, stopLag := context.WithCancel(ctx)
	lagDone := make(chan struct{})
	go func() {
		defer close(lagDone)
		conn, err := pgx.Connect(lctx, c.DB)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for lctx.Err() == nil {
			var n int64
			var age float64
			if conn.QueryRow(lctx, "SELECT count(*), coalesce(extract(epoch FROM clock_timestamp() - min(created_at)), 0)::float8 FROM corral_outbox").Scan(&n, &age) == nil {
				lagRows.Store(max(lagRows.Load(), n))
				if age > float64FromBits(lagSec.Load()) {
					lagSec.Store(float64Bits(age))
				}
			}
			sleepCtx(lctx, 50*time.Millisecond)
		}
	}()

	var poolWait histogram
	var mu sync.Mutex
	committed := map[int]bool{}
	name := room(0)
	start := time.Now().Add(100 * time.Millisecond)
	crashFrom, crashTo := start.Add(c.CrashAt), start.Add(c.CrashAt+c.CrashFor)
	r.steps = stepRecs([]Step{{Name: fmt.Sprintf("%g posts/s", c.Rate), Rate: c.Rate, Unit: "posts/s", Seconds: c.Duration.Seconds()}}, start)
	r.markWindow(ctx)
	r.setPhase("posting")
	paceGo(ctx, start, p, int(c.Rate*c.Duration.Seconds()), c.Workers, func(k int, at time.Time) {
		r.sentOne(at)
		body := payload(nil, at, k, c.Size)
		t0 := time.Now()
		conn, err := pool.Acquire(ctx)
		poolWait.observe(time.Since(t0))
		if err != nil {
			r.fail("app:acquire", at.UnixNano())
			return
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO chat_posts (room, body) VALUES ($1, $2)", name, body); err != nil {
				return err
			}
			if c.Mode == "outbox" {
				_, err := tx.Exec(ctx, "INSERT INTO corral_outbox (room, payload, idempotency_key) VALUES ($1, $2, $3)", name, body, fmt.Sprint("post:", k))
				return err
			}
			return nil
		})
		conn.Release()
		if err != nil {
			r.fail("app:commit", at.UnixNano())
			return
		}
		mu.Lock()
		committed[k] = true
		mu.Unlock()
		if c.Mode == "dual-write" {
			if now := time.Now(); !now.Before(crashFrom) && now.Before(crashTo) {
				return // crashed between the commit and the publish
			}
			if _, err := api.Publish(ctx, &corralv1.PublishRequest{Room: name, Payload: body, IdempotencyKey: fmt.Sprint("post:", k)}); err != nil {
				r.fail("publish:"+publishErrorKind(err), at.UnixNano())
			}
		}
	})

	r.setPhase("outbox")
	// Every committed row published: the outbox empty (the dual write has
	// nothing there). What is left after the drain is pending.
	pending := map[int]bool{}
	for deadline := time.Now().Add(o.Drain); ; {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM corral_outbox").Scan(&n); err != nil || n == 0 {
			break
		}
		if time.Now().After(deadline) {
			rows, err := pool.Query(ctx, "SELECT payload FROM corral_outbox")
			if err == nil {
				for rows.Next() {
					var b []byte
					var v struct{ N int }
					if rows.Scan(&b) == nil && json.Unmarshal(b, &v) == nil {
						pending[v.N] = true
					}
				}
				rows.Close()
			}
			break
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	stopLag()
	<-lagDone

	// What the room holds, against what the application committed: the
	// server must keep the whole burst (history at least the posts).
	st := &OutboxStats{Mode: c.Mode, Pending: len(pending), PoolWait: poolWait.summary(), LagRows: int(lagRows.Load()), LagSeconds: float64FromBits(lagSec.Load())}
	seen := map[int]int{}
	var after uint64
	for {
		h, err := api.History(ctx, &corralv1.HistoryRequest{Room: name, AfterSeq: after})
		if err != nil {
			stopKeep()
			f.closeAll(10 * time.Second)
			return nil, fmt.Errorf("bench: history: %w", err)
		}
		for _, m := range h.GetMessages() {
			var v struct{ N int }
			_ = json.Unmarshal(m.GetPayload(), &v)
			seen[v.N]++
			after = m.GetSeq()
			r.ledger.add(ack{room: name, seq: m.GetSeq(), step: r.steps[0]})
		}
		if !h.GetMore() {
			break
		}
	}
	mu.Lock()
	st.Committed = len(committed)
	for k := range committed {
		if seen[k] == 0 && !pending[k] {
			st.Lost++
		}
	}
	mu.Unlock()
	for _, n := range seen {
		st.Duplicate += max(n-1, 0)
	}
	return r.conclude(ctx, f, c.params(), stopKeep, c.SLO, func(res *Result, best *Step) {
		res.Outbox = st
		res.Headline = fmt.Sprintf("outbox-burst %s, %d members, %g posts/s: delivery p50 %.1f ms p99 %.1f ms; pool wait p50 %.2f ms p99 %.2f ms; outbox lag max %d rows %.3f s; committed %d (%.0f/s), pending %d, lost %d, duplicated %d",
			c.Mode, f.count(), c.Rate, res.Latency.P50, res.Latency.P99, st.PoolWait.P50, st.PoolWait.P99, st.LagRows, st.LagSeconds,
			st.Committed, float64(st.Committed)/c.Duration.Seconds(), st.Pending, st.Lost, st.Duplicate)
	})
}

func float64Bits(f float64) uint64     { return math.Float64bits(f) }
func float64FromBits(b uint64) float64 { return math.Float64frombits(b) }

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
