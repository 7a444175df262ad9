// Package edge is corral's WebSocket front: it accepts browser connections,
// verifies their tokens, and carries their frames to the core over a few
// multiplexed Link streams. It holds no durable state: a restarted edge loses
// nothing, its clients resume their sessions.
//
// Each connection has one reader and one writer that owns a bounded queue
// of encoded frames. Neither holds a goroutine while the connection is
// idle: on Linux the reader parks the socket in the edge's epoll set and
// ends (park.go), and the writer starts with work. A frame for an idle
// connection (nothing queued or being written, no write within
// Config.CoalesceWindow) is written at once, without blocking, by the
// goroutine that pushes it (the writer's role is taken for that one write;
// wire.go). A busy connection's frames queue instead, and the edge's
// flusher for it (flusher.go, one goroutine per core for every busy
// connection), once per window, drains everything queued and writes it as
// one WebSocket message (a Batch frame) without blocking: a busy
// connection costs one write per window, not one per frame
// (corral_edge_frames_per_flush), and no goroutine of its own. A socket
// that cannot take a message at once gets its writer, which may block,
// writes the rest and ends. A room message arrives from the core once per link and
// is encoded once per encoding; every local member's queue (or socket)
// gets the same bytes. A connection whose queue overflows is closed with
// CODE_SLOW_CONSUMER and resumes; it never holds back the rest of its room.
package edge
