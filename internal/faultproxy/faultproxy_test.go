package faultproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/corral-rt/corral/internal/faultproxy"
)

func TestForwardAndReset(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go io.Copy(c, c) // echo
		}
	}()
	p, err := faultproxy.Start(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	c.Write([]byte("ping\n"))
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("echo through proxy: %q %v", line, err)
	}
	if n := p.ResetAll(); n != 1 {
		t.Fatalf("reset %d connections, want 1", n)
	}
	_, err = r.ReadString('\n')
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
		t.Fatalf("after reset read gave %v, want a reset", err)
	}
	// New connections still work.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.Write([]byte("again\n"))
	if line, _ := bufio.NewReader(c2).ReadString('\n'); line != "again\n" {
		t.Fatalf("after reset: %q", line)
	}
}
