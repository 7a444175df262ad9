// Package frame builds the frames the core sends on a link and sizes
// them. Every place in the core that builds a CoreFrame, or a ServerFrame
// more than one concept sends, calls one of its constructors
// ([Live], [Position], [Replay], [Membership], [Session], …). Each
// CoreFrame says what it is (proto/corral/link/v1/link.proto), and those
// the edge keeps positions from state the position, so the edge never
// reads it from the ServerFrame it forwards.
//
// [Size] is a CoreFrame's encoded size, which the core's link queue is
// bounded by: exactly proto.Size, computed from the fields of the frames
// joins, connects and the fan-out send.
//
// # Concurrency
//
// Its functions hold no state and are safe for concurrent use; a frame
// they return is shared by every link it is queued on and must not be
// changed once queued.
package frame
