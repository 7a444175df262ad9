// Package core is corral's room service: it owns rooms, gives every room one
// gapless order (seq), fans each message out once per edge link, and keeps
// resumable sessions.
//
// Edges reach the core through [Core.Link] streams (LinkService.Link in
// proto/corral/link/v1/link.proto, internal), served by package
// core/linkserver; each stream multiplexes many client connections. Internal services call the RoomService methods
// of [Core.API] (package core/api): Publish, Broadcast, History, Members,
// Disconnect, and Events, which follows the event log of the history
// store (package events) and to which the core adds member events
// (package core/eventlog).
//
// # Packages
//
// Package core assembles the packages under core/, each one concept with
// its own doc comment and concurrency contract: core/api (the internal
// API's handlers), core/door (the door's
// decisions: names, grants, hooks, read-only classes), core/eventlog (member
// events for the log), core/everycore (every_core: questions to the
// other cores, merges), core/frame (the frames sent on a link, their
// constructors and encoded size), core/linkserver (the LinkService stream
// server: each link's reader, bounded queue and sender, the open links),
// core/pubrate (the room classes' publish budgets), core/replay (the
// joins' batched history reads), core/room (one room's live state: its
// order, fan-out, gap fill, joins and leaves, write delay, growing
// messages' deltas, signals, presence and keyed state; the core's side
// is roomparts.go), core/session (a client session while it is attached:
// its rooms, member info, presence rooms, paged joins, publish budgets and
// refusals, its connection's ordered work queue, and its life: attach,
// resume, take-over, join, detach; the core's side, the lifecycle's
// ports, is sessionparts.go), core/sessiontable (the sessions attached to a
// connection).
// The rest of the core's concepts are still files of this package
// (docs/ARCHITECTURE.md "Inside the core").
//
// # Authorization
//
// Every way into a room (a Join, each room of a resume) and every Publish
// and Signal passes one door, door.go and package core/door: name
// validation, grants, the hooks, the read-only policy and the
// rooms-per-connection bound live there and nowhere else.
//
// # Ordering
//
// Every change to a room (a published message, a member joining or leaving)
// happens under that room's lock, and every frame for the room is queued on
// the member links while the lock is held. Since a link delivers its queue in
// order, every member of a room sees the same sequence, and a Joined frame
// always precedes the first message after it.
//
// # Concurrency
//
// Each link (package core/linkserver) has one reader goroutine, which hands
// its frames in order to the core's side of the link (linkconns.go: each
// connection's ordered work queue, core/session's Work), and one sender goroutine
// that drains its bounded queue without blocking and sends everything that
// was ready as one stream message. Producers never block on a link: a link
// whose queue overflows is closed, and its clients resume through their
// sessions.
package core
