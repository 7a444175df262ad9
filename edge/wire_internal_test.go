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
// it takes part of one: the rest is the tail, and a later write without
// blocking is refused whole while the tail waits. A control frame written
// meanwhile (blocking) follows the tail; the reader sees every message
// whole, in order, and nothing refused.
func TestWireTailKeepsOrder(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no write without blocking on this platform")
	}
	sc, cc := tcpPair(t)
	sc.SetWriteBuffer(4096)
	cc.SetReadBuffer(4096)
	w := newWire(sc)

	var want bytes.Buffer
	tails, behind := 0, 0
	for i := 0; i < 10000 && (tails < 3 || behind < 3); i++ {
		msg := []byte(fmt.Sprintf("<%06d:%s>", i, bytes.Repeat([]byte{'a' + byte(i%26)}, 200+i%700)))
		w.mu.Lock()
		r := w.sendLocked(msg)
		want.Write(msg)
		if r == writeTail && i%2 == 0 {
			// Full: the next message is refused whole (the caller keeps
			// it queued), never written ahead of the tail nor kept.
			if w.sendLocked([]byte(fmt.Sprintf("<never %d>", i))) != writeFull {
				t.Fatal("a write with a tail waiting was not refused")
			}
			behind++
		}
		w.mu.Unlock()
		switch r {
		case writeDone:
		case writeTail:
			tails++
			// Whoever writes next writes the tail first.
			ctrl := []byte(fmt.Sprintf("<ctrl %d>", i))
			want.Write(ctrl)
			done := make(chan error, 1)
			go func() { _, err := w.Write(ctrl); done <- err }()
			// Let the reader make room while the write waits.
			drain(t, cc, &want, done)
		case writeFailed:
			t.Fatal("write failed")
		}
	}
	if tails < 3 || behind < 3 {
		t.Fatalf("the socket was full %d times (%d with a write refused behind the tail): the tail path went untested", tails, behind)
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

// TestSendAllocatesNothing: a write without blocking that the socket takes
// whole costs no allocation.
func TestSendAllocatesNothing(t *testing.T) {
	w := drained(t)
	if w.raw == nil {
		t.Skip("no write without blocking on this platform")
	}
	msg := bytes.Repeat([]byte("x"), 100)
	allocs := testing.AllocsPerRun(1000, func() {
		w.mu.Lock()
		r := w.sendLocked(msg)
		w.mu.Unlock()
		if r != writeDone {
			t.Fatalf("sendLocked: %v", r)
		}
	})
	if allocs != 0 {
		t.Fatalf("sendLocked allocates %v times per call, want 0", allocs)
	}
}

// BenchmarkSend: one 100-byte write without blocking.
func BenchmarkSend(b *testing.B) {
	w := drained(b)
	msg := bytes.Repeat([]byte("x"), 100)
	b.ReportAllocs()
	for b.Loop() {
		w.mu.Lock()
		w.sendLocked(msg)
		w.mu.Unlock()
	}
}
