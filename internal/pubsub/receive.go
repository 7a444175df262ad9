package pubsub

import (
	"context"

	"github.com/redis/rueidis"
)

// Receive subscribes channel (SUBSCRIBE) on a connection of its own and
// calls fn with each message, until ctx ends or the connection breaks; it
// returns why. A subscription hook on ctx (rueidis.WithOnSubscriptionHook)
// sees the confirmations. The connection is closed after, never pooled
// again with a subscription on it.
//
// For a store that follows one fixed channel (grants, controlbus); a
// changing set of channels is a Subscriber's. Not client.Receive: that
// subscribes on the client's shared pipeline, whose one reader hands each
// message to every subscriber of the channel through a buffer of 16 and
// blocks while one is full. A second subscriber of the same channel,
// still waiting for its SUBSCRIBE reply (which is read after those
// messages), then stops every command on that connection for good:
// grants.TestRedisBatchedGets hung 17 minutes so, its reads queued behind
// the stuck reader.
func Receive(ctx context.Context, client rueidis.Client, channel string, fn func(rueidis.PubSubMessage)) error {
	dc, release := client.Dedicate()
	defer release()
	defer dc.Close()
	return dc.Receive(ctx, dc.B().Subscribe().Channel(channel).Build(), fn)
}
