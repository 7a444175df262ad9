// Package hooks is corral's caller of the application's backend: the
// corral.v1.HooksService (proto/corral/v1/hooks.proto) the application
// implements, and corral calls to authenticate connections (Connect,
// Refresh), admit joins (Join, batched), validate publishes (Publish) and
// answer the clients' call frames (Call).
//
// Every hook has a timeout, a bound on the calls in flight (over it a call
// fails at once) and a circuit breaker; a call that cannot be answered
// returns an error wrapping [ErrUnavailable], and the caller applies the
// hook's failure policy ([Policy]). Join calls are coalesced: the joins
// asked for within a short window (every room of a resume, and the joins
// of every session of the process) go to the backend as one call of at
// most JoinMaxBatch pairs, and results may be cached for a TTL.
//
// A [Client] is safe for concurrent use. See docs/HOOKS.md.
package hooks
