package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/corral-rt/corral/internal/retry"
)

// slowloris holds half-open connections against the target while a
// scenario measures honest clients: half of them send an HTTP upgrade
// request one header line per second and never finish it, half complete
// the WebSocket upgrade and never send hello. When the server cuts one
// (its header timeout, its hello timeout), it is opened again, so the
// pressure stays at N for the whole run.
type slowloris struct {
	opened, cut atomic.Int64
	wg          sync.WaitGroup
}

// holdSlowloris starts n half-open connections to wsURL; they are held
// until ctx ends, and wait returns when they are closed.
func holdSlowloris(ctx context.Context, wsURL string, n int) (*slowloris, error) {
	u, err := url.Parse(wsURL)
	if err != nil {
		return nil, fmt.Errorf("bench: --slowloris: %w", err)
	}
	s := &slowloris{}
	for i := range n {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for ctx.Err() == nil {
				s.opened.Add(1)
				if i%2 == 0 {
					s.partialHeaders(ctx, u)
				} else {
					s.silentSocket(ctx, wsURL)
				}
				if ctx.Err() == nil {
					s.cut.Add(1)
					retry.Sleep(ctx, 100*time.Millisecond)
				}
			}
		}()
	}
	return s, nil
}

func (s *slowloris) wait() { s.wg.Wait() }

// partialHeaders dribbles an upgrade request's headers until the server
// closes the connection or ctx ends.
func (s *slowloris) partialHeaders(ctx context.Context, u *url.URL) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", hostPort(u))
	if err != nil {
		return
	}
	if u.Scheme == "wss" {
		nc = tls.Client(nc, &tls.Config{ServerName: u.Hostname()})
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	defer nc.Close()
	if _, err := fmt.Fprintf(nc, "GET %s HTTP/1.1\r\nHost: %s\r\n", u.RequestURI(), u.Host); err != nil {
		return
	}
	for i := 0; ctx.Err() == nil; i++ {
		retry.Sleep(ctx, time.Second)
		nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := fmt.Fprintf(nc, "X-Slow-%d: 1\r\n", i); err != nil {
			return
		}
	}
}

// silentSocket upgrades and then says nothing until the server closes.
func (s *slowloris) silentSocket(ctx context.Context, wsURL string) {
	ws, _, err := websocket.Dial(ctx, wsURL, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	for {
		if _, r, err := ws.Reader(ctx); err != nil {
			return
		} else {
			io.Copy(io.Discard, r)
		}
	}
}

func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "wss" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}
