package server

import (
	"context"
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
