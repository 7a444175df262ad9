// Package grants keeps the room grants that internal services give to, or
// take away from, users at run time (RoomService.Grant and Revoke), beside
// the grants of the users' tokens.
//
// A user's [Grants] hold run-time grants and revocations, for join and for
// publish. A room is allowed when the token or a run-time grant matches it
// and no revocation matches it: a revocation always takes effect. A Grant
// lifts the revocations its patterns match (granting "game:*" lifts a
// revocation of "game:1", not the other way round); a Revoke removes the
// run-time grants its patterns match. [Allows] decides.
//
// [Memory] serves one process. [Redis] shares grants between every core
// using the same Redis: a change is stored and announced atomically, and
// each core drops its cached copy when it hears the announcement, or at the
// latest after a short TTL if it missed it.
package grants
