package edge

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t testing.TB) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close(); cc.Close() })
	return sc.(*net.TCPConn), cc.(*net.TCPConn)
}

// TestWireTailKeepsOrder fills a socket with writes that never block until
// it takes part of one (the tail) or none; a control frame written
// meanwhile must follow the tail, and the reader must see every accepted
// message whole, in order.
func TestWireTailKeepsOrder(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no write without blocking on this platform: every message is queued")
	}
	sc, cc := tcpPair(t)
	sc.SetWriteBuffer(4096)
	cc.SetReadBuffer(4096)
	w := newWire(sc)

	var want bytes.Buffer
	tails, nones := 0, 0
	for i := 0; i < 10000 && (tails == 0 || nones == 0); i++ {
		msg := []byte(fmt.Sprintf("<%06d:%s>", i, bytes.Repeat([]byte{'a' + byte(i%26)}, 200+i%700)))
		switch r := w.tryWrite(msg); r {
		case writeDone:
			want.Write(msg)
		case writeTail:
			want.Write(msg)
			tails++
			if w.tryWrite([]byte("never")) != writeNone {
				t.Fatal("a write without blocking went ahead of a waiting tail")
			}
			// Whoever writes next writes the tail first.
			ctrl := []byte(fmt.Sprintf("<ctrl %d>", i))
			want.Write(ctrl)
			done := make(chan error, 1)
			go func() { _, err := w.Write(ctrl); done <- err }()
			// Let the reader make room while the write waits.
			drain(t, cc, &want, done)
		case writeNone:
			nones++
			// Socket full: nothing of msg went out. Read what did.
			drain(t, cc, &want, nil)
		case writeFailed:
			t.Fatal("write failed")
		}
	}
	if tails == 0 {
		t.Fatalf("the socket never took part of a message (%d full): the tail path went untested", nones)
	}
	sc.Close()
	rest, err := io.ReadAll(cc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rest, want.Bytes()) {
		t.Fatalf("the reader got %d bytes that differ from the %d accepted", len(rest), want.Len())
	}
}

// drain reads from cc what want holds so far and checks it, then empties
// want; done, if not nil, must deliver the pending write's result.
func drain(t *testing.T, cc *net.TCPConn, want *bytes.Buffer, done chan error) {
	t.Helper()
	got := make([]byte, want.Len())
	cc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(cc, got); err != nil {
		t.Fatalf("reading %d bytes: %v", len(got), err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		i := 0
		for i < len(got) && got[i] == want.Bytes()[i] {
			i++
		}
		t.Fatalf("byte %d of %d differs: got %.40q, want %.40q", i, len(got), got[i:], want.Bytes()[i:])
	}
	want.Reset()
	if done != nil {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// drained returns a wire on a loopback socket whose peer reads everything.
func drained(t testing.TB) *wire {
	sc, cc := tcpPair(t)
	go func() { _, _ = io.Copy(io.Discard, cc) }()
	return newWire(sc)
}

// TestTryWriteAllocatesNothing: a write from the fan-out (one per inline
// delivery) costs no allocation.
func TestTryWriteAllocatesNothing(t *testing.T) {
	w := drained(t)
	if w.raw == nil {
		t.Skip("no write without blocking on this platform")
	}
	msg := bytes.Repeat([]byte("x"), 100)
	allocs := testing.AllocsPerRun(1000, func() {
		if r := w.tryWrite(msg); r != writeDone && r != writeNone {
			t.Fatalf("tryWrite: %v", r)
		}
	})
	if allocs != 0 {
		t.Fatalf("tryWrite allocates %v times per call, want 0", allocs)
	}
}

// BenchmarkTryWrite: one 100-byte inline write.
func BenchmarkTryWrite(b *testing.B) {
	w := drained(b)
	msg := bytes.Repeat([]byte("x"), 100)
	b.ReportAllocs()
	for b.Loop() {
		w.tryWrite(msg)
	}
}
