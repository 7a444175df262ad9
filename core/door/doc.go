// Package door holds the core's admission decisions that need no session:
// the one rule for room names, whether the Join hook decides a room and for
// how long its answer is cached, the token's and the run-time grants, and
// the set of users whose grants changed (which the core's grantsLoop
// enforces, one user at a time, under the door's enforcement lock).
//
// The core (core/door.go) keeps what touches a session — sending
// refusals, counting them by reason, removing a member — and asks a Door
// for each decision, so every path into a room still passes the one door
// (issue 17, issue 37).
//
// Concurrency: a Door is safe for concurrent use. Its options are
// read-only after New; the changed-users set has its own lock, and Changed
// never blocks (the store's callback calls it); Enforce serializes the
// enforcement runs.
package door
