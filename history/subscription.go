package history

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"google.golang.org/protobuf/proto"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// subscribeBatch is the most channels one SUBSCRIBE names.
const subscribeBatch = 512

// Subscription receives the messages appended to a set of rooms, by any
// process, from Redis pub/sub on one dedicated connection. Within a room,
// messages arrive in seq order. All methods may be called concurrently.
//
// When the connection breaks, the subscription reconnects with backoff and
// subscribes its rooms again; messages published meanwhile are not
// delivered. After each such reconnect the handler is called once per
// subscribed room with a nil message, meaning "messages may have been
// missed: catch up from history".
type Subscription struct {
	r       *Redis
	handler func(room string, msg *corralv1.Message)
	ctx     context.Context // canceled by Close
	cancel  context.CancelFunc
	done    chan struct{} // closed when run returns
	once    sync.Once

	hmu sync.Mutex // serializes handler calls

	mu     sync.RWMutex // guards the following fields
	rooms  map[string]struct{}
	dc     rueidis.DedicatedClient
	closed bool
}

// Subscribe starts a subscription with no rooms; add them with
// [Subscription.Add]. The handler is called for each message of a
// subscribed room, one call at a time, from a goroutine that reads the
// connection: it must not block nor call the Subscription's methods. It must
// not modify msg.
func (r *Redis) Subscribe(ctx context.Context, handler func(room string, msg *corralv1.Message)) (*Subscription, error) {
	if r.closed.Load() {
		return nil, fmt.Errorf("history: subscribe: %w", errClosed)
	}
	s := &Subscription{
		r:       r,
		handler: handler,
		done:    make(chan struct{}),
		rooms:   make(map[string]struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	dc, wait, err := s.connect(ctx)
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("history: subscribe: %w", err)
	}
	s.dc = dc
	r.mu.Lock()
	r.subs[s] = struct{}{}
	r.mu.Unlock()
	go s.run(wait)
	return s, nil
}

// connect opens a dedicated connection that delivers pub/sub messages to s.
func (s *Subscription) connect(ctx context.Context) (rueidis.DedicatedClient, <-chan error, error) {
	dc, _ := s.r.client.Dedicate()
	wait := dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: s.onMessage})
	if err := dc.Do(ctx, dc.B().Ping().Build()).Error(); err != nil {
		dc.Close()
		return nil, nil, err
	}
	return dc, wait, nil
}

// run reconnects whenever the connection breaks, until Close.
func (s *Subscription) run(wait <-chan error) {
	defer close(s.done)
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-wait:
		}
		wait = s.reconnect()
		if wait == nil {
			return
		}
	}
}

// reconnect replaces the broken connection and subscribes all rooms on the
// new one. It returns nil when the subscription was closed.
func (s *Subscription) reconnect() <-chan error {
	backoff := 50 * time.Millisecond
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return nil
		case <-t.C:
		}
		t.Reset(backoff)
		backoff = min(2*backoff, 2*time.Second)

		ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		dc, wait, err := s.connect(ctx)
		if err != nil {
			cancel()
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			cancel()
			dc.Close()
			return nil
		}
		old := s.dc
		s.dc = dc
		rooms := make([]string, 0, len(s.rooms))
		for room := range s.rooms {
			rooms = append(rooms, room)
		}
		s.mu.Unlock()
		old.Close()
		err = s.subscribe(ctx, dc, rooms)
		cancel()
		if err != nil {
			dc.Close() // so that wait reports it, and try again
			continue
		}
		for _, room := range rooms {
			s.deliver(room, nil)
		}
		return wait
	}
}

func (s *Subscription) subscribe(ctx context.Context, dc rueidis.DedicatedClient, rooms []string) error {
	for len(rooms) > 0 {
		n := min(len(rooms), subscribeBatch)
		chs := make([]string, n)
		for i, room := range rooms[:n] {
			chs[i] = s.r.channel(room)
		}
		if err := dc.Do(ctx, dc.B().Subscribe().Channel(chs...).Build()).Error(); err != nil {
			return err
		}
		rooms = rooms[n:]
	}
	return nil
}

// Add subscribes to rooms; it returns once Redis has confirmed, so messages
// appended afterwards are delivered. On a connection error the rooms stay
// in the set and are subscribed on reconnect.
func (s *Subscription) Add(ctx context.Context, rooms ...string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("history: subscription add: %w", errClosed)
	}
	for _, room := range rooms {
		s.rooms[room] = struct{}{}
	}
	dc := s.dc
	s.mu.Unlock()
	if err := s.subscribe(ctx, dc, rooms); err != nil {
		s.mu.RLock()
		replaced := s.dc != dc
		s.mu.RUnlock()
		if replaced {
			// The new connection subscribes every room in the set.
			return nil
		}
		return fmt.Errorf("history: subscription add: %w", err)
	}
	return nil
}

// Remove unsubscribes from rooms; once it returns, their messages are no
// longer delivered.
func (s *Subscription) Remove(ctx context.Context, rooms ...string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("history: subscription remove: %w", errClosed)
	}
	for _, room := range rooms {
		delete(s.rooms, room)
	}
	dc := s.dc
	s.mu.Unlock()
	for len(rooms) > 0 {
		n := min(len(rooms), subscribeBatch)
		chs := make([]string, n)
		for i, room := range rooms[:n] {
			chs[i] = s.r.channel(room)
		}
		// Messages are filtered by the room set anyway, so a failure here
		// (the connection is gone) changes nothing for the caller.
		err := dc.Do(ctx, dc.B().Unsubscribe().Channel(chs...).Build()).Error()
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("history: subscription remove: %w", err)
		}
		rooms = rooms[n:]
	}
	return nil
}

// Close ends the subscription and waits for its goroutine. It is safe to
// call twice.
func (s *Subscription) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		dc := s.dc
		s.mu.Unlock()
		s.cancel()
		dc.Close()
		<-s.done
		s.r.mu.Lock()
		delete(s.r.subs, s)
		s.r.mu.Unlock()
	})
	return nil
}

func (s *Subscription) onMessage(m rueidis.PubSubMessage) {
	room, ok := strings.CutPrefix(m.Channel, s.r.prefix+":{")
	if ok {
		room, ok = strings.CutSuffix(room, "}:ch")
	}
	if !ok {
		return
	}
	msg := new(corralv1.Message)
	if err := proto.Unmarshal([]byte(m.Message), msg); err != nil {
		return
	}
	s.deliver(room, msg)
}

// deliver calls the handler if room is still subscribed.
func (s *Subscription) deliver(room string, msg *corralv1.Message) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	s.mu.RLock()
	_, ok := s.rooms[room]
	s.mu.RUnlock()
	if ok {
		s.handler(room, msg)
	}
}
