// Package edge is corral's WebSocket front: it accepts browser connections,
// verifies their tokens, and carries their frames to the core over a few
// multiplexed Link streams. It holds no durable state: a restarted edge loses
// nothing, its clients resume their sessions.
//
// Each connection has one reader and one writer that owns a bounded queue
// of encoded frames. Neither holds a goroutine while the connection is
// idle: on Linux the reader parks the socket in the edge's epoll set and
// ends (park.go). Producers (a room's fan-out, the reader's answers, a
// close) only push to the queue and, when no writer holds the socket, hand
// it to its sender (sender.go, one goroutine per core for every
// connection): the sender drains the queue and writes it as one WebSocket
// message (a Batch frame when several) without blocking (conn.send).
// Frames queued while that write is under way, or while the socket has no
// room, go together in the next write, so a busy connection batches by
// itself (corral_edge_frames_per_flush) and no frame waits for a timer. A
// socket that does not take a whole write keeps the rest on its wire
// (wire.go) and waits for room in the poller's second epoll set
// (EPOLLOUT), again without a goroutine of its own. A room message arrives
// from the core once per link and is encoded once per encoding; every
// local member's queue gets the same bytes. A connection whose queue
// overflows is closed with CODE_SLOW_CONSUMER and resumes; it never holds
// back the rest of its room.
//
// A client without a WebSocket gets the same connection on an HTTP
// carrier (docs/TRANSPORTS.md): an SSE or streaming response that the same
// writer writes, with only the framing changed (carrier.go), and POSTs
// whose frames go through the same reader path, one POST at a time
// (stream.go).
package edge
