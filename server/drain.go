package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Drain takes the node's edge out of service without dropping anything:
// /readyz turns unready, new connections are refused, and every client is
// told to resume after a delay spread over window (0: the edge's
// DrainWindow). It returns when the clients have gone or ctx ends. Close
// the node afterwards. A node without an edge has nothing to drain.
func (n *Node) Drain(ctx context.Context, window time.Duration) error {
	if n.edge == nil {
		return nil
	}
	return n.edge.Drain(ctx, window)
}

// drainHandler serves POST /admin/drain[?window=10s]: it drains the edge
// (see Drain) and answers when the clients have gone; the process then
// exits (Drained). mountAdmin serves it on internal listeners only, behind
// the API key.
func (n *Node) drainHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var window time.Duration
		if v := r.URL.Query().Get("window"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				http.Error(w, "window: want a duration such as 10s", http.StatusBadRequest)
				return
			}
			window = d
		}
		start := time.Now()
		err := n.Drain(r.Context(), window)
		n.drainOnce.Do(func() { close(n.drained) })
		w.Header().Set("Content-Type", "application/json")
		resp := map[string]any{"drained": err == nil, "seconds": time.Since(start).Seconds()}
		if err != nil {
			resp["error"] = err.Error()
		}
		json.NewEncoder(w).Encode(resp)
	})
}

// Drained is closed after a drain through POST /admin/drain: the process
// should then shut down (cmd/corral does).
func (n *Node) Drained() <-chan struct{} { return n.drained }
