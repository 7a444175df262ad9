package integration_test

import (
	"fmt"
	"github.com/corral-rt/corral/internal/readytest"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
)

// buildCorral builds the corral binary for tests that need a real process.
func buildCorral(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "corral")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/corral").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// process is a corral process started by a test.
type process struct {
	t    *testing.T
	args []string
	bin  string
	env  []string // added to the test's environment, for the next start
	cmd  *exec.Cmd
}

func (p *process) start() {
	p.t.Helper()
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = os.Stderr, os.Stderr
	if p.env != nil {
		p.cmd.Env = append(os.Environ(), p.env...)
	}
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
}

// kill9 kills the process like a crash: no shutdown, no goodbyes.
func (p *process) kill9() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
}

// TestCrashRestartResume: corral on Redis is killed with SIGKILL while
// clients are connected, restarted, and traffic continues; every client
// resumes its session and receives everything it missed, in order, once.
func TestCrashRestartResume(t *testing.T) {
	bin := buildCorral(t)
	redisAddr := redistest.Start(t)
	addr := freeAddr(t)
	p := &process{t: t, bin: bin, args: []string{
		"serve", "--insecure-dev", "--addr", addr, "--log-level", "warn",
		"--redis", "redis://" + redisAddr, "--redis-prefix", redistest.Prefix(t),
	}}
	p.start()
	t.Cleanup(p.kill9)
	readytest.Wait(t, "http://"+addr+"/readyz")
	d := &deployment{wsURL: "ws://" + addr + "/ws"}
	ctx := testCtx(t)
	const room = "survivors"

	chk := checker.New()
	type member struct {
		name  string
		conn  *client.Conn
		w     *corralv1.Welcome
		epoch string
		last  uint64
	}
	var members []*member
	for i := range 5 {
		m := &member{name: fmt.Sprintf("s%d", i)}
		m.conn = dial(t, d, m.name, protocol.Encoding(i%2))
		j, err := m.conn.Join(ctx, room, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		m.w, m.epoch = m.conn.Welcome(), j.GetEpoch()
		members = append(members, m)
	}
	pub := dial(t, d, "teacher", protocol.JSON)
	if _, err := pub.Join(ctx, room, 0, ""); err != nil {
		t.Fatal(err)
	}
	publish := func(c *client.Conn, from, n int) {
		for k := from; k < from+n; k++ {
			id := fmt.Sprintf("m%d", k)
			res, err := c.Publish(ctx, room, id, payload(k))
			if err != nil {
				t.Fatal(err)
			}
			chk.Acked(room, res.GetSeq(), id)
		}
	}
	publish(pub, 0, 100)
	// Each member takes what has arrived so far (not necessarily all).
	for _, m := range members {
		drain := time.After(200 * time.Millisecond)
	loop:
		for {
			select {
			case f := <-m.conn.Frames():
				if msg := f.GetMessage(); msg != nil {
					chk.Received(m.name, room, msg.GetSeq(), msg.GetId())
					m.last = msg.GetSeq()
				}
			case <-drain:
				break loop
			}
		}
	}

	p.kill9()
	for _, m := range members {
		waitClosed(t, m.conn)
	}
	p.start()
	readytest.Wait(t, "http://"+addr+"/readyz")

	pub2 := dial(t, d, "teacher", protocol.JSON)
	if _, err := pub2.Join(ctx, room, 0, ""); err != nil {
		t.Fatal(err)
	}
	publish(pub2, 100, 100)
	for _, m := range members {
		back, err := resumeConn(t, d.wsURL, m.name, m.w, room, m.last, m.epoch)
		if err != nil {
			t.Fatalf("%s could not resume after the crash: %v", m.name, err)
		}
		for m.last < 200 {
			f := nextFrame(t, back, func(f *corralv1.ServerFrame) bool { return isMsg(f) || f.GetReset_() != nil })
			if f.GetReset_() != nil {
				t.Fatalf("%s got a Reset after a crash: history should have survived", m.name)
			}
			chk.Received(m.name, room, f.GetMessage().GetSeq(), f.GetMessage().GetId())
			m.last = f.GetMessage().GetSeq()
		}
		chk.Member(m.name, room, 0, 200)
	}
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
}
