package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/corral-rt/corral/auth"
	"github.com/prometheus/client_golang/prometheus"
)

// The one rule for admin and debug endpoints (/admin/*, /debug/*), in every
// mode: they are served only on internal listeners (Options.InternalAddr,
// a core's Addr, Options.DebugAddr), never on the public WebSocket port,
// and every request presents an API key (Options.APIKeys) unless the node
// is insecure (Options.APIInsecure without keys). The public port answers
// them 404. mountAdmin is the only place that mounts them.

// role is what a listener is for.
type role int

const (
	// public is the client-facing listener: /ws, the demo page, probes.
	public role = iota
	// internal serves RoomService, /admin/* and /metrics to the operator's
	// network only.
	internal
	// debug serves Go's profiles (/debug/pprof/).
	debug
)

// errAdminPublic is the answer to an admin or debug path on the public port.
var errAdminPublic = errors.New("server: admin and debug endpoints are served on the internal listener only (--internal-addr, or --debug-addr for /debug/pprof/)")

// adminDoor checks the API key of every admin and debug request.
type adminDoor struct {
	check   func(header string) error // nil: open (insecure)
	refused []prometheus.Counter      // by keyRefusal; nil: not counted
}

// guard admits a request only with an accepted API key (unless the door is
// open), refusing it with 401 otherwise.
func (d adminDoor) guard(h http.Handler) http.Handler {
	if d.check == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := d.check(r.Header.Get("Authorization")); err != nil {
			if d.refused != nil {
				d.refused[keyRefusalOf(err)].Inc()
			}
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// mountAdmin mounts the admin and debug endpoints that a listener of role r
// serves on mux, behind the door, and returns the endpoints it mounted.
// On the public listener it mounts their refusal (404).
func (n *Node) mountAdmin(mux *http.ServeMux, r role, door adminDoor) []string {
	switch r {
	case public:
		refuse := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, errAdminPublic.Error(), http.StatusNotFound)
		})
		mux.Handle("/admin/", refuse)
		mux.Handle("/debug/", refuse)
		return nil
	case internal:
		var mounted []string
		if n.opts.Reload != nil {
			mux.Handle("POST /admin/reload", door.guard(n.reloadHandler()))
			mounted = append(mounted, "POST /admin/reload")
		}
		if n.edge == nil {
			return mounted // a core has nothing to drain
		}
		mux.Handle("POST /admin/drain", door.guard(n.drainHandler()))
		return append(mounted, "POST /admin/drain")
	case debug:
		mux.Handle("/debug/", door.guard(debugMux(n.opts.DebugCmdline)))
		return []string{"/debug/pprof/"}
	}
	return nil
}

// listener is one of the node's HTTP listeners before it listens.
type listener struct {
	role role
	addr string
	mux  *http.ServeMux
	// open lists the endpoints that, on an insecure node, answer without
	// an API key or a verified token.
	open []string
	// h2c: the listener speaks HTTP/2 without TLS as well as HTTP/1.1,
	// for the RPC it serves (gRPC needs HTTP/2). Only there: on the
	// WebSocket listener every connection would pay net/http's check for
	// the HTTP/2 preface (3.7% of the server's CPU in a rejoin storm).
	h2c bool
}

// warnInsecure logs one warning naming every endpoint that answers
// without an API key or a verified token, with its listener's address; it
// logs nothing when there is none.
func (n *Node) warnInsecure(ls []*listener, addrs []string) {
	var open []string
	for i, l := range ls {
		for _, e := range l.open {
			open = append(open, addrs[i]+" "+e)
		}
	}
	if len(open) == 0 {
		return
	}
	n.opts.Logger.Warn("INSECURE: these endpoints answer anyone who can reach them, without an API key or a verified token; never run this in production",
		"open", strings.Join(open, "; "))
}

// openEndpoints returns what a listener of role r exposes without any
// check on this node: its admin endpoints and RoomService when the node
// is insecure, and /ws when connections are not authenticated.
func (n *Node) openEndpoints(r role, admin []string, rpc bool, doorOpen bool) []string {
	var open []string
	if r == public && n.edge != nil {
		// With hooks-connect the backend authenticates hellos, whatever
		// the authenticator (it then only checks refreshes).
		if _, dev := n.opts.Auth.(auth.Dev); dev && !n.opts.Hooks.Policy.Connect {
			what := "/ws (connections are not authenticated: the token is the user id"
			if n.opts.Edge.AnyOrigin {
				what += "; any origin"
			}
			open = append(open, what+")")
		}
	}
	if doorOpen {
		if rpc {
			open = append(open, "RoomService (/corral.v1.RoomService/*)")
		}
		open = append(open, admin...)
	}
	return slices.Clip(open)
}

// needKeys refuses an internal listener without keys on a node that is not
// insecure.
func needKeys(what string, opts Options) error {
	if len(opts.APIKeys) > 0 || opts.APIInsecure {
		return nil
	}
	return fmt.Errorf("server: %s needs API keys (--api-keys), or api-insecure (--insecure-dev) for local development", what)
}
