package client_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// proxy is a TCP proxy between clients and corral that a test can cut: it
// resets every connection (SO_LINGER 0, like a crashed middlebox), can
// refuse new ones while down, and can swallow what the server sends.
type proxy struct {
	ln     net.Listener
	target string
	down   atomic.Bool // reset new connections at once
	mute   atomic.Bool // drop server-to-client bytes

	mu    sync.Mutex // guards the following fields
	conns map[net.Conn]struct{}

	wg sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.cut(false)
		p.wg.Wait()
	})
	return p
}

// url is the WebSocket URL of corral through the proxy.
func (p *proxy) url() string { return "ws://" + p.ln.Addr().String() + "/ws" }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.down.Load() {
			reset(c)
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			reset(c)
			continue
		}
		p.mu.Lock()
		p.conns[c] = struct{}{}
		p.conns[s] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(s, c, nil)
		go p.pipe(c, s, &p.mute)
	}
}

// pipe copies src to dst (discarding while mute is set), then closes both.
func (p *proxy) pipe(dst, src net.Conn, mute *atomic.Bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && (mute == nil || !mute.Load()) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					tc.CloseWrite()
					return
				}
			}
			break
		}
	}
	src.Close()
	dst.Close()
}

// cut resets every open connection, both sides; with stayDown, new
// connections are reset too until restore. It also ends mute.
func (p *proxy) cut(stayDown bool) {
	p.down.Store(stayDown)
	p.mu.Lock()
	for c := range p.conns {
		reset(c)
	}
	clear(p.conns)
	p.mu.Unlock()
	p.mute.Store(false)
}

// restore accepts connections again.
func (p *proxy) restore() { p.down.Store(false) }

func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
