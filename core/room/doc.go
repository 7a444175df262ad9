// Package room holds one room's live state on a core: its position in
// history (seq and epoch) and the order it hands messages to its members
// in, the fan-out once per link, the gap fill from history, the catch-up
// after pub/sub missed messages, the reset to a new epoch, a member's join
// (BeginJoin, then GoLive with what it missed) and leave, the live
// messages held for a write delay, its open growing messages (the bodies
// the deltas of replace chunks are made against, a joiner's prefixes:
// [GrowView]), the room's signals, its presence (its view of the shared
// presence store, its subscribers and their diffs once per tick, split
// into bounded frames: [Presence]) and
// its keyed state (the mirror of the state store that delivers changes in
// position order, a joiner's snapshot or a resume's kept changes, the
// catch-up reads and the expiry timer: [Keyed]). The core keeps one
// [Room] per room in use; it sees a member only as a [Member] (its
// session) at an [Endpoint] (a connection on a link), and gives every
// room the stores, the class table, the metrics and what the room calls
// of it through one [Options].
//
// # Concurrency
//
// A Room's methods are safe for concurrent use. One lock per room, not
// exported, guards its fields, the [Catchup] of its joining members, its
// [Presence] and its [Keyed] state: every change to a room, and every
// frame queued for it on its links, happens under it, so every member
// sees the same sequence and a Joined frame precedes the first message
// after it. Methods named ...Locked need the lock held, and are this
// package's own: the [JoinHooks], which GoLive calls with it held, touch
// no room state; the other methods take it. A room's [Signals] have their own
// lock, taken after the room's, never before: a signal is set under it
// alone. Load's state read has its own lock too (loadMu), never held with
// the room's. The [JoinHooks] must not block on anything that takes the
// room's lock. No frame is written under the lock: a link's queue never
// blocks (core/linkserver).
package room
