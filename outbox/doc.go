// Package outbox publishes the rows an application commits to the
// corral_outbox table of its own PostgreSQL database: the message and its
// broadcast in one transaction, so that a crash between the two can neither
// lose a stored message's broadcast nor broadcast a rolled-back one
// (docs/OUTBOX.md).
//
// The table and its triggers are SQL migrations (migrations/*.sql, applied
// by [Migrate]). A [Relay] holds one connection per core: several cores may
// point at one database, and one of them at a time (the holder of a
// session advisory lock) delivers, the others wait to take over. The relay
// wakes on LISTEN/NOTIFY (and polls as a fallback), reads bounded batches
// in id order, publishes each row through the core's RoomService Publish
// with its idempotency key, then deletes the batch. Within a room, id order
// is commit order (the insert trigger draws the id under the room's lock),
// so rooms are delivered in commit order; a crash after publishing and
// before deleting re-publishes rows that the history's dedupe window makes
// duplicates.
//
// A Relay's Run is called once; its metrics may be read concurrently.
package outbox
