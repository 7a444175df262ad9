// Package pgtest starts a private PostgreSQL server for a test: initdb and
// pg_ctl into a fresh directory, listening on a free loopback port only (no
// Unix socket), stopped by the test's cleanup. It never uses the machine's
// shared 5432 or a DATABASE_URL. Commit timestamps are tracked
// (pg_xact_commit_timestamp), for tests that check commit order; fsync is
// off. A missing binary fails the test with the command that installs it;
// as root (initdb refuses root) the server runs as the "postgres" user,
// which Debian's package creates.
//
// Start may be called from parallel tests: each call has its own server.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Install is the command that installs the server's binaries.
const Install = "tools/install-deps.sh (or: sudo apt-get install -y postgresql)"

// Server is one private PostgreSQL server.
type Server struct {
	// URL is a postgres:// URL of its database "corral", user "corral",
	// no password (trust on loopback).
	URL  string
	Port int

	dir    string
	bin    string
	asUser *user.User // nil: as this process's user
}

// Bin finds the directory of initdb and pg_ctl: PATH first, then the
// newest /usr/lib/postgresql/<ver>/bin. Empty when there is none.
func Bin() string {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			return filepath.Dir(p)
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	return ""
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Start starts a server and returns it once it accepts connections; it
// stops (immediately, its directory removed) when tb's test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin := Bin()
	if bin == "" {
		tb.Fatalf("pgtest: initdb and pg_ctl not found on PATH nor in /usr/lib/postgresql/*/bin; install them: %s", Install)
	}
	s := &Server{bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			tb.Fatalf("pgtest: running as root, and initdb refuses root: need a 'postgres' user (%v); install: %s", err, Install)
		}
		s.asUser = u
	}
	// Not tb.TempDir: its parents are private to this user, and the
	// server may run as another.
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	s.dir = dir
	tb.Cleanup(func() { s.stop(tb) })
	if s.asUser != nil {
		uid, _ := strconv.Atoi(s.asUser.Uid)
		gid, _ := strconv.Atoi(s.asUser.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			tb.Fatalf("pgtest: %v", err)
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run("initdb", "-D", data, "-U", "corral", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		tb.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	for range 5 {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("pgtest: %v", err)
		}
		opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 -c track_commit_timestamp=on", port)
		out, err := s.run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts, "-w", "-t", "60", "start")
		if err != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			if strings.Contains(string(log), "in use") {
				continue // the port was taken between freePort and listen
			}
			tb.Fatalf("pgtest: pg_ctl start: %v\n%s\n%s", err, out, log)
		}
		s.Port = port
		break
	}
	if s.Port == 0 {
		tb.Fatal("pgtest: no free port after 5 tries")
	}
	admin := fmt.Sprintf("postgres://corral@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		tb.Fatalf("pgtest: connect: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE corral"); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	s.URL = fmt.Sprintf("postgres://corral@127.0.0.1:%d/corral?sslmode=disable", s.Port)
	return s
}

// run runs one of the server's binaries, as the server's user.
func (s *Server) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if s.asUser != nil {
		uid, _ := strconv.Atoi(s.asUser.Uid)
		gid, _ := strconv.Atoi(s.asUser.Gid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Env = append(cmd.Env, "HOME="+s.dir)
	}
	return cmd.CombinedOutput()
}

func (s *Server) stop(tb testing.TB) {
	if s.Port != 0 {
		if out, err := s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop"); err != nil {
			tb.Logf("pgtest: pg_ctl stop: %v\n%s", err, out)
		}
	}
	os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
