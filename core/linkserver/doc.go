// Package linkserver serves the core's side of the link
// (corral.link.v1.LinkService/Link, docs/ARCHITECTURE.md "The link"): one
// edge's stream, many client connections multiplexed on it. Its one job is
// to move frames between a stream and the core without ever blocking the
// core: it reads the edge's frames and hands them to the core's [Handler],
// and sends the core's frames from a bounded queue.
//
// # Concurrency
//
// Each [Link] has one reader goroutine (the Link call's own: it reads the
// stream and hands every frame, in order, to the [Conns] the handler gave
// for the link; Conns must not block) and one sender goroutine (sendLoop:
// it drains the queue without blocking and sends what was ready as one
// stream message). Producers (the rooms' fan-out, a connection's worker)
// call Enqueue, EnqueueSized, Send and Close from any goroutine; they never
// block: the queue is bounded (Options.QueueFrames; frame.Size counts its bytes for
// Backlog), and a link
// past it fails (the edge's clients resume elsewhere) instead of waiting.
//
// A link's mutex guards only why it failed; its queue has its own lock
// (internal/linkq). The [Server]'s set of links has its own lock, which may
// take a link's queue lock (in Each) and nothing else. No lock of this
// package is held while the core's Handler or Conns runs.
//
// The package never imports the core: the core sees it as a [Server] and
// [Link]s, and it sees the core only as a [Handler].
package linkserver
