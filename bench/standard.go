package bench

import (
	"net/http"
)

// ClientKind is how the generator's WebSocket clients read.
type ClientKind uint8

const (
	// ClientFast reads server frames straight from the TCP connection
	// (package client's own frame reader): the cheapest generator, which
	// leaves the most CPU to the server.
	ClientFast ClientKind = iota
	// ClientStandard reads the way most users' clients do: coder/websocket's
	// Conn.Read, one goroutine per socket, each message decoded by
	// protocol's decoder (encoding/json's rules for JSON). The headline
	// figures in docs/BENCHMARKS.md use it.
	ClientStandard
)

// ParseClientKind reads --client: "fast" or "standard".
func ParseClientKind(s string) (ClientKind, bool) {
	switch s {
	case "fast", "":
		return ClientFast, true
	case "standard":
		return ClientStandard, true
	}
	return ClientFast, false
}

func (k ClientKind) String() string {
	if k == ClientStandard {
		return "standard"
	}
	return "fast"
}

// standardTransport hides the *http.Transport under it, so that package
// client reads through coder/websocket's Conn.Read (client/wire.go: an
// HTTPClient whose transport is not an *http.Transport) instead of its raw
// frame reader.
type standardTransport struct{ base http.RoundTripper }

func (t standardTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.base.RoundTrip(r)
}

// httpClient is the HTTP client a WebSocket dial of kind k uses, given the
// one the run would use otherwise (nil: http.DefaultClient, which
// useSources may have replaced for the run).
func (k ClientKind) httpClient(hc *http.Client) *http.Client {
	if k != ClientStandard {
		return hc
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	return &http.Client{Transport: standardTransport{base}, CheckRedirect: hc.CheckRedirect, Jar: hc.Jar, Timeout: hc.Timeout}
}
