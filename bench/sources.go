package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// connsPerSource is how many connections one source address carries before
// the generator spreads over more. The ephemeral port range (32768-60999 by
// default) holds about 28,000 ports per source and destination, but the
// kernel's search for a free port in connect() slows down long before it
// runs out: with 15,000 connections from one source the generator spent
// 4.0 CPU-s connecting them, with 8 sources 2.7-3.0 (the search runs in
// the generator's connect(), on the same two cores as the server).
const connsPerSource = 2000

// sourceCount returns how many source addresses n connections use.
func sourceCount(configured, n int) int {
	if configured > 0 {
		return min(configured, 254)
	}
	return min(254, max(1, (n+connsPerSource-1)/connsPerSource))
}

// sourceDial returns a DialContext whose connections leave from 127.0.0.1
// to 127.0.0.n in turn (n <= 1: the system's choice).
func sourceDial(n int) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if n <= 1 {
		d := net.Dialer{Timeout: 30 * time.Second, KeepAlive: -1}
		return d.DialContext
	}
	var next atomic.Uint64
	sources := make([]*net.TCPAddr, n)
	for i := range sources {
		sources[i] = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(i+1))}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		src := sources[next.Add(1)%uint64(n)]
		d := net.Dialer{LocalAddr: src, Timeout: 30 * time.Second, KeepAlive: -1}
		c, err := d.DialContext(ctx, "tcp4", addr)
		if err != nil {
			return nil, fmt.Errorf("from %s: %w", src.IP, err)
		}
		return c, nil
	}
}

// spreadClient is an HTTP client whose connections leave from 127.0.0.1 to
// 127.0.0.n in turn.
func spreadClient(n int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:       sourceDial(n),
		ForceAttemptHTTP2: false,
		MaxIdleConns:      16,
		IdleConnTimeout:   10 * time.Second,
	}}
}

// sources returns how many source addresses conns connections of a run
// use: --sources when given, else one per connsPerSource when the target
// is an IPv4 loopback address (other targets get one).
func (o Options) sources(conns int) int {
	if o.Sources <= 0 && !o.Target.wsHostIsIPv4Loopback() {
		return 1
	}
	return sourceCount(o.Sources, conns)
}

// useSources makes WebSocket dials leave from n loopback addresses until
// the returned function is called.
//
// client.Options has no HTTP client of its own yet, so client.Dial (through
// websocket.Dial) uses http.DefaultClient; for the length of the run that
// is replaced by a spreading client. Call before any dial starts and
// restore after every dial has ended.
func useSources(t Target, n int) (restore func(), err error) {
	if n <= 1 {
		return func() {}, nil
	}
	if !t.wsHostIsIPv4Loopback() {
		return nil, fmt.Errorf("bench: --sources %d needs an IPv4 loopback target (127.0.0.1), not %s", n, t.WS)
	}
	prev := http.DefaultClient
	http.DefaultClient = spreadClient(n)
	return func() { http.DefaultClient = prev }, nil
}
