// Package redisguard keeps every Redis store call bounded and every Redis
// outage visible. A [Guard] wraps the rueidis client each store uses
// ([Guard.Wrap]): each command gets one deadline, the store timeout, so
// that a partitioned or stalled Redis costs a caller a retry-later error
// within that bound instead of a hang until the connection is declared
// dead; failures are counted by store and kind (timeout, connection,
// other). The Guard also counts reconnects (its [Guard.Dial] opens the
// client's connections) and probes Redis in the background, so that
// /readyz answers from a cached state ([Guard.Ready]) and an operator gets
// one log line when an outage starts and one when it ends. The probe also
// notices a Redis master that stops being one (a failover, or a restart),
// counted in corral_store_failovers_total and logged.
package redisguard
