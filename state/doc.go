// Package state stores each room's keyed state: keys with values and
// versions, set, deleted and compared-and-set by their writers, some with
// a TTL, and the room's ordered stream of changes (docs/STATE.md).
//
// Every room's state has an epoch (a random id naming one unbroken
// history of it) and a position: the number of changes so far, each
// change taking the next. A reader keeps (epoch, position): a [Snapshot]
// is the whole state at a position, and [Store.Since] returns the changes
// after a position, or [ErrTooOld] when they are no longer all kept (the
// store keeps the newest Limits.MaxChanges) or the epoch is another one:
// the reader then takes a new snapshot. Nothing is skipped silently.
//
// A key's version is 1 when it is set first and one more per change;
// deleting it ends it (setting it again starts at 1). A compare-and-set
// (Set.CAS) writes only when the key's version is Set.Version (0: the key
// must not exist), else [ErrConflict].
//
// TTL: a key set with a TTL is removed at its deadline, and the removal is
// a change (Expired) like a delete. The store applies due expiries when
// it next touches the room, before the operation, in deadline order:
// every operation does, and [Store.Expire], which a holder of the room
// calls at [Snapshot.NextExpiry] so that members see the expiry when it
// happens, not at the next write. Deadlines are read from the store's
// clock (MemoryOptions.Now, RedisOptions.Now): with several processes
// sharing a Redis, expiry is as exact as their clocks agree.
//
// Two stores implement [Store]: [Memory] for one process and [Redis],
// where every operation is one Lua script on the room's keys (hash-tagged
// by room, so a Redis Cluster keeps a room on one slot; prefix defaults to
// "corral"):
//
//	<prefix>:{<room>}:state        hash, key → "<version> <expires ms> <value>"
//	<prefix>:{<room>}:state:ttl    sorted set, key by its deadline (ms)
//	<prefix>:{<room>}:state:log    stream, entry id "<position>-0": the change
//	<prefix>:{<room>}:state:meta   hash: epoch, position
//	<prefix>:{<room>}:state:ch     pub/sub channel carrying each change as
//	                               it is written (for live delivery), or
//	                               the room's message channel instead
//	                               (RedisOptions.Channel, as corral runs:
//	                               one subscription per room), each change
//	                               tagged by a leading NUL byte
//
// All four keys expire together after RedisOptions.TTL without a write
// (Memory forgets a room after MemoryOptions.TTL the same way); a state
// lost that way (or by a flush, or a restart of Memory) comes back empty
// under a new epoch, and a reader with the old epoch gets ErrTooOld. A
// room with no state reads as the empty epoch at position 0, whose
// reader continues into the epoch the room's first write opens.
//
// All methods of both stores may be called concurrently.
package state
