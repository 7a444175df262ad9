package sessions

// AckWrites reports how many ack commands r has sent to Redis.
func AckWrites(r *Redis) int64 { return r.writes.Load() }

// InFlight reports how many calls of r wait on Redis.
func InFlight(r *Redis) int64 { return r.limit.InFlight() }

// Batches reports how many write.lua calls r has sent to Redis.
func Batches(r *Redis) int64 { return r.batches.Load() }
