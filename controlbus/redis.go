package controlbus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/corral-rt/corral/internal/pubsub"
	"github.com/corral-rt/corral/internal/retry"
	"github.com/redis/rueidis"
)

// Bus sends commands to the other cores of a deployment. All methods may
// be called concurrently.
type Bus interface {
	// Publish sends cmd to every other core listening on the bus and
	// returns how many received it (a lower bound on Redis Cluster).
	Publish(ctx context.Context, cmd []byte) (int, error)
	// Listen sets the function called with every command another core
	// published. It runs on the bus's goroutine: it must not block.
	Listen(fn func(cmd []byte))
	// Close stops listening. Safe to call twice.
	Close() error
}

// RedisOptions configure a Redis bus.
type RedisOptions struct {
	// Prefix names the channel, "{prefix}:control". Default "corral".
	Prefix string
}

// Redis is a Bus on a Redis pub/sub channel shared by every core using
// the same Redis and prefix. A command published while another core's
// subscription is down (Redis restarting) is lost for that core.
type Redis struct {
	client  rueidis.Client
	channel string
	// origin tags this bus's commands, so that it skips its own.
	origin string
	cancel context.CancelFunc
	done   chan struct{}

	// askChannel carries queries; replyPrefix + origin a core's answers.
	askChannel, replyPrefix string
	// answering holds a slot per query being answered (maxAnswering).
	answering chan struct{}
	// answers are the answering goroutines, which Close waits for.
	answers sync.WaitGroup

	mu     sync.Mutex // guards the following fields
	listen func([]byte)
	answer func(context.Context, []byte) []byte
	// pending are the Asks waiting for answers, by query id.
	pending map[string]chan []byte
	// askSubscribed and replySubscribed: the query and answer
	// subscriptions are up (ask.go).
	askSubscribed, replySubscribed bool
	// subscribed: this bus's own subscription is up, so a publish counts
	// it among the receivers.
	subscribed bool
}

var _ Bus = (*Redis)(nil)

// NewRedis returns a bus and starts listening. Close stops it; it does
// not close client.
func NewRedis(client rueidis.Client, o RedisOptions) *Redis {
	if o.Prefix == "" {
		o.Prefix = "corral"
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	ctx, cancel := context.WithCancel(context.Background())
	r := &Redis{
		client:  client,
		channel: o.Prefix + ":control",
		origin:  hex.EncodeToString(b[:]),
		cancel:  cancel,
		done:    make(chan struct{}),

		askChannel:  o.Prefix + ":control:ask",
		replyPrefix: o.Prefix + ":control:reply:",
		answering:   make(chan struct{}, maxAnswering),
		pending:     make(map[string]chan []byte),
	}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); r.run(ctx) }()
	go func() {
		defer wg.Done()
		r.follow(ctx, r.askChannel, func(up bool) { r.mu.Lock(); r.askSubscribed = up; r.mu.Unlock() },
			func(m string) { r.onAsk(ctx, m) })
	}()
	go func() {
		defer wg.Done()
		r.follow(ctx, r.replyPrefix+r.origin, func(up bool) { r.mu.Lock(); r.replySubscribed = up; r.mu.Unlock() }, r.onReply)
	}()
	go func() { wg.Wait(); close(r.done) }()
	return r
}

// A message on the channel is the publisher's origin, a newline, and the
// command.

// Publish sends cmd to the other cores.
func (r *Redis) Publish(ctx context.Context, cmd []byte) (int, error) {
	msg := r.origin + "\n" + string(cmd)
	n, err := r.client.Do(ctx, r.client.B().Publish().Channel(r.channel).Message(msg).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("controlbus: publish: %w", err)
	}
	// This core's own subscription counts as a receiver.
	r.mu.Lock()
	self := r.subscribed
	r.mu.Unlock()
	if self && n > 0 {
		n--
	}
	return int(n), nil
}

// Listen sets the function called with other cores' commands.
func (r *Redis) Listen(fn func(cmd []byte)) {
	r.mu.Lock()
	r.listen = fn
	r.mu.Unlock()
}

// run follows the channel until ctx ends, subscribing again after a
// failure.
func (r *Redis) run(ctx context.Context) {
	b := retry.Backoff{Base: 50 * time.Millisecond, Cap: 5 * time.Second, ResetAfter: 10 * time.Second}
	rctx := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
		r.mu.Lock()
		r.subscribed = s.Kind == "subscribe"
		r.mu.Unlock()
	})
	for ctx.Err() == nil {
		b.Start()
		_ = pubsub.Receive(rctx, r.client, r.channel, func(m rueidis.PubSubMessage) {
			cmd, err := Decode(r.origin, m.Message)
			if err != nil {
				return // its own command, or not one
			}
			r.mu.Lock()
			fn := r.listen
			r.mu.Unlock()
			if fn != nil {
				fn(cmd)
			}
		})
		r.mu.Lock()
		r.subscribed = false
		r.mu.Unlock()
		b.Wait(ctx)
	}
}

// ErrOwn is returned by Decode for a message this bus published.
var ErrOwn = errors.New("controlbus: own command")

// Decode splits a channel message into its origin and command, and
// refuses messages from self or without an origin.
func Decode(self, msg string) ([]byte, error) {
	origin, cmd, ok := strings.Cut(msg, "\n")
	switch {
	case !ok || origin == "":
		return nil, errors.New("controlbus: message without an origin")
	case origin == self:
		return nil, ErrOwn
	}
	return []byte(cmd), nil
}

// Close stops listening. Safe to call twice.
func (r *Redis) Close() error {
	r.cancel()
	<-r.done
	r.answers.Wait()
	return nil
}
