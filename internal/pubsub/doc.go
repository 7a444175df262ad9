// Package pubsub keeps a changing set of Redis pub/sub channels subscribed
// on dedicated connections, and says which channels may have missed
// messages because a connection broke or Redis Cluster moved their slot.
//
// On a single Redis it uses SUBSCRIBE on one connection. On Redis Cluster
// (a rueidis client in cluster mode, see [Sharded]) it uses sharded pub/sub
// (Redis 7): SSUBSCRIBE, on one connection per master, the one that owns
// the channel's hash slot; publishers use SPUBLISH, so that a message
// travels only within its shard. When a slot leaves a node, Redis ends its
// channels' subscriptions there with an "sunsubscribe" push; the
// [Subscriber] then reads the topology again (CLUSTER SLOTS) and subscribes
// those channels on their new owner.
//
// history (room messages) and presence (room presence changes) both
// subscribe through it.
package pubsub
