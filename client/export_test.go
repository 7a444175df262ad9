package client

import "math/rand/v2"

// BackoffWithRand returns b drawing its jitter from r, for deterministic
// tests. r is not safe for concurrent use.
func BackoffWithRand(b Backoff, r *rand.Rand) Backoff {
	b.rng = r
	return b
}

// ReadsRaw reports whether c reads its frames itself rather than through
// coder/websocket (see wire.go).
func ReadsRaw(c *Conn) bool { return c.raw != nil }
