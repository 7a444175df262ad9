// Package presence keeps who is in each room: per room, the users present
// with a small state they set and their connection count, shared by every
// core of a deployment.
//
// A [Store] counts connections per user, room and core. A user is a member
// while any core counts a connection of theirs; the first connection
// makes a [Joined] change, the last one gone a [Left] change, and anything
// else (state, connection count) an [Updated] change. Every change carries
// the room's presence version, one more than the change before, so that a
// reader that misses one can tell and read the room again with List.
//
// [Memory] serves one process. [Redis] is shared: each change is one Lua
// script on keys hash-tagged by room (corral:{room}:pres:*), published on
// the room's presence channel in the same script. Each Redis store
// heartbeats as a core; when a core stops heartbeating for DeadAfter, a
// sweep by any other core removes its connections, room by room, each room
// in one script, so that each member it held leaves exactly once.
//
// Grace windows (a dropped connection that may resume) are the caller's:
// the store only counts.
package presence
