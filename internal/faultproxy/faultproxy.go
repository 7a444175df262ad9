// Package faultproxy is a TCP proxy for fault-injection tests and load
// runs: it forwards loopback connections to a target and can reset every
// one of them at once with TCP RST (SO_LINGER 0), like a crashed server or
// a cut network (seed W1 used Toxiproxy's reset_peer the same way). For
// slower faults (added latency, a stalled or partitioned peer, a bandwidth
// limit) [Toxic] runs Shopify's toxiproxy in process.
package faultproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
)

// Proxy forwards connections from its listener to a target address. All
// methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex // guards the following fields
	conns  map[net.Conn]struct{}
	closed bool
}

// Start listens on 127.0.0.1 (a free port) and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(in)
	}
}

func (p *Proxy) serve(in net.Conn) {
	defer p.wg.Done()
	var d net.Dialer
	out, err := d.DialContext(context.Background(), "tcp", p.target)
	if err != nil {
		in.Close()
		return
	}
	if !p.track(in, out) {
		in.Close()
		out.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		// A plain read/write loop: io.Copy between TCP connections would
		// splice through a kernel pipe, two more open files per direction,
		// and a test with thousands of clients would run out of them.
		buf := make([]byte, 4<<10)
		io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, buf)
		// Either side ending ends both.
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	<-done
	p.untrack(in, out)
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// ResetAll resets every current connection, both ways, with TCP RST. It
// returns how many client connections it cut. New connections are accepted
// as before.
func (p *Proxy) ResetAll() int {
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	clear(p.conns)
	p.mu.Unlock()
	for _, c := range conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // close sends RST, not FIN
		}
		c.Close()
	}
	return len(conns) / 2
}

// Close stops the proxy and resets its connections.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.ResetAll()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
