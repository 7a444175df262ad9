package outbox

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the SQL migrations in order, named NNNN_what.sql, for
// an application that applies them with its own tool rather than [Migrate].
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrations, "migrations")
	return sub
}

// migrateLock is the session advisory lock that serializes [Migrate] of
// several cores starting together ('cor' + 'm').
const migrateLock = 1668247149

// Migrate applies the migrations the database lacks, each in its own
// transaction, and records them in corral_outbox_migrations. Cores that
// start together apply each once.
func Migrate(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrateLock); err != nil {
		return fmt.Errorf("outbox: migrate: lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrateLock)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS corral_outbox_migrations (
		version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("outbox: migrate: %w", err)
	}
	names, err := fs.Glob(Migrations(), "*.sql")
	if err != nil {
		return fmt.Errorf("outbox: migrate: %w", err)
	}
	sort.Strings(names)
	for _, name := range names {
		version, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("outbox: migrate: %s: not NNNN_name.sql", name)
		}
		sql, err := fs.ReadFile(Migrations(), name)
		if err != nil {
			return fmt.Errorf("outbox: migrate: %w", err)
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var done bool
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM corral_outbox_migrations WHERE version = $1)", version).Scan(&done); err != nil || done {
				return err
			}
			if _, err := tx.Exec(ctx, string(sql)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO corral_outbox_migrations (version) VALUES ($1)", version)
			return err
		})
		if err != nil {
			return fmt.Errorf("outbox: migrate %s: %w", name, err)
		}
	}
	return nil
}
