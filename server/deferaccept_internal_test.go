//go:build linux

package server

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestPublicListenerDefersAccept: the public listener of a node with an
// edge (listenTCP as Node.listen calls it) has TCP_DEFER_ACCEPT set, so
// the kernel hands it a connection once its request head is there: a
// connection that sent nothing is not accepted yet, and is once it sends.
func TestPublicListenerDefersAccept(t *testing.T) {
	ln, err := listenTCP("127.0.0.1:0", 0, false, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rc, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		v, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if v == 0 {
		t.Fatal("TCP_DEFER_ACCEPT is not set on the public listener")
	}
	// Well within the defer timeout (a second: the first SYN-ACK
	// retransmission), a silent connection is not accepted.
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(200 * time.Millisecond))
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if nc, err := ln.Accept(); !errors.Is(err, os.ErrDeadlineExceeded) {
		if nc != nil {
			nc.Close()
		}
		t.Fatalf("a connection that sent nothing was accepted: %v", err)
	}
	_ = ln.(*net.TCPListener).SetDeadline(time.Time{})
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
		t.Fatal(err)
	}
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b := make([]byte, 3)
	if _, err := io.ReadFull(nc, b); err != nil || string(b) != "GET" {
		t.Fatalf("accepted connection reads %q, %v", b, err)
	}
}

// TestSilentClientCut: a client that connects to the public listener and
// never sends is still accepted (once the kernel's defer has passed) and
// closed by the head deadline.
func TestSilentClientCut(t *testing.T) {
	ln, err := listenTCP("127.0.0.1:0", 0, false, true)
	if err != nil {
		t.Fatal(err)
	}
	l := newWSListener(ln, echoWS, "/ws", 100*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 100 * time.Millisecond}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a silent client read %d, %v; want the server's close", n, err)
	}
}
