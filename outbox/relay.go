package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connectproto"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// Publisher is what the relay publishes through: the core's internal API
// (core/api's Service.Publish). Its errors are Connect errors: resource_exhausted
// (overloaded: the relay waits the hinted delay) and invalid_argument (the
// row can never be published: it moves to corral_outbox_failed); any other
// is retried with backoff.
type Publisher interface {
	Publish(ctx context.Context, req *corralv1.PublishRequest) (*corralv1.PublishResponse, error)
}

// Config is a relay's settings; zero values are defaults.
type Config struct {
	// URL is the application database's postgres:// URL.
	URL string
	// Batch bounds the rows read, published and deleted in one pass.
	// Default 500.
	Batch int
	// Poll is how often the relay reads even without a notification (a
	// NOTIFY lost with a dropped connection), and how often a standby core
	// tries to take over. Default 1s.
	Poll time.Duration
	// Migrate applies the migrations at start (see [Migrate]).
	Migrate bool
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Registerer for the metrics; nil: not registered.
	Registerer prometheus.Registerer
}

// leaderLock is the session advisory lock whose holder delivers
// ('cor' + 's'); room locks (the insert trigger) are in another namespace.
const leaderLock = 1668247155

// Relay delivers the outbox of one database through a Publisher.
type Relay struct {
	cfg   Config
	pub   Publisher
	m     metrics
	crash crashPoint // the CrashEnv test hook; off by default
}

