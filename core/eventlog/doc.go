// Package eventlog is the core's writer of member events (joined, left,
// disconnected, presence) to the event log of package events, and the
// filter of an Events stream.
//
// The event log holds committed room events for backends. Message events
// are committed by the history store with the message; member events are
// queued here without blocking the member's path and appended in batches
// by one goroutine ([Log.Run]), shortly after the change. The queue is
// bounded: when the log is unreachable for long, the newest member events
// are dropped and counted by reason (corral_core_events_dropped_total,
// reasons.go).
//
// # Concurrency
//
// A [Log]'s methods are safe for concurrent use and the Emit methods never
// block; one goroutine runs [Log.Run]. A [Filter] is read-only once made.
package eventlog
