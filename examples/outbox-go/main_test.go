package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/pgtest"
	"github.com/corral-rt/corral/server"
)

// TestPostReachesTheRoom: a member joined to a room receives, in order,
// the messages posted to the backend; a post whose transaction rolls back
// (here: a body the table refuses) is never broadcast.
func TestPostReachesTheRoom(t *testing.T) {
	pg := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := server.Start(server.Options{
		Mode: server.Serve, Addr: "127.0.0.1:0", Auth: auth.Dev{}, OutboxURL: pg.URL,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	pool, err := pgxpool.New(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := Setup(ctx, pool); err != nil {
		t.Fatal(err)
	}
	// A rule of the application's checked at commit, after the outbox
	// row was written: the transaction rolls back with its outbox row.
	if _, err := pool.Exec(ctx, `CREATE FUNCTION no_spam() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.body = 'spam' THEN RAISE EXCEPTION 'spam'; END IF; RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER no_spam AFTER INSERT ON chat_messages
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION no_spam()`); err != nil {
		t.Fatal(err)
	}
	app := httptest.NewServer(&App{Pool: pool, Acquire: time.Second})
	defer app.Close()

	member, err := client.Dial(ctx, "ws://"+n.Addr()+"/ws", client.Options{Token: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	defer member.CloseNow()
	if _, err := member.Join(ctx, "chat:lobby", 0, ""); err != nil {
		t.Fatal(err)
	}
	// The outbox table exists once corral applied its migrations.
	eventually.Within(time.Minute, func() bool {
		var ok bool
		err := pool.QueryRow(ctx, "SELECT to_regclass('corral_outbox') IS NOT NULL").Scan(&ok)
		return err != nil || ok
	})
	posts := []string{"one", "spam", "two", "three"}
	for _, body := range posts {
		res, err := http.Post(app.URL+"/rooms/chat:lobby/messages?user=ann", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if want := map[bool]int{true: 503, false: 200}[body == "spam"]; res.StatusCode != want {
			t.Fatalf("post %q: %d, want %d", body, res.StatusCode, want)
		}
	}
	var got []string
	for len(got) < 3 {
		select {
		case f := <-member.Frames():
			if m := f.GetMessage(); m != nil {
				got = append(got, string(m.GetPayload()))
			}
		case <-ctx.Done():
			t.Fatalf("received %v, want three messages", got)
		}
	}
	for i, want := range []string{"one", "two", "three"} {
		if !strings.Contains(got[i], fmt.Sprintf("%q", want)) {
			t.Fatalf("message %d is %s, want the body %q (received %v)", i, got[i], want, got)
		}
	}
	select {
	case f := <-member.Frames():
		if m := f.GetMessage(); m != nil {
			t.Fatalf("a fourth message: %s", m.GetPayload())
		}
	case <-time.After(300 * time.Millisecond):
	}
}
