// Command outbox-go is an example chat backend for corral's Postgres
// outbox (docs/OUTBOX.md): POST /rooms/{room}/messages stores the message
// in the application's own table and its broadcast in corral_outbox, in
// one transaction. corral, started with --outbox on the same database,
// publishes each committed row to the room exactly once, in commit order;
// a rolled-back transaction is never broadcast, and a crash of either
// process between the two writes cannot happen, because there is one write.
//
// One request holds one pool connection, for one short transaction
// (seed W4: never a second connection per request); the pool is bounded
// and an acquire waits at most --acquire before the request fails with
// 503, rather than queueing until a timeout.
//
// Run corral with the outbox, then this:
//
//	corral serve --insecure-dev --outbox postgres://app@127.0.0.1/app
//	go run ./examples/outbox-go --db postgres://app@127.0.0.1/app --addr 127.0.0.1:8095
//	curl -d 'hello' http://127.0.0.1:8095/rooms/chat:lobby/messages?user=ann
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// schema is the application's own table; corral_outbox comes from
// corral's migrations (corral --outbox applies them at start).
const schema = `CREATE TABLE IF NOT EXISTS chat_messages (
	id      bigserial PRIMARY KEY,
	room    text NOT NULL,
	author  text NOT NULL,
	body    text NOT NULL,
	sent_at timestamptz NOT NULL DEFAULT now())`

// App serves the chat's write path.
type App struct {
	Pool    *pgxpool.Pool
	Acquire time.Duration // the longest a request waits for a connection
}

// Post stores one message and its broadcast in one transaction and
// returns the message's id. The outbox row's idempotency key is the
// message's id: corral publishes it once however often it retries.
func (a *App) Post(ctx context.Context, room, author, body string) (int64, error) {
	actx, cancel := context.WithTimeout(ctx, a.Acquire)
	conn, err := a.Pool.Acquire(actx)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("outbox-go: no database connection within %v: %w", a.Acquire, err)
	}
	defer conn.Release()
	var id int64
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "INSERT INTO chat_messages (room, author, body) VALUES ($1, $2, $3) RETURNING id",
			room, author, body).Scan(&id); err != nil {
			return err
		}
		// Last in the transaction: the outbox row takes its room's lock
		// (commit order per room) until the commit.
		_, err := tx.Exec(ctx, "INSERT INTO corral_outbox (room, payload, idempotency_key, sender) VALUES ($1, $2, $3, $4)",
			room, fmt.Appendf(nil, `{"id":%d,"body":%q}`, id, body), fmt.Sprint("chat:", id), author)
		return err
	})
	return id, err
}

// ServeHTTP answers POST /rooms/{room}/messages?user=U with the message's
// id; the body is the message.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /rooms/{room}/messages", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 4096))
		if err != nil || len(body) == 0 {
			http.Error(w, "a message body, up to 4 KiB", http.StatusBadRequest)
			return
		}
		id, err := a.Post(r.Context(), r.PathValue("room"), r.URL.Query().Get("user"), string(body))
		if err != nil {
			slog.Warn("post failed", "err", err)
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, id)
	})
	mux.ServeHTTP(w, r)
}

// Setup creates the application's table.
func Setup(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, schema)
	return err
}

func main() {
	db := flag.String("db", "", "the application's PostgreSQL `URL` (corral's --outbox)")
	addr := flag.String("addr", "127.0.0.1:8095", "listen `address`")
	size := flag.Int("pool", 10, "database connections at most")
	acquire := flag.Duration("acquire", time.Second, "longest wait for a connection before answering 503")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *db, *addr, *size, *acquire); err != nil {
		slog.Error("outbox-go", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, db, addr string, size int, acquire time.Duration) error {
	cfg, err := pgxpool.ParseConfig(db)
	if err != nil {
		return errors.New("--db does not parse")
	}
	cfg.MaxConns = int32(size)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := Setup(ctx, pool); err != nil {
		return err
	}
	srv := &http.Server{Addr: addr, Handler: &App{Pool: pool, Acquire: acquire}, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
