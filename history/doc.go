// Package history stores each room's ordered, durable message log and
// assigns its seq.
//
// Every room has a seq that starts at 1 and grows by one per appended
// message, with no gaps, and an epoch: a random id that names one unbroken
// history of the room. When a history is lost (Redis flushed or restarted
// without persistence, keys expired), the room starts over at seq 1 under a
// new epoch, so a client holding a position from the old epoch gets a reset
// instead of a silent gap.
//
// Two stores implement [Store]: [Memory], a ring buffer per room for a single
// process, and [Redis], a Redis Stream per room that several processes share.
// Both forget a room's history after a lifetime without appends (TTL,
// default 24h), after which the room starts over under a new epoch; Memory
// also forgets at once a room that has no message and nobody holds, so
// made-up room names cost nothing (see [Memory.Hold]).
// In Redis one Lua script (append.lua) assigns the seq, stores, trims and
// publishes each message, so the order on a room's pub/sub channel (see
// [Redis.Subscribe]) equals seq order across all processes.
//
// Redis keys, all hash-tagged by room so that Redis Cluster keeps a room on
// one slot (prefix defaults to "corral"):
//
//	<prefix>:{<room>}:seq            string, the newest assigned seq
//	<prefix>:{<room>}:epoch          string, the history's epoch
//	<prefix>:{<room>}:log            stream, entry id "<seq>-0", one field
//	                                 "m" holding the Message in protobuf
//	<prefix>:{<room>}:dedupe:<key>   string "<seq> <epoch>", lives for the
//	                                 dedupe window
//	<prefix>:{<room>}:here           string "1", written on the master only
//	                                 (never replicated): see below
//	<prefix>:{<room>}:grow:<id>      hash, a growing message as assembled
//	                                 (grow.go, grow.lua): epoch, first and
//	                                 last chunk's seq, version, final, body
//	<prefix>:{<room>}:ch             pub/sub channel carrying the same bytes,
//	                                 and an empty publication when the room
//	                                 moves to a new epoch
//
// Redis replicates asynchronously, so a failover may lose a room's newest
// messages while its epoch key survives. Callers that know a room's
// position pass it ([LossFence]): a stream that ends below it moves to a
// new epoch, never reusing a seq. That misses a loss when the first
// process to append after the failover never saw the lost messages, so
// the here key marks a history as written on this server: a promoted
// replica lacks it, and the first append there opens a new epoch
// whoever appends (the surviving messages keep their seqs). A
// [Subscription] hears of any such bump before the new epoch's messages.
// RedisOptions.Replicas instead makes an append wait (WAIT) until
// replicas have it, and then a failover keeps the epochs.
//
// The seq, epoch, log and here keys expire together after RedisOptions.TTL
// without appends.
//
// With an event log (MemoryOptions.Events, RedisOptions.Events), Append
// also commits the message's event in the same step: under the room's lock
// in memory, in append.lua in Redis (an entry in the stream
// "<prefix>:events", see package events). That stream is one key for every
// room, so on Redis Cluster it cannot share the script: there the event is
// written by a second command after the append, not atomically with it.
//
// Growing messages ([Grower], grow.go): a message written in chunks whose
// every chunk takes the room's next seq and is a Message in the log with
// Chunk set, while the store keeps the message as assembled, updated in
// the same step (grow.lua in Redis), so that [Grower.Assembled] gives a
// joiner a prefix and the exact seq it covers. The final chunk's event is
// the assembled message.
//
// On Redis Cluster append.lua publishes with SPUBLISH and a [Subscription]
// subscribes with SSUBSCRIBE on one connection per node (package
// internal/pubsub), resubscribing a room on its new node when its slot
// moves.
package history
