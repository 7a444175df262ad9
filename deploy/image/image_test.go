// Package image_test smoke-tests corral's container image (the repository's
// Dockerfile, built by `make image`): the image's own binary serves, a
// WebSocket client publishes and reads back, and SIGTERM drains. It runs only
// when CORRAL_IMAGE names a built image (`make image-smoke` sets it).
//
// `podman run` cannot run a container on this machine kind (crun cannot set
// rlimits or use the hybrid cgroups), so the test runs the image the way
// buildah can: `buildah from` + `buildah run --isolation chroot --network
// host`, which executes /corral from the image's root filesystem, as the
// image's user, on the host's loopback.
package image_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/internal/testlog"
)

func TestImageServesAndDrains(t *testing.T) {
	image := os.Getenv("CORRAL_IMAGE")
	if image == "" {
		t.Skip("CORRAL_IMAGE is not set: run `make image-smoke`")
	}
	buildah := os.Getenv("BUILDAH")
	if buildah == "" {
		buildah = "buildah"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The image as built: scratch with a non-root user, SIGTERM to stop.
	var cfg struct {
		OCIv1 struct {
			Config struct {
				User       string
				StopSignal string
				Entrypoint []string
			} `json:"config"`
		}
	}
	out, err := exec.CommandContext(ctx, buildah, "inspect", "--type", "image", image).Output()
	if err != nil {
		t.Fatalf("buildah inspect %s: %v", image, err)
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatalf("buildah inspect: %v", err)
	}
	c := cfg.OCIv1.Config
	if c.User != "65532:65532" || c.StopSignal != "SIGTERM" || strings.Join(c.Entrypoint, " ") != "/corral" {
		t.Fatalf("image config: user %q, stop signal %q, entrypoint %q; want 65532:65532, SIGTERM, /corral", c.User, c.StopSignal, c.Entrypoint)
	}

	out, err = exec.CommandContext(ctx, buildah, "from", "--pull=never", image).Output()
	if err != nil {
		t.Fatalf("buildah from %s: %v", image, err)
	}
	ctr := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command(buildah, "rm", ctr).Run() })

	addr := freeLoopbackAddr(t)
	var logs testlog.Buffer
	// drain-window and shutdown-timeout are keys, not flags: the
	// environment sets them.
	run := exec.Command(buildah, "run", "--isolation", "chroot", "--network", "host",
		"--env", "CORRAL_DRAIN_WINDOW=2s", "--env", "CORRAL_SHUTDOWN_TIMEOUT=20s", ctr,
		"/corral", "serve", "--insecure-dev", "--addr", addr)
	run.Stdout, run.Stderr = &logs, &logs
	// Killing buildah leaves its children holding the output pipes: do not
	// wait for them forever.
	run.WaitDelay = 5 * time.Second
	if err := run.Start(); err != nil {
		t.Fatalf("buildah run: %v", err)
	}
	pid := 0 // corral's, once found
	// exited is closed once buildah run has ended, with its error in waitErr.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = run.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			if pid != 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			run.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("corral's output:\n%s", logs.String())
		}
	})

	// The binary in the image answers its probes.
	waitStatus(t, ctx, "http://"+addr+"/readyz", http.StatusOK, exited)
	if code := get(ctx, "http://"+addr+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d, want 200", code)
	}

	// Publish and read back over a WebSocket.
	conn, err := client.Dial(ctx, "ws://"+addr+"/ws", client.Options{Token: "smoke"})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.CloseNow()
	if _, err := conn.Join(ctx, "smoke", 0, ""); err != nil {
		t.Fatalf("join: %v", err)
	}
	p, err := conn.Publish(ctx, "smoke", "m1", []byte(`{"text":"from the image"}`))
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	for got := false; !got; {
		select {
		case f := <-conn.Frames():
			if m := f.GetMessage(); m != nil {
				if m.GetSeq() != p.GetSeq() || string(m.GetPayload()) != `{"text":"from the image"}` {
					t.Fatalf("read back seq %d %s, want seq %d and the payload", m.GetSeq(), m.GetPayload(), p.GetSeq())
				}
				got = true
			}
		case <-ctx.Done():
			t.Fatal("no message read back")
		}
	}

	// The image's binary runs as the image's non-root user.
	pid = descendant(t, run.Process.Pid, "corral")
	if uid := procUID(t, pid); uid != "65532" {
		t.Errorf("corral runs as uid %s, want 65532", uid)
	}

	// SIGTERM (the image's STOPSIGNAL) drains: the client is told to go
	// away (4000, resume elsewhere) with a hint, and the process exits 0.
	// buildah run does not pass signals on, so it goes to corral itself,
	// as a container runtime's stop would.
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-conn.Done():
	case <-ctx.Done():
		t.Fatal("the client was not closed after SIGTERM")
	}
	ce := conn.Err()
	if ce == nil || ce.Code != 4000 {
		t.Fatalf("close after SIGTERM: %v, want 4000 (GOING_AWAY)", ce)
	}
	if ce.Hint == nil {
		t.Errorf("close 4000 came without a reconnect hint")
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("corral exited with %v after SIGTERM, want 0", waitErr)
		}
	case <-ctx.Done():
		t.Fatal("corral did not exit after SIGTERM")
	}
	if !strings.Contains(logs.String(), "shutting down") {
		t.Errorf("no shutdown in the logs")
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Errorf("%s still accepts connections after the exit", addr)
	}
}

// descendant finds the process named comm among root's descendants (buildah
// runs the image's entrypoint two processes down).
func descendant(t *testing.T, root int, comm string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	parent := map[int]int{}
	var named []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		s := string(b)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		f := strings.Fields(s[closing+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parent[pid] = ppid
		if s[open+1:closing] == comm {
			named = append(named, pid)
		}
	}
	for _, pid := range named {
		for p, hops := parent[pid], 0; p > 1 && hops < 16; p, hops = parent[p], hops+1 {
			if p == root {
				return pid
			}
		}
	}
	t.Fatalf("no process %q under buildah run (pid %d)", comm, root)
	return 0
}

// procUID is the real uid of a process.
func procUID(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return ""
}

// freeLoopbackAddr is a 127.0.0.1 port the kernel just handed out, so never
// a shared service's.
func freeLoopbackAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func get(ctx context.Context, url string) int {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitStatus polls url until it answers want (at most 200 tries, 100 ms
// apart), failing early when the process exits.
func waitStatus(t *testing.T, ctx context.Context, url string, want int, exited <-chan struct{}) {
	t.Helper()
	last := 0
	for range 200 {
		if last = get(ctx, url); last == want {
			return
		}
		select {
		case <-exited:
			t.Fatalf("corral exited before %s answered", url)
		case <-ctx.Done():
			t.Fatalf("%s: %v", url, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatal(fmt.Errorf("%s: last status %d, want %d: %w", url, last, want, errors.New("timed out")))
}