// New returns a relay; Run starts it.
func New(cfg Config, pub Publisher) (*Relay, error) {
	if cfg.URL == "" {
		return nil, errors.New("outbox: no database URL")
	}
	if _, err := pgx.ParseConfig(cfg.URL); err != nil {
		// pgx's message may quote the URL, password included.
		return nil, errors.New("outbox: the database URL does not parse (postgres://user:password@host:port/db)")
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	crash, err := parseCrash(os.Getenv(CrashEnv))
	if err != nil {
		return nil, err
	}
	if crash.step != crashNone {
		cfg.Logger.Warn("outbox: test crash point set: this process will kill itself", "env", CrashEnv)
	}
	r := &Relay{cfg: cfg, pub: pub, m: newMetrics(), crash: crash}
	if cfg.Registerer != nil {
		if err := r.m.register(cfg.Registerer); err != nil {
			return nil, fmt.Errorf("outbox: metrics: %w", err)
		}
	}
	return r, nil
}

// Run delivers until ctx ends, then returns ctx's error. It reconnects
// after a lost connection (with backoff), so it returns nothing else.
func (r *Relay) Run(ctx context.Context) error {
	wait := 100 * time.Millisecond
	for {
		err := r.session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.m.leader.Set(0)
		r.cfg.Logger.Warn("outbox: connection lost; reconnecting", "err", err, "in", wait)
		if !sleep(ctx, wait+rand.N(wait/2+1)) {
			return ctx.Err()
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// session is one connection's life: connect, migrate, listen, wait to be
// the leader, then deliver until the connection fails.
func (r *Relay) session(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, r.cfg.URL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if r.cfg.Migrate {
		if err := Migrate(ctx, conn); err != nil {
			return err
		}
	}
	if _, err := conn.Exec(ctx, "LISTEN corral_outbox"); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	for {
		var leader bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", leaderLock).Scan(&leader); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if leader {
			break
		}
		// A standby: drain notifications (they would pile up in the
		// connection) while waiting to take over.
		if err := r.await(ctx, conn); err != nil {
			return err
		}
	}
	r.m.leader.Set(1)
	r.cfg.Logger.Info("outbox: delivering (this core holds the outbox lock)")
	for {
		n, err := r.pass(ctx, conn)
		if err != nil {
			return err
		}
		if n < r.cfg.Batch {
			if err := r.await(ctx, conn); err != nil {
				return err
			}
		}
	}
}

// await waits for a notification or the poll interval, whichever is first.
func (r *Relay) await(ctx context.Context, conn *pgx.Conn) error {
	wctx, cancel := context.WithTimeout(ctx, r.cfg.Poll)
	defer cancel()
	_, err := conn.WaitForNotification(wctx)
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		return nil // the poll interval passed
	}
	return err
}

// row is one outbox row read for delivery.
type row struct {
	id      int64
	room    string
	payload []byte
	key     string
	sender  string
	age     float64 // seconds since created_at, by the database's clock
}

// pass reads a batch, publishes it in id order and deletes what it
// published (or moved to corral_outbox_failed). It returns the rows read.
// A row that fails to publish for now ends the pass: nothing after it is
// published, so that its room stays in order.
func (r *Relay) pass(ctx context.Context, conn *pgx.Conn) (int, error) {
	rows, err := conn.Query(ctx, `SELECT id, room, payload, coalesce(idempotency_key, 'outbox:' || id), sender,
		extract(epoch FROM clock_timestamp() - created_at)::float8
		FROM corral_outbox ORDER BY id LIMIT $1`, r.cfg.Batch)
	if err != nil {
		return 0, fmt.Errorf("read: %w", err)
	}
	batch, err := pgx.CollectRows(rows, func(rw pgx.CollectableRow) (row, error) {
		var x row
		err := rw.Scan(&x.id, &x.room, &x.payload, &x.key, &x.sender, &x.age)
		return x, err
	})
	if err != nil {
		return 0, fmt.Errorf("read: %w", err)
	}
	if len(batch) == 0 {
		r.m.lagRows.Set(0)
		r.m.lagSeconds.Set(0)
		return 0, nil
	}
	r.m.lagSeconds.Set(batch[0].age)
	if len(batch) < r.cfg.Batch {
		r.m.lagRows.Set(float64(len(batch)))
	} else {
		var n int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM corral_outbox").Scan(&n); err != nil {
			return 0, fmt.Errorf("count: %w", err)
		}
		r.m.lagRows.Set(float64(n))
	}

	done := make([]int64, 0, len(batch))
	var stop error
	for _, x := range batch {
		r.crash.before()
		wait, failed, err := r.publish(ctx, x)
		if err != nil {
			stop = err
			break
		}
		if failed != "" {
			if err := r.fail(ctx, conn, x, failed); err != nil {
				return 0, err
			}
			continue
		}
		if wait > 0 {
			// Not published: overloaded or unavailable. Deliver what
			// was published, then wait before the next pass.
			defer sleep(ctx, wait)
			break
		}
		done = append(done, x.id)
		r.crash.after()
	}
	if len(done) > 0 {
		// The mark. A crash before it re-publishes these rows; their
		// keys make that a duplicate.
		if _, err := conn.Exec(ctx, "DELETE FROM corral_outbox WHERE id = ANY($1)", done); err != nil {
			return 0, fmt.Errorf("delete: %w", err)
		}
	}
	if stop != nil {
		return 0, stop
	}
	return len(batch), nil
}

// publish publishes one row. It returns a wait when the row was not
// published and should be retried after it, a reason when it can never
// be published, or ctx's error.
func (r *Relay) publish(ctx context.Context, x row) (wait time.Duration, failed string, err error) {
	res, err := r.pub.Publish(ctx, &corralv1.PublishRequest{
		Room: x.room, Payload: x.payload, IdempotencyKey: x.key, Sender: x.sender,
	})
	if ctx.Err() != nil {
		return 0, "", ctx.Err()
	}
	switch code := connect.CodeOf(err); {
	case err == nil:
		if res.GetDuplicate() {
			r.m.published.WithLabelValues("duplicate").Inc()
		} else {
			r.m.published.WithLabelValues("published").Inc()
		}
		r.m.delivery.Observe(x.age)
		return 0, "", nil
	case code == connect.CodeInvalidArgument:
		r.m.published.WithLabelValues("failed").Inc()
		r.cfg.Logger.Warn("outbox: row can never be published; moved to corral_outbox_failed", "id", x.id, "err", err)
		return 0, err.Error(), nil
	case code == connect.CodeResourceExhausted:
		r.m.waitBy[waitOverloaded].Inc()
		return retryAfter(err, 100*time.Millisecond), "", nil
	default:
		r.m.waitBy[waitUnavailable].Inc()
		r.cfg.Logger.Warn("outbox: publish failed; retrying", "id", x.id, "err", err)
		return 500 * time.Millisecond, "", nil
	}
}

// fail moves a row that can never be published to corral_outbox_failed.
func (r *Relay) fail(ctx context.Context, conn *pgx.Conn, x row, reason string) error {
	_, err := conn.Exec(ctx, `WITH d AS (DELETE FROM corral_outbox WHERE id = $1 RETURNING *)
		INSERT INTO corral_outbox_failed (id, room, payload, idempotency_key, sender, created_at, reason)
		SELECT id, room, payload, idempotency_key, sender, created_at, $2 FROM d`, x.id, reason)
	if err != nil {
		return fmt.Errorf("move failed row: %w", err)
	}
	return nil
}

// retryAfter is the hint of a CODE_OVERLOADED refusal, or def.
func retryAfter(err error, def time.Duration) time.Duration {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return def
	}
	for _, d := range ce.Details() {
		v, derr := connectproto.UnmarshalErrorDetail(d)
		if e, ok := v.(*corralv1.Error); ok && derr == nil && e.GetRetryAfterMs() > 0 {
			return time.Duration(e.GetRetryAfterMs()) * time.Millisecond
		}
	}
	return def
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
