package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/corral-rt/corral/internal/pgtest"
)

func TestStart(t *testing.T) {
	s := pgtest.Start(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, "SELECT 1+1").Scan(&n); err != nil || n != 2 {
		t.Fatalf("SELECT 1+1 = %d, %v", n, err)
	}
}
