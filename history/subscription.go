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

	kick    chan struct{} // wakes flushLoop; capacity 1
	flushed chan struct{} // closed when flushLoop returns

	mu sync.RWMutex // guards the following fields
	// rooms is the set of subscribed rooms; the batch that subscribes
	// each is closed once Redis confirms.
	rooms  map[string]*batch
	dc     rueidis.DedicatedClient
	closed bool
	// ops are SUBSCRIBE and UNSUBSCRIBE batches waiting for flushLoop, in
	// the order the set changed, so that Redis ends where the set is.
	ops []*batch
}

// confirmed stands for a SUBSCRIBE that Redis confirmed on the current
// connection, for rooms subscribed by a reconnect.
var confirmed = func() *batch {
	b := &batch{done: make(chan struct{})}
	close(b.done)
	return b
}()

// batch is one SUBSCRIBE or UNSUBSCRIBE of rooms. Rooms added (or
// removed) while a command is in flight wait in one batch for the next:
// a thousand joins at once cost a few round trips, not a thousand.
type batch struct {
	unsub bool
	rooms []string
	done  chan struct{} // closed when sent; err is set before
	err   error
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
		kick:    make(chan struct{}, 1),
		flushed: make(chan struct{}),
		rooms:   make(map[string]*batch),
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
	go s.flushLoop()
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
		batches := make([]*batch, 0, len(s.rooms))
		for room, b := range s.rooms {
			rooms = append(rooms, room)
			batches = append(batches, b)
		}
		s.mu.Unlock()
		old.Close()
		err = s.subscribe(ctx, dc, rooms)
		cancel()
		if err != nil {
			dc.Close() // so that wait reports it, and try again
			continue
		}
		// Rooms whose SUBSCRIBE failed on the old connection are confirmed
		// now.
		// Rooms removed meanwhile may have been subscribed again here:
		// unsubscribe them after.
		s.mu.Lock()
		var stale *batch
		for i, room := range rooms {
			b, ok := s.rooms[room]
			switch {
			case b == batches[i]:
				s.rooms[room] = confirmed
			case !ok:
				if stale == nil {
					stale = s.batchLocked(true)
				}
				stale.rooms = append(stale.rooms, room)
			}
		}
		s.mu.Unlock()
		if stale != nil {
			s.wake()
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
// appended afterwards are delivered. Rooms added concurrently share one
// SUBSCRIBE. On a connection error the rooms stay in the set and are
// subscribed on reconnect.
func (s *Subscription) Add(ctx context.Context, rooms ...string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("history: subscription add: %w", errClosed)
	}
	var wait []*batch
	var b *batch
	for _, room := range rooms {
		if old, ok := s.rooms[room]; ok {
			wait = append(wait, old)
			continue
		}
		if b == nil {
			b = s.batchLocked(false)
			wait = append(wait, b)
		}
		b.rooms = append(b.rooms, room)
		s.rooms[room] = b
	}
	s.mu.Unlock()
	s.wake()
	for _, b := range wait {
		select {
		case <-b.done:
		case <-ctx.Done():
			return fmt.Errorf("history: subscription add: %w", ctx.Err())
		}
		if b.err != nil {
			return fmt.Errorf("history: subscription add: %w", b.err)
		}
	}
	return nil
}

// Remove unsubscribes from rooms; once it returns, their messages are no
// longer delivered. The UNSUBSCRIBE itself is sent in the background,
// batched with others.
func (s *Subscription) Remove(ctx context.Context, rooms ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("history: subscription remove: %w", errClosed)
	}
	s.removeLocked(func(room string) bool { return true }, rooms)
	return nil
}

// RemoveIf unsubscribes from every room for which gone reports true, as
// Remove does. It does not block: gone may read state the caller guards
// with its own lock, held during the call, so that a concurrent Add
// cannot be undone by a decision taken before it.
func (s *Subscription) RemoveIf(gone func(room string) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0
	}
	return s.removeLocked(gone, nil)
}

// removeLocked removes the rooms (all subscribed rooms when nil) that
// gone picks and queues their UNSUBSCRIBE. Lock must be held.
func (s *Subscription) removeLocked(gone func(string) bool, rooms []string) int {
	var b *batch
	drop := func(room string) {
		if _, ok := s.rooms[room]; !ok || !gone(room) {
			return
		}
		delete(s.rooms, room)
		if b == nil {
			b = s.batchLocked(true)
		}
		b.rooms = append(b.rooms, room)
	}
	if rooms == nil {
		for room := range s.rooms {
			drop(room)
		}
	} else {
		for _, room := range rooms {
			drop(room)
		}
	}
	if b == nil {
		return 0
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return len(b.rooms)
}

// batchLocked returns the open batch of that kind at the tail of the
// queue, or appends one. Lock must be held.
func (s *Subscription) batchLocked(unsub bool) *batch {
	if n := len(s.ops); n > 0 && s.ops[n-1].unsub == unsub {
		return s.ops[n-1]
	}
	b := &batch{unsub: unsub, done: make(chan struct{})}
	s.ops = append(s.ops, b)
	return b
}

func (s *Subscription) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// flushLoop sends the queued batches in order, one command in flight at a
// time, until Close.
func (s *Subscription) flushLoop() {
	defer close(s.flushed)
	for {
		select {
		case <-s.ctx.Done():
			s.mu.Lock()
			ops := s.ops
			s.ops = nil
			s.mu.Unlock()
			for _, b := range ops {
				b.err = errClosed
				close(b.done)
			}
			return
		case <-s.kick:
		}
		for {
			s.mu.Lock()
			if len(s.ops) == 0 {
				s.mu.Unlock()
				break
			}
			b := s.ops[0]
			s.ops = s.ops[1:]
			dc := s.dc
			s.mu.Unlock()
			ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
			err := s.send(ctx, dc, b)
			cancel()
			if err != nil {
				s.mu.Lock()
				switch {
				case s.dc != dc || b.unsub:
					// A new connection subscribes every room in the set;
					// an UNSUBSCRIBE on a broken one is moot.
					err = nil
				default:
					// The callers fail; the rooms leave the set, so that
					// the next Add tries again.
					for _, room := range b.rooms {
						if s.rooms[room] == b {
							delete(s.rooms, room)
						}
					}
				}
				s.mu.Unlock()
			}
			b.err = err
			close(b.done)
		}
	}
}

func (s *Subscription) send(ctx context.Context, dc rueidis.DedicatedClient, b *batch) error {
	if !b.unsub {
		return s.subscribe(ctx, dc, b.rooms)
	}
	rooms := b.rooms
	for len(rooms) > 0 {
		n := min(len(rooms), subscribeBatch)
		chs := make([]string, n)
		for i, room := range rooms[:n] {
			chs[i] = s.r.channel(room)
		}
		if err := dc.Do(ctx, dc.B().Unsubscribe().Channel(chs...).Build()).Error(); err != nil {
			return err
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
		<-s.flushed
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
