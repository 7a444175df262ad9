package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Target is the corral deployment under load.
type Target struct {
	// WS is the WebSocket endpoint, e.g. ws://127.0.0.1:8080/ws.
	WS string `json:"ws"`
	// API is the base URL of the internal RoomService (corral serve
	// --internal-addr, or a core), e.g. http://127.0.0.1:8091. Needed
	// for server-side publishing.
	API string `json:"api,omitempty"`
	// Metrics is the Prometheus endpoint sampled for server cost when PID
	// is 0. Default: /metrics on API (corral serves it on its internal
	// listener), else on the WS host.
	Metrics string `json:"metrics,omitempty"`
	// PID is the server's process id on this machine: its CPU time and RSS
	// are read from /proc. 0: use Metrics.
	PID int `json:"pid,omitempty"`
	// APIKey is sent to the internal API as "Authorization: Bearer <key>"
	// (corral --api-keys). Empty: none (a server with api-insecure).
	APIKey string `json:"-"`
	// Token is sent in every hello. Empty: each client uses its own name,
	// which a server in --insecure-dev mode takes as the user id.
	Token string `json:"-"`
	// AllowRemote permits targets outside 127.0.0.0/8 and ::1.
	AllowRemote bool `json:"allowRemote,omitempty"`
}

// metricsURL returns Metrics, or /metrics on the internal listener (API),
// or else on the WS host (a node without an internal listener).
func (t Target) metricsURL() string {
	if t.Metrics != "" {
		return t.Metrics
	}
	if t.API != "" {
		return strings.TrimSuffix(t.API, "/") + "/metrics"
	}
	return t.wsHost() + "/metrics"
}

// wsHost returns the http(s)://host of the WS URL, or "".
func (t Target) wsHost() string {
	u, err := url.Parse(t.WS)
	if err != nil {
		return ""
	}
	scheme := "http"
	if u.Scheme == "wss" {
		scheme = "https"
	}
	return scheme + "://" + u.Host
}

// check refuses a target that is malformed or, unless AllowRemote, not on
// this machine's loopback.
func (t Target) check(ctx context.Context, needAPI bool) error {
	if t.WS == "" {
		return errors.New("bench: no WebSocket URL (--url)")
	}
	if needAPI && t.API == "" {
		return errors.New("bench: this scenario publishes through the internal API: give its URL (--api), e.g. http://127.0.0.1:8091 for corral serve --internal-addr 127.0.0.1:8091")
	}
	for _, raw := range []string{t.WS, t.API, t.Metrics} {
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return fmt.Errorf("bench: bad URL %q", raw)
		}
		switch u.Scheme {
		case "ws", "wss", "http", "https":
		default:
			return fmt.Errorf("bench: URL %q: scheme must be ws, wss, http or https", raw)
		}
		if t.AllowRemote {
			continue
		}
		if err := loopbackOnly(ctx, u.Hostname()); err != nil {
			return err
		}
	}
	return nil
}

func loopbackOnly(ctx context.Context, host string) error {
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return fmt.Errorf("bench: resolve %s: %w", host, err)
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return fmt.Errorf("bench: %s is not a loopback address: load only goes to this machine unless --allow-remote", host)
		}
	}
	return nil
}

// wsHostIsIPv4Loopback reports whether the WS URL's host is an IPv4
// loopback address, which source spreading over 127.0.0.x needs.
func (t Target) wsHostIsIPv4Loopback() bool {
	u, err := url.Parse(t.WS)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.To4() != nil && ip.IsLoopback()
}
