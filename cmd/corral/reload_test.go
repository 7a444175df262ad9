package main

import (
	"bytes"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corral-rt/corral/internal/eventually"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitLog waits until the log holds a line matching re and returns its
// submatches.
func waitLog(t *testing.T, log *syncBuffer, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	if !eventually.Within(30*time.Second, func() bool {
		m = re.FindStringSubmatch(log.String())
		return m != nil
	}) {
		t.Fatalf("no log line matching %s in:\n%s", re, log.String())
	}
	return m
}

// TestSIGHUPReload: a running `corral serve --config` reloads its room
// classes on SIGHUP, keeps them on an invalid file, and says which version
// is live in the log and in corral_config_info.
func TestSIGHUPReload(t *testing.T) {
	// Caught here too, so that a SIGHUP can never take the test binary
	// down whatever the order of registration.
	guard := make(chan os.Signal, 4)
	signal.Notify(guard, syscall.SIGHUP)
	defer signal.Stop(guard)

	p := writeConfig(t, "version: one\nrooms:\n  - name: a\n    match: \"a:*\"\n    max-members: 3\n")
	var log syncBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- run([]string{"serve", "--insecure-dev", "--addr", "127.0.0.1:0", "--internal-addr", "127.0.0.1:0", "--config", p}, &log)
	}()
	m := waitLog(t, &log, regexp.MustCompile(`corral listening.*internal=(127\.0\.0\.1:\d+)`))
	internal := "http://" + m[1]
	metric := func() string {
		resp, err := http.Get(internal + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		for _, line := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(line, "corral_config_info{") {
				return line
			}
		}
		return ""
	}
	if got := metric(); !strings.Contains(got, `version="one"`) {
		t.Fatalf("corral_config_info at start: %q", got)
	}

	writeConfig2 := func(content string) {
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig2("version: two\nrooms:\n  - name: a\n    match: \"a:*\"\n    max-members: 5\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, &log, regexp.MustCompile(`msg="config reloaded" version=two`))
	if got := metric(); !strings.Contains(got, `version="two"`) {
		t.Fatalf("corral_config_info after SIGHUP: %q", got)
	}

	writeConfig2("version: three\nrooms:\n  - name: a\n    match: \"a:*\"\n    max-memberz: 5\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, &log, regexp.MustCompile(`msg="config reload refused; the config in force is kept".*max-memberz: unknown key.*version=two`))
	if got := metric(); !strings.Contains(got, `version="two"`) {
		t.Fatalf("corral_config_info after a refused reload: %q", got)
	}

	resp, err := http.Post(internal+"/admin/drain?window=0s", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("corral did not stop after the drain")
	}
}
