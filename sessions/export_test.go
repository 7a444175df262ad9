package sessions

// AckWrites reports how many ack commands r has sent to Redis.
func AckWrites(r *Redis) int64 { return r.writes.Load() }

// InFlight reports how many calls of r wait on Redis.
func InFlight(r *Redis) int64 { return r.limit.InFlight() }
