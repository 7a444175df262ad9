package history

// InFlight reports how many calls of r wait on Redis, for tests of the
// in-flight bound.
func InFlight(r *Redis) int64 { return r.limit.InFlight() }
