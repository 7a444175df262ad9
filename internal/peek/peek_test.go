package peek_test

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/corral-rt/corral/internal/peek"
)

// pair is a connected loopback TCP pair: the server's end, the client's.
func pair(t *testing.T) (*net.TCPConn, net.Conn) {
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
	return s.(*net.TCPConn), c
}

// readReady reads s as a caller of ReadNow does: a buffer per attempt,
// the poller waiting between them. It returns what was read, how many
// attempts found nothing, and the error that ended it.
func readReady(t *testing.T, s *net.TCPConn) (got []byte, empty int, err error) {
	t.Helper()
	rc, err := s.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		b := make([]byte, 16)
		n, again, e := peek.ReadNow(fd, b)
		if again {
			empty++
			return false
		}
		got, rerr = b[:n], e
		return true
	})
	if err != nil {
		return nil, empty, err
	}
	return got, empty, rerr
}

// TestReadNow: bytes already there are read by the first attempt; with
// none, the attempt reports so and the poller waits until they come; the
// peer's end reads as io.EOF; a read deadline or a close ends the wait.
func TestReadNow(t *testing.T) {
	if !peek.CanRead {
		t.Skip("ReadNow reads on Linux only")
	}
	t.Run("there", func(t *testing.T) {
		s, c := pair(t)
		if _, err := c.Write([]byte("hi")); err != nil {
			t.Fatal(err)
		}
		// Wait, without reading, until both bytes are there.
		rc, _ := s.SyscallConn()
		_ = rc.Read(func(fd uintptr) bool {
			var b [2]byte
			n, _, _ := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			return n == 2
		})
		got, empty, err := readReady(t, s)
		if string(got) != "hi" || empty != 0 || err != nil {
			t.Fatalf("read %q after %d empty attempts, %v; want \"hi\" at the first", got, empty, err)
		}
	})
	t.Run("waits", func(t *testing.T) {
		s, c := pair(t)
		done := make(chan struct{})
		var got []byte
		var err error
		go func() { got, _, err = readReady(t, s); close(done) }()
		if _, err := c.Write([]byte("later")); err != nil {
			t.Fatal(err)
		}
		<-done
		if string(got) != "later" || err != nil {
			t.Fatalf("read %q, %v; want \"later\"", got, err)
		}
	})
	t.Run("peer gone", func(t *testing.T) {
		s, c := pair(t)
		c.Close()
		if got, _, err := readReady(t, s); len(got) != 0 || err != io.EOF {
			t.Fatalf("read %q, %v after the peer closed; want io.EOF", got, err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		s, _ := pair(t)
		_ = s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if _, _, err := readReady(t, s); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("wait past its deadline: %v", err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		s, _ := pair(t)
		done := make(chan error, 1)
		go func() { _, _, err := readReady(t, s); done <- err }()
		s.Close()
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("wait on a closed socket: %v", err)
		}
	})
}
