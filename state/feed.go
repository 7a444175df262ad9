package state

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/corral-rt/corral/internal/pubsub"
)

// Feed brings the changes every process writes to a [Redis] store, as
// they are written, for the rooms added to it (their [Redis.Channel]).
// A change may be lost in transit (a broken connection, a Cluster slot
// that moved): OnGap says so per room, and a reader closes the gap with
// [Store.Since]. All methods may be called concurrently.
type Feed struct {
	r   *Redis
	sub *pubsub.Subscriber
}

// FeedOptions are [Redis.Follow]'s handlers. They are called one at a
// time from the feed's goroutines and must not block nor call the Feed.
type FeedOptions struct {
	// OnChange is called with each change of a room added, and its epoch.
	OnChange func(room, epoch string, c Change)
	// OnGap is called when some changes of room may have been missed.
	OnGap func(room string)
}

// Follow starts a Feed on the store's client. Close stops it. A store
// whose changes ride the rooms' message channels (RedisOptions.Channel)
// has no Feed: the messages' subscription brings them.
func (r *Redis) Follow(ctx context.Context, opts FeedOptions) (*Feed, error) {
	if r.channel != nil {
		return nil, errors.New("state: follow: the changes ride the rooms' message channels (RedisOptions.Channel)")
	}
	f := &Feed{r: r}
	sub, err := pubsub.New(ctx, r.client, pubsub.Options{
		OnMessage: func(channel, message string) {
			room, ok := r.roomOf(channel)
			if !ok || opts.OnChange == nil {
				return
			}
			epoch, c, err := ParseChange([]byte(message))
			if err != nil {
				if opts.OnGap != nil {
					opts.OnGap(room)
				}
				return
			}
			opts.OnChange(room, epoch, c)
		},
		OnResubscribed: func(channel string) {
			if room, ok := r.roomOf(channel); ok && opts.OnGap != nil {
				opts.OnGap(room)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("state: follow: %w", err)
	}
	f.sub = sub
	return f, nil
}

// roomOf is the room of a channel [Redis.Channel] names.
func (r *Redis) roomOf(channel string) (string, bool) {
	rest, ok := strings.CutPrefix(channel, r.prefix+":{")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "}:state:ch")
}

// Add follows room; it returns once the subscription is confirmed, so
// that a Snapshot read after it misses no change.
func (f *Feed) Add(ctx context.Context, room string) error {
	return f.sub.Add(ctx, f.r.Channel(room))
}

// RemoveIf stops following the rooms for which gone is true, and says
// how many.
func (f *Feed) RemoveIf(gone func(room string) bool) int {
	return f.sub.RemoveIf(func(ch string) bool {
		room, ok := f.r.roomOf(ch)
		return ok && gone(room)
	})
}

// Close stops the feed. It is safe to call twice.
func (f *Feed) Close() error { return f.sub.Close() }
