package integration_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/pgtest"
	"github.com/corral-rt/corral/server"
)

// TestOutboxTypeScriptBackend builds and runs examples/outbox-ts (node,
// node-postgres) against a private PostgreSQL and a corral on --outbox:
// a member receives the posts in order, each once.
func TestOutboxTypeScriptBackend(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node not found: install Node.js 20 or newer (tools/install-deps.sh)")
	}
	dir, err := filepath.Abs("../examples/outbox-ts")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "pg")); err != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in examples/outbox-ts: %v\n%s", err, out)
		}
	}
	// Inside the example, so that node finds its node_modules.
	out, err := os.MkdirTemp(dir, "dist-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(out)
	tsc := exec.Command("npm", "exec", "--", "tsc", "-p", "tsconfig.json", "--outDir", out)
	tsc.Dir = dir
	if b, err := tsc.CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, b)
	}

	pg := pgtest.Start(t)
	n, err := server.Start(server.Options{
		Mode: server.Serve, Addr: "127.0.0.1:0", Auth: auth.Dev{}, OutboxURL: pg.URL,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	ctx := testCtx(t)
	member, err := client.Dial(ctx, "ws://"+n.Addr()+"/ws", client.Options{Token: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	defer member.CloseNow()
	if _, err := member.Join(ctx, "chat:ts", 0, ""); err != nil {
		t.Fatal(err)
	}
	// corral applies its migrations as it starts; the backend needs them.
	waitTable(t, pg.URL)

	addr := freeAddr(t)
	app := exec.Command(node, filepath.Join(out, "server.js"))
	app.Dir = dir // node_modules
	app.Env = append(os.Environ(), "DATABASE_URL="+pg.URL, "ADDR="+addr, "POOL=4")
	stdout, _ := app.StdoutPipe()
	app.Stderr = os.Stderr
	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { app.Process.Kill(); app.Wait() }()
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "listening") {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the TypeScript backend did not listen within 30s")
	}
	want := []string{"one", "two", "three"}
	for _, body := range want {
		res, err := http.Post("http://"+addr+"/rooms/chat:ts/messages?user=ann", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("post %q: %d", body, res.StatusCode)
		}
	}
	for i := 0; i < len(want); {
		select {
		case f := <-member.Frames():
			if m := f.GetMessage(); m != nil {
				if !strings.Contains(string(m.GetPayload()), `"body":"`+want[i]+`"`) || m.GetSender() != "ann" {
					t.Fatalf("message %d: %s from %q, want the body %q from ann", i, m.GetPayload(), m.GetSender(), want[i])
				}
				i++
			}
		case <-ctx.Done():
			t.Fatalf("received %d of %d messages", i, len(want))
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

// waitTable waits until corral_outbox exists.
func waitTable(t *testing.T, url string) {
	t.Helper()
	var err error
	if !eventually.Within(30*time.Second, func() bool {
		var ok bool
		ok, err = tableExists(url)
		return ok
	}) {
		t.Fatalf("corral_outbox not created within 30s (%v)", err)
	}
}
