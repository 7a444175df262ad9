// Package session holds a client session as a core holds it while a
// connection is attached: the [Session] (its user and identity, its rooms
// and its member info in each, the rooms it is counted in for presence,
// the joins waiting for the edge to take a replay page, its publish
// budgets, and the refusals and frames sent to its client), the
// [JoinReq] of a room it joins or resumes, and the connection's ordered
// work queue ([Work]): the attach, the client's frames, a refresh, a
// replay page taken, the internal API's tasks and the detach, in order;
// and a session's life ([Lifecycle], lifecycle.go: attach, resume and
// the take-over, the joins and going live, detach, the touch of attached
// sessions), with what it decides alone (resume.go: the [Welcome], a
// refused resume's close, the rooms a resume rejoins). What the work
// does with a frame is the core's: it reaches the core only through the
// [Core] interface and the bounds and metrics of one [WorkOptions] per
// core; the lifecycle reaches it only through its ports (ports.go), one
// small interface per capability: [Table], [Rooms], [Admission],
// [Reads], [Presence], [Events], and the session store itself.
//
// # Concurrency
//
// A [Session]'s methods are safe for concurrent use. One lock per
// session, not exported, guards its endpoint, its rooms, whether it is
// gone, its presence rooms, its member info per room and its paged
// joins; its id, user, default member info, protocol, attach time and
// work queue are set by [New] and never change; its identity and the
// frame being handled are atomics. The lock is taken inside a room's
// lock (WaitPage, from a room's JoinHooks) and never held while calling
// out: no room's lock is taken under it and no frame is written under
// it (a link's queue never blocks).
//
// A [Work] has its own lock, which guards its queue and state and is
// never held while the core's work runs. A connection's work runs on
// one goroutine at a time, one frame or task at a time, in the order
// they were pushed: the core's handlers for one connection never run
// concurrently. Different connections run in parallel, at most as many
// at once on a link as its workers channel holds. Push, PushTask and
// Detach never block.
//
// A [Lifecycle] has no lock and no state but its ports, set once before
// any connection; its methods may be called concurrently, a session's
// own from its connection's work, one at a time (Attach, Join, GoLive,
// Detach), and TouchLoop on a goroutine of its own. It holds no lock
// while calling a port.
package session
