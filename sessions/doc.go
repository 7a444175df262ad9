// Package sessions keeps resumable client sessions: who a session belongs
// to, its secret resume token, and where it is in each room.
//
// A session outlives its connection by the TTL, refreshed while connected
// (Touch) and at disconnect, so a client that reconnects in time resumes
// where it left off. The TTL must exceed the worst delay of the server
// itself (a stalled process, a slow disconnect, a full flush interval)
// plus the longest backoff a client waits before reconnecting, and it must
// also cover a server restart of 5–15 s. In the W1 load test a 5 s TTL,
// shorter than the server's own delay, lost 386 sessions that clients then
// tried to resume. The default is 2 minutes.
//
// Two stores implement [Store]: [Memory] for a single process and [Redis],
// shared by all processes. In Redis a session is one hash that expires with
// the session:
//
//	<prefix>:session:<id>   hash
//	    tok       hex SHA-256 of the resume token (the token itself is
//	              never stored)
//	    uid       user id
//	    ct        creation time, Unix ms
//	    s:<room>  last processed seq in room
//	    e:<room>  epoch of room's history that seq belongs to
//
// Acks are frequent, so [Redis] buffers them and writes each session's
// dirty rooms with one command per flush. Creates, resumes, touches and
// room changes come in herds (a reconnect storm), so [Redis] writes those
// arriving together in one call of write.lua (batch.go): a lone call goes
// at once, and calls arriving while a batch is in Redis go in the next one.
// On a Redis Cluster, where sessions hash to different slots, each is its
// own call, all in one pipeline.
package sessions
