package history

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/pubsub"
)

// Subscription receives the messages appended to a set of rooms, by any
// process, from Redis pub/sub: SUBSCRIBE on one dedicated connection, or
// on Redis Cluster SSUBSCRIBE on one connection per node (see package
// internal/pubsub). Within a room, messages arrive in seq order. All
// methods may be called concurrently.
//
// When a connection breaks, or Redis Cluster moves a room's slot to
// another node, the subscription subscribes the affected rooms again,
// with backoff; messages published meanwhile are not delivered. Then the
// handler is called once per such room with a nil message, meaning
// "messages may have been missed: catch up from history", before any
// message the new subscription delivers. It is also called so when a
// process moved a room to a new epoch because Redis lost messages or
// failed over (see [LossFence]), before the first message of the new
// epoch: the messages after it carry seqs the handler may already have
// seen in the old epoch, so it should deliver none of them before it has
// read the room's epoch from history.
type Subscription struct {
	r  *Redis
	ps *pubsub.Subscriber
	// tagged receives the publications whose first byte is 0 (see
	// Redis.Channel); nil: they are dropped.
	tagged atomic.Pointer[func(room string, data []byte)]
}

// OnTagged sets the handler of the tagged publications on the rooms'
// channels (first byte 0: not messages, see [Redis.Channel]), called as
// the message handler is: one call at a time, in the order published
// with the room's messages, from the goroutine reading the connection
// (it must not block); data is valid during the call only. Set it before
// adding rooms.
func (s *Subscription) OnTagged(fn func(room string, data []byte)) {
	s.tagged.Store(&fn)
}

// Subscribe starts a subscription with no rooms; add them with
// [Subscription.Add]. The handler is called for each message of a
// subscribed room, one call at a time, from a goroutine that reads a
// connection: it must not block nor call the Subscription's methods. It
// must not modify msg.
func (r *Redis) Subscribe(ctx context.Context, handler func(room string, msg *corralv1.Message)) (*Subscription, error) {
	if r.closed.Load() {
		return nil, fmt.Errorf("history: subscribe: %w", errClosed)
	}
	s := &Subscription{r: r}
	ps, err := pubsub.New(ctx, r.client, pubsub.Options{
		OnMessage: func(ch, data string) {
			room, ok := s.room(ch)
			if !ok {
				return
			}
			if data == "" {
				// The room moved to a new epoch (append.lua).
				handler(room, nil)
				return
			}
			if data[0] == 0 {
				if fn := s.tagged.Load(); fn != nil {
					(*fn)(room, []byte(data))
				}
				return
			}
			msg := new(corralv1.Message)
			if err := proto.Unmarshal([]byte(data), msg); err != nil {
				return
			}
			handler(room, msg)
		},
		OnResubscribed: func(ch string) {
			if room, ok := s.room(ch); ok {
				handler(room, nil)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("history: subscribe: %w", err)
	}
	s.ps = ps
	r.mu.Lock()
	r.subs[s] = struct{}{}
	r.mu.Unlock()
	return s, nil
}

// room returns the room of a channel name.
func (s *Subscription) room(ch string) (string, bool) {
	room, ok := strings.CutPrefix(ch, s.r.prefix+":{")
	if ok {
		room, ok = strings.CutSuffix(room, "}:ch")
	}
	return room, ok
}

func (s *Subscription) channels(rooms []string) []string {
	chs := make([]string, len(rooms))
	for i, room := range rooms {
		chs[i] = s.r.channel(room)
	}
	return chs
}

// Add subscribes to rooms; it returns once Redis has confirmed, so messages
// appended afterwards are delivered. Rooms added concurrently share one
// SUBSCRIBE. On a connection error the call fails and the rooms leave the
// set; when ctx ends first, they stay and are subscribed later.
func (s *Subscription) Add(ctx context.Context, rooms ...string) error {
	if err := s.ps.Add(ctx, s.channels(rooms)...); err != nil {
		if errors.Is(err, pubsub.ErrClosed) {
			err = errClosed
		}
		return fmt.Errorf("history: subscription add: %w", err)
	}
	return nil
}

// Remove unsubscribes from rooms; once it returns, their messages are no
// longer delivered. The UNSUBSCRIBE itself is sent in the background,
// batched with others.
func (s *Subscription) Remove(ctx context.Context, rooms ...string) error {
	if err := s.ps.Remove(s.channels(rooms)...); err != nil {
		return fmt.Errorf("history: subscription remove: %w", errClosed)
	}
	return nil
}

// RemoveIf unsubscribes from every room for which gone reports true, as
// Remove does. It does not block: gone may read state the caller guards
// with its own lock, held during the call, so that a concurrent Add
// cannot be undone by a decision taken before it.
func (s *Subscription) RemoveIf(gone func(room string) bool) int {
	return s.ps.RemoveIf(func(ch string) bool {
		room, ok := s.room(ch)
		return ok && gone(room)
	})
}

// Close ends the subscription and waits for its goroutines. It is safe to
// call twice.
func (s *Subscription) Close() error {
	err := s.ps.Close()
	s.r.mu.Lock()
	delete(s.r.subs, s)
	s.r.mu.Unlock()
	return err
}
