package grants

import "time"

// CacheLen reports how many users r caches, for tests of its bound.
func CacheLen(r *Redis) int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.cache)
}

// SetNow gives r's cache another clock; call it before r is used.
func SetNow(r *Redis, now func() time.Time) { r.now = now }
