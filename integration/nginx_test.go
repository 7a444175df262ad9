package integration_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/config"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/nginxtest"
	"github.com/corral-rt/corral/internal/readytest"
	"github.com/corral-rt/corral/server"
)

// nginxConf is the http{} body of the balancer in front of two edges, as
// docs/TRANSPORTS.md shows it: every request of a stream hashed by the
// stream id in its URL, proxy_buffering left at its default (on). Port 0
// speaks HTTP/1.1, port 1 HTTP/2 (h2c, prior knowledge).
const nginxConf = `
upstream corral_rt {
    hash $arg_stream consistent;
    server %[1]s;
    server %[2]s;
}
upstream corral_ws {
    server %[1]s;
}
server {
    listen 127.0.0.1:{{index .Ports 0}};
    listen 127.0.0.1:{{index .Ports 1}} http2;
    location /rt/ {
        proxy_pass http://corral_rt;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_read_timeout 60s;
    }
    location /ws {
        proxy_pass http://corral_ws;
        proxy_http_version 1.1;
        proxy_set_header Upgrade $http_upgrade;
        proxy_set_header Connection "upgrade";
    }
}
`

// twoEdges starts a core and two edges linked to it.
func twoEdges(t *testing.T) (a, b *server.Node) {
	core := startNode(t, server.Options{Mode: server.CoreOnly, Node: config.Node{Addr: "127.0.0.1:0"}, Logger: quietLogger(), APIInsecure: true})
	edge := func() *server.Node {
		o := server.Options{Mode: server.EdgeOnly, Node: config.Node{Addr: "127.0.0.1:0", CoreURL: "http://" + core.Addr()}, Auth: auth.Dev{}, Logger: quietLogger()}
		withoutRateLimits(nil)(&o)
		n := startNode(t, o)
		readytest.Wait(t, "http://"+n.Addr()+"/readyz")
		return n
	}
	return edge(), edge()
}

// h2cClient speaks HTTP/2 without TLS (prior knowledge), as nginx's
// "listen ... http2" expects.
func h2cClient() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: p}}
}

// TestFallbacksBehindNginx: behind a real nginx with proxy_buffering on,
// over HTTP/1.1 and HTTP/2, each fallback's frames arrive unbuffered: the
// reader sees each message before the publisher makes the next. And the
// POSTs of many streams spread over two edges reach the edge that holds
// their stream (nginx hashes the stream id): every reader publishes and
// receives. (With "proxy_ignore_headers X-Accel-Buffering" added to the
// configuration, the SSE dial waits until the hello deadline closes the
// stream: nginx held the corral-open event.)
func TestFallbacksBehindNginx(t *testing.T) {
	a, b := twoEdges(t)
	ngx := nginxtest.Start(t, 2, fmt.Sprintf(nginxConf, a.Addr(), b.Addr()))
	ctx := testCtx(t)
	pub, err := client.Dial(ctx, "ws://"+a.Addr()+"/ws", client.Options{Token: "pub"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.CloseNow)
	protos := []struct {
		name string
		port int
		hc   *http.Client
	}{
		{"http1", 0, nil},
		{"h2", 1, h2cClient()},
	}
	n := 0
	for _, pr := range protos {
		for _, fb := range fallbacks {
			t.Run(pr.name+"/"+fb.name+"/unbuffered", func(t *testing.T) {
				room := "live-" + pr.name + "-" + fb.name
				if _, err := pub.Join(ctx, room, 0, ""); err != nil {
					t.Fatal(err)
				}
				url := "ws://" + ngx.Addr(pr.port) + "/ws"
				rd, err := client.Dial(ctx, url, client.Options{Token: "reader", Transport: fb.transport, Encoding: fb.enc, HTTPClient: pr.hc})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(rd.CloseNow)
				if _, err := rd.Join(ctx, room, 0, ""); err != nil {
					t.Fatal(err)
				}
				for i := range 20 {
					n++
					id := fmt.Sprintf("u%d", n)
					if _, err := pub.Publish(ctx, room, id, payload(i)); err != nil {
						t.Fatal(err)
					}
					// Before the next publish: a buffering proxy would
					// hold this small event until more came.
					m := nextFrame(t, rd, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil }).GetMessage()
					if m.GetId() != id {
						t.Fatalf("got message %q, want %q", m.GetId(), id)
					}
				}
			})
		}
		t.Run(pr.name+"/routing", func(t *testing.T) {
			const room, readers = "spread", 12
			url := "ws://" + ngx.Addr(pr.port) + "/ws"
			var rds []*client.Conn
			for i := range readers {
				fb := fallbacks[i%len(fallbacks)]
				rd, err := client.Dial(ctx, url, client.Options{Token: fmt.Sprintf("r%d", i), Transport: fb.transport, Encoding: fb.enc, HTTPClient: pr.hc})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(rd.CloseNow)
				if _, err := rd.Join(ctx, room+pr.name, 0, ""); err != nil {
					t.Fatal(err)
				}
				rds = append(rds, rd)
			}
			for i, rd := range rds {
				if _, err := rd.Publish(ctx, room+pr.name, fmt.Sprintf("%s-r%d", pr.name, i), payload(i)); err != nil {
					t.Fatalf("reader %d: %v", i, err)
				}
			}
			for _, rd := range rds {
				for range readers {
					nextFrame(t, rd, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil })
				}
			}
			// Both edges served streams (12 random ids: all on one edge
			// is a 2^-11 chance).
			for _, e := range []*server.Node{a, b} {
				if got := streamsServed(t, e); got == 0 {
					t.Errorf("edge %s served no stream: the balancer did not spread them", e.Addr())
				}
			}
		})
	}
}

// streamsServed is how many fallback streams an edge opened
// (corral_edge_streams_opened_total, on its /metrics).
func streamsServed(t *testing.T, n *server.Node) int {
	t.Helper()
	resp, err := http.Get("http://" + n.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	total := 0
	for line := range strings.SplitSeq(string(body), "\n") {
		if strings.HasPrefix(line, "corral_edge_streams_opened_total{") {
			var v float64
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			total += int(v)
		}
	}
	return total
}
