package bench

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// resetDialer dials the storm's WebSocket connections itself and keeps
// every one open, so that the storm can end them all with a TCP RST from
// this side (SO_LINGER 0, then close): the server sees exactly what a
// middlebox reset looks like, a RST on every socket, and no proxy copies
// the traffic in between.
type resetDialer struct {
	base func(ctx context.Context, network, addr string) (net.Conn, error)

	mu    sync.Mutex
	conns map[*resetConn]struct{}
}

// newResetDialer dials through base (see sourceDial).
func newResetDialer(base func(ctx context.Context, network, addr string) (net.Conn, error)) *resetDialer {
	return &resetDialer{base: base, conns: make(map[*resetConn]struct{})}
}

// client returns an HTTP client whose connections d tracks.
func (d *resetDialer) client() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:       d.dial,
		DisableKeepAlives: true,
		ForceAttemptHTTP2: false,
	}}
}

func (d *resetDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.base(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	rc := &resetConn{TCPConn: tc, d: d}
	d.mu.Lock()
	d.conns[rc] = struct{}{}
	d.mu.Unlock()
	return rc, nil
}

// ResetAll resets every open connection at once and reports how many.
func (d *resetDialer) ResetAll() int {
	d.mu.Lock()
	conns := make([]*resetConn, 0, len(d.conns))
	for c := range d.conns {
		conns = append(conns, c)
	}
	d.mu.Unlock()
	for _, c := range conns {
		_ = c.SetLinger(0)
		_ = c.Close()
	}
	return len(conns)
}

// resetConn is a tracked connection; Close forgets it.
type resetConn struct {
	*net.TCPConn
	d    *resetDialer
	once sync.Once
}

func (c *resetConn) Close() error {
	c.once.Do(func() {
		c.d.mu.Lock()
		delete(c.d.conns, c)
		c.d.mu.Unlock()
	})
	return c.TCPConn.Close()
}
