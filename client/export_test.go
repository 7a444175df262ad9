package client

import "math/rand/v2"

// BackoffWithRand returns b drawing its jitter from r, for deterministic
// tests. r is not safe for concurrent use.
func BackoffWithRand(b Backoff, r *rand.Rand) Backoff {
	b.rng = r
	return b
}
