package grants

// CacheLen reports how many users r caches, for tests of its bound.
func CacheLen(r *Redis) int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.cache)
}
