package peek_test

import (
	"errors"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/corral-rt/corral/internal/peek"
)

// pair is a connected loopback TCP pair: the server's end, the client's.
func pair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return s, c
}

// TestWaitReadable: the wait lasts until its read deadline when nothing
// arrives (it does not return at once), ends when a byte arrives and
// consumes none, and ends when the peer goes or the socket closes.
func TestWaitReadable(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("WaitReadable returns at once off Linux")
	}
	t.Run("byte", func(t *testing.T) {
		s, c := pair(t)
		done := make(chan struct{})
		go func() { peek.WaitReadable(s); close(done) }()
		if _, err := c.Write([]byte("hi")); err != nil {
			t.Fatal(err)
		}
		<-done
		b := make([]byte, 2)
		if n, err := s.Read(b); n != 2 || err != nil || string(b) != "hi" {
			t.Fatalf("read after the wait: %q, %v; want \"hi\" unconsumed", b[:n], err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		s, _ := pair(t)
		deadline := time.Now().Add(20 * time.Millisecond)
		_ = s.SetReadDeadline(deadline)
		peek.WaitReadable(s)
		if now := time.Now(); now.Before(deadline) {
			t.Fatalf("returned %v before its deadline with nothing to read", deadline.Sub(now))
		}
		if _, err := s.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read after the deadline: %v", err)
		}
	})
	t.Run("peer gone", func(t *testing.T) {
		s, c := pair(t)
		c.Close()
		peek.WaitReadable(s) // returns
		if n, err := s.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("read after the peer closed: %d, %v", n, err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		s, _ := pair(t)
		done := make(chan struct{})
		go func() { peek.WaitReadable(s); close(done) }()
		s.Close()
		<-done
	})
}
