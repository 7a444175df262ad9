// Package redistest gives tests a Redis of their own: a private
// redis-server on a free loopback port, or the server named by REDIS_URL.
//
// Tests never use the shared Redis on 127.0.0.1:6379. When REDIS_URL is set,
// several test packages may share that server at once, so tests should keep
// their keys under a unique prefix (see Prefix) instead of flushing it.
package redistest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corral-rt/corral/internal/testlog"
	"github.com/redis/rueidis"
)

const notFound = "redis-server not found on PATH and REDIS_URL not set: " +
	"install Redis (Debian/Ubuntu: sudo apt-get install -y redis-server; " +
	"macOS: brew install redis) or set REDIS_URL"

// Start returns the "host:port" of a Redis for this test: the one in
// REDIS_URL (redis://host:port/db) when set, else a private redis-server
// started from PATH without persistence, stopped by tb.Cleanup.
func Start(tb testing.TB) string {
	tb.Helper()
	if raw := os.Getenv("REDIS_URL"); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			tb.Fatalf("redistest: bad REDIS_URL %q: %v", raw, err)
		}
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "6379")
		}
		return host
	}
	return StartProcess(tb, 0).Addr()
}

// Private reports whether addr is a server started by this package, which a
// test may FLUSHALL without disturbing other tests.
func Private(addr string) bool {
	privateMu.Lock()
	defer privateMu.Unlock()
	return private[addr]
}

var (
	privateMu sync.Mutex
	private   = map[string]bool{} // guarded by privateMu
)

// Client returns a client for addr, closed by tb.Cleanup. When addr is the
// REDIS_URL server, the URL's database and credentials are used.
func Client(tb testing.TB, addr string) rueidis.Client {
	tb.Helper()
	opt := rueidis.ClientOption{InitAddress: []string{addr}}
	if raw := os.Getenv("REDIS_URL"); raw != "" {
		if o, err := rueidis.ParseURL(raw); err == nil && len(o.InitAddress) == 1 && o.InitAddress[0] == addr {
			opt = o
		}
	}
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		tb.Fatalf("redistest: connect %s: %v", addr, err)
	}
	tb.Cleanup(c.Close)
	return c
}

// Prefix returns a key prefix unique to this test run, so that tests sharing
// a server do not see each other's keys.
func Prefix(tb testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	return "test" + hex.EncodeToString(b[:])
}

// Server is a redis-server process owned by a test.
type Server struct {
	tb   testing.TB
	port int
	dir  string
	// extra returns more redis-server arguments, given the port.
	extra func(port int) ([]string, error)
	// conf, when set, is a config file passed first (a sentinel's).
	conf string

	mu     sync.Mutex // guards the following fields
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// StartProcess starts a private redis-server on 127.0.0.1:port (0 picks a
// free port) and stops it by tb.Cleanup. It fails the test when redis-server
// is not on PATH.
func StartProcess(tb testing.TB, port int) *Server {
	tb.Helper()
	return startProcess(tb, port, nil)
}

func startProcess(tb testing.TB, port int, extra func(int) ([]string, error)) *Server {
	tb.Helper()
	return startServer(tb, &Server{tb: tb, port: port, dir: tb.TempDir(), extra: extra})
}

func startServer(tb testing.TB, s *Server) *Server {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		tb.Fatalf("%s", notFound)
	}
	port := s.port
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if port == 0 {
			s.port, err = freePort()
			if err != nil {
				tb.Fatalf("redistest: %v", err)
			}
		}
		if err = s.start(); err == nil {
			break
		}
		if port != 0 {
			break
		}
	}
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	privateMu.Lock()
	private[s.Addr()] = true
	privateMu.Unlock()
	tb.Cleanup(func() {
		s.Kill()
		privateMu.Lock()
		delete(private, s.Addr())
		privateMu.Unlock()
	})
	return s
}

// Addr returns the server's "host:port".
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Kill stops the server abruptly (SIGKILL); its data is lost.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	s.cmd, s.exited = nil, nil
}

// Restart kills the server and starts an empty one on the same port.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	var err error
	// The port may linger briefly after the kill.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.tb.Fatalf("redistest: restart: %v", err)
}

func (s *Server) start() error {
	var out testlog.Buffer
	args := []string{"--save", "", "--appendonly", "no",
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--dir", s.dir, "--daemonize", "no"}
	if s.conf != "" {
		args = append([]string{s.conf, "--sentinel"}, args[4:]...)
	}
	if s.extra != nil {
		more, err := s.extra(s.port)
		if err != nil {
			return err
		}
		args = append(args, more...)
	}
	cmd := exec.Command("redis-server", args...)
	cmd.Stdout = &out
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	addr := s.Addr()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited: %s", addr, out.String())
		default:
		}
		if ping(addr) == nil {
			s.mu.Lock()
			s.cmd, s.exited = cmd, exited
			s.mu.Unlock()
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("redis-server on %s did not answer PING", addr)
}

func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING: %q", line)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	switch port {
	case 6379, 5432, 3306, 5672, 1883, 4222: // other services' well-known ports
		return freePort()
	}
	return port, nil
}

// Pause stops the server's process (SIGSTOP) until Resume: it neither
// answers nor replicates, as a server stalled or cut off by a partition.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}
