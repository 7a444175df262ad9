// Package events is the log of committed room events that backends follow
// through RoomService.Events: messages, members joining, leaving and
// disconnecting, across all rooms, each at a position.
//
// A position is an opaque string; a reader that resumes after the last
// position it processed gets every later event exactly once, in log order,
// or an error wrapping [ErrGap] when the log no longer holds them. The log
// is bounded: the oldest events are trimmed past its length.
//
// Two logs implement [Log]: [Memory], a ring in process memory (lost on
// restart, which readers see as ErrGap), and [Redis], one Redis Stream
// shared by every core on the same Redis. Message events are committed by
// the history store in the same step as the message (see
// history.MemoryOptions.Events and history.RedisOptions.Events), so a
// message is in the log if and only if it is in history; member events are
// appended by the core.
//
// Every event carries a number n that grows by one per event in the log,
// with no gaps, and every log has an epoch, a random id chosen when it is
// created. A position names the epoch, n and (Redis) the stream entry id.
// A reader checks that the first event it reads after a position is number
// n+1 of the same epoch, which detects exactly both trimming and a log that
// was reset (a restart, a flushed Redis).
//
// The Redis stream (key "<prefix>:events") is one key for every room, so on
// Redis Cluster, where a room's keys live on the room's slot, history
// cannot commit a message's event in its append script: it calls
// [Redis.AppendMessage] after the append instead, which is not atomic with
// it (see there).
package events
