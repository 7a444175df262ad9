package pubsub

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/corral-rt/corral/internal/retry"
	"github.com/redis/rueidis"
)

// ErrClosed is returned (wrapped) by calls on a closed [Subscriber].
var ErrClosed = errors.New("pubsub: closed")

// batchSize is the most channels one SUBSCRIBE names.
const batchSize = 512

// opTimeout bounds each round of commands on the connections.
const opTimeout = 5 * time.Second

// Sharded reports whether client is a Redis Cluster client, for which
// publishers must use SPUBLISH and a [Subscriber] uses SSUBSCRIBE.
func Sharded(client rueidis.Client) bool {
	return client.Mode() == rueidis.ClientModeCluster
}

// Options configures [New]. The handlers are called one at a time, from
// goroutines that read connections or the Subscriber's own: they must not
// block nor call the Subscriber's methods.
type Options struct {
	// OnMessage is called with each message of a channel in the set.
	OnMessage func(channel, message string)
	// OnResubscribed is called once per channel in the set after the
	// channel was subscribed again, on a new connection or on the node its
	// slot moved to: messages published meanwhile were not delivered. It
	// comes before any message of the new subscription.
	OnResubscribed func(channel string)
}

// Subscriber keeps a set of channels subscribed. All methods may be called
// concurrently.
type Subscriber struct {
	client  rueidis.Client
	sharded bool
	opts    Options

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	kick   chan struct{} // wakes loop; capacity 1
	done   chan struct{} // closed when loop returns
	once   sync.Once

	hmu sync.Mutex // serializes handler calls; guards gapped
	// gapped are channels being subscribed again whose OnResubscribed is
	// still due: it goes out before their first message on the new
	// subscription, or once the subscription is confirmed.
	gapped map[string]bool

	mu sync.RWMutex // guards the following fields
	// chans is the set.
	chans map[string]*entry
	// ops are SUBSCRIBE and UNSUBSCRIBE batches waiting for loop, in the
	// order the set changed, so that Redis ends where the set is.
	ops []*batch
	// conns are the connections by node address ("" when not sharded).
	conns map[string]*conn
	// owners maps a slot to its master's address; sharded only.
	owners []string
	// stale: owners must be read again before use.
	stale bool
	// lost: some confirmed channels are subscribed nowhere (entry.c nil).
	lost   bool
	closed bool
}

// entry is one channel of the set.
type entry struct {
	b *batch // the SUBSCRIBE that adds it, or confirmed
	c *conn  // where Redis confirmed it; nil before, or once lost
}

// conn is a dedicated connection to one node.
type conn struct {
	addr   string
	dc     rueidis.DedicatedClient
	broken bool // guarded by Subscriber.mu
}

// batch is one SUBSCRIBE or UNSUBSCRIBE of channels. Channels added (or
// removed) while a command is in flight wait in one batch for the next: a
// thousand joins at once cost a few round trips, not a thousand.
type batch struct {
	unsub bool
	chans []string
	done  chan struct{} // closed when sent; err is set before
	err   error
}

// confirmed stands for a SUBSCRIBE that Redis confirmed.
var confirmed = func() *batch {
	b := &batch{done: make(chan struct{})}
	close(b.done)
	return b
}()

// New starts a Subscriber with no channels on client, which the caller
// keeps and closes after the Subscriber. It fails when Redis cannot be
// reached (nor, on Cluster, its topology read).
func New(ctx context.Context, client rueidis.Client, opts Options) (*Subscriber, error) {
	if opts.OnMessage == nil {
		opts.OnMessage = func(string, string) {}
	}
	if opts.OnResubscribed == nil {
		opts.OnResubscribed = func(string) {}
	}
	s := &Subscriber{
		client:  client,
		sharded: Sharded(client),
		opts:    opts,
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		chans:   make(map[string]*entry),
		conns:   make(map[string]*conn),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	var err error
	if s.sharded {
		err = s.readOwners(ctx)
	} else {
		_, err = s.connTo(ctx, "")
	}
	if err != nil {
		s.cancel()
		s.closeConns()
		return nil, fmt.Errorf("pubsub: start: %w", err)
	}
	go s.loop()
	return s, nil
}

// Add adds channels to the set; it returns once Redis has confirmed them,
// so messages published afterwards are delivered. Channels added
// concurrently share one SUBSCRIBE. When ctx ends first, the channels stay
// in the set and are subscribed later.
func (s *Subscriber) Add(ctx context.Context, chans ...string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("pubsub: add: %w", ErrClosed)
	}
	var wait []*batch
	var b *batch
	for _, ch := range chans {
		if e, ok := s.chans[ch]; ok {
			wait = append(wait, e.b)
			continue
		}
		if b == nil {
			b = s.batchLocked(false)
			wait = append(wait, b)
		}
		b.chans = append(b.chans, ch)
		s.chans[ch] = &entry{b: b}
	}
	s.mu.Unlock()
	s.wake()
	for _, b := range wait {
		select {
		case <-b.done:
		case <-ctx.Done():
			return fmt.Errorf("pubsub: add: %w", ctx.Err())
		}
		if b.err != nil {
			return fmt.Errorf("pubsub: add: %w", b.err)
		}
	}
	return nil
}

// Remove takes channels out of the set; once it returns, their messages
// are no longer delivered. The UNSUBSCRIBE itself is sent in the
// background, batched with others. It fails only on a closed Subscriber.
func (s *Subscriber) Remove(chans ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("pubsub: remove: %w", ErrClosed)
	}
	s.removeLocked(func(string) bool { return true }, chans)
	return nil
}

// RemoveIf takes out every channel for which gone reports true, as Remove
// does, and returns how many. It does not block: gone may read state the
// caller guards with its own lock, held during the call, so that a
// concurrent Add cannot be undone by a decision taken before it.
func (s *Subscriber) RemoveIf(gone func(channel string) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removeLocked(gone, nil)
}

// removeLocked removes the channels (all of the set when nil) that gone
// picks and queues their UNSUBSCRIBE. Lock must be held.
func (s *Subscriber) removeLocked(gone func(string) bool, chans []string) int {
	if s.closed {
		return 0
	}
	var b *batch
	drop := func(ch string) {
		if _, ok := s.chans[ch]; !ok || !gone(ch) {
			return
		}
		delete(s.chans, ch)
		if b == nil {
			b = s.batchLocked(true)
		}
		b.chans = append(b.chans, ch)
	}
	if chans == nil {
		for ch := range s.chans {
			drop(ch)
		}
	} else {
		for _, ch := range chans {
			drop(ch)
		}
	}
	if b == nil {
		return 0
	}
	s.wake()
	return len(b.chans)
}

// batchLocked returns the open batch of that kind at the tail of the
// queue, or appends one. Lock must be held.
func (s *Subscriber) batchLocked(unsub bool) *batch {
	if n := len(s.ops); n > 0 && s.ops[n-1].unsub == unsub {
		return s.ops[n-1]
	}
	b := &batch{unsub: unsub, done: make(chan struct{})}
	s.ops = append(s.ops, b)
	return b
}

func (s *Subscriber) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Close ends the subscriptions and waits for the Subscriber's goroutine.
// It is safe to call twice.
func (s *Subscriber) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		<-s.done
		s.closeConns()
	})
	return nil
}

func (s *Subscriber) closeConns() {
	s.mu.Lock()
	conns := s.conns
	s.conns = make(map[string]*conn)
	s.mu.Unlock()
	for _, c := range conns {
		c.dc.Close()
	}
}

// loop sends the queued batches and subscribes lost channels again, with
// backoff while that fails, until Close. It is the only goroutine that
// sends commands on the connections.
func (s *Subscriber) loop() {
	defer close(s.done)
	b := retry.Backoff{Base: 50 * time.Millisecond, Cap: 2 * time.Second}
	for {
		select {
		case <-s.ctx.Done():
			s.failQueued()
			return
		case <-s.kick:
		}
		for {
			more, err := s.step()
			if err == nil {
				b.Reset()
				if !more {
					break
				}
				continue
			}
			if !b.Wait(s.ctx) {
				s.failQueued()
				return
			}
		}
	}
}

// failQueued fails the batches nobody will send.
func (s *Subscriber) failQueued() {
	s.mu.Lock()
	ops := s.ops
	s.ops = nil
	s.mu.Unlock()
	for _, b := range ops {
		b.err = ErrClosed
		close(b.done)
	}
}

// step does one unit of work: drop broken connections, read the topology
// when stale, subscribe lost channels again, send the first queued batch.
// It reports whether work remains.
func (s *Subscriber) step() (more bool, err error) {
	ctx, cancel := context.WithTimeout(s.ctx, opTimeout)
	defer cancel()
	s.mu.Lock()
	var broken []*conn
	for addr, c := range s.conns {
		if c.broken {
			broken = append(broken, c)
			delete(s.conns, addr)
		}
	}
	stale, lost := s.stale && s.sharded, s.lost
	s.mu.Unlock()
	for _, c := range broken {
		c.dc.Close()
	}
	if stale {
		if err := s.readOwners(ctx); err != nil {
			return true, err
		}
	}
	if lost {
		if err := s.resubscribe(ctx); err != nil {
			return true, err
		}
	}
	s.mu.Lock()
	var b *batch
	if len(s.ops) > 0 {
		b = s.ops[0]
		s.ops = s.ops[1:]
	}
	s.mu.Unlock()
	if b != nil {
		if err := s.send(ctx, b); err != nil {
			return true, err
		}
	}
	s.mu.RLock()
	more = len(s.ops) > 0 || s.lost || (s.stale && s.sharded)
	s.mu.RUnlock()
	return more, nil
}

// send sends batch b. A SUBSCRIBE that a topology change refused goes back
// to the head of the queue and send returns an error (loop backs off); one
// that failed otherwise fails its callers, and its channels leave the set
// so that the next Add tries again.
func (s *Subscriber) send(ctx context.Context, b *batch) error {
	if b.unsub {
		// Best effort: a channel lost with its connection or slot is not
		// subscribed anywhere, and messages are filtered by the set.
		for _, g := range s.route(ctx, b.chans, true) {
			for _, err := range s.exec(ctx, g.c, true, g.chans) {
				if err != nil {
					s.mu.Lock()
					s.failedLocked(g.c, err)
					s.mu.Unlock()
					break
				}
			}
		}
		close(b.done)
		return nil
	}
	s.mu.RLock()
	var chans []string
	for _, ch := range b.chans {
		if e, ok := s.chans[ch]; ok && e.b == b {
			chans = append(chans, ch)
		}
	}
	s.mu.RUnlock()
	_, errs := s.subscribe(ctx, chans, b)
	if len(errs) == 0 {
		close(b.done)
		return nil
	}
	s.mu.Lock()
	var retry bool
	for ch, err := range errs {
		e, ok := s.chans[ch]
		if !ok || e.b != b {
			continue
		}
		if isTopology(err) {
			retry = true
			continue
		}
		delete(s.chans, ch)
		if b.err == nil {
			b.err = err
		}
	}
	if retry {
		s.ops = append([]*batch{b}, s.ops...)
	}
	s.mu.Unlock()
	if retry {
		return fmt.Errorf("pubsub: subscribe: %w", errMoved)
	}
	close(b.done)
	return nil
}

// subscribe subscribes chans, each on its node, for batch b or, when b is
// nil, again after they were lost. It returns the channels it subscribed
// and the errors of the others.
func (s *Subscriber) subscribe(ctx context.Context, chans []string, b *batch) ([]string, map[string]error) {
	errs := make(map[string]error)
	var done []string
	for _, g := range s.route(ctx, chans, false) {
		if g.err != nil {
			for _, ch := range g.chans {
				errs[ch] = g.err
			}
			continue
		}
		for i, err := range s.exec(ctx, g.c, false, g.chans) {
			if s.confirm(g.chans[i], b, g.c, err, errs) {
				done = append(done, g.chans[i])
			}
		}
	}
	return done, errs
}

// confirm records the outcome of ch's SUBSCRIBE on c, sent for batch b,
// or for a lost channel when b is nil. Failures go to errs. It reports
// whether ch is now subscribed on c for that reason.
func (s *Subscriber) confirm(ch string, b *batch, c *conn, err error, errs map[string]error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failedLocked(c, err)
		errs[ch] = err
		return false
	}
	e, ok := s.chans[ch]
	switch {
	case !ok, b != nil && e.b != b, b == nil && (e.b != confirmed || e.c != nil):
		return false // removed, or added again, meanwhile
	}
	e.b, e.c = confirmed, c
	if c.broken {
		// It broke meanwhile: whatever broke it found e.c nil.
		e.c, s.lost = nil, true
	}
	return true
}

// failedLocked notes what an error on c says about the topology or c.
// Lock must be held.
func (s *Subscriber) failedLocked(c *conn, err error) {
	switch {
	case isTopology(err):
		s.stale = true
	case !isRedisErr(err):
		s.brokeLocked(c)
	}
}

var errMoved = errors.New("pubsub: slot owner unknown")

func isRedisErr(err error) bool {
	_, ok := rueidis.IsRedisErr(err)
	return ok
}

// isTopology reports whether err says a slot is elsewhere or in motion.
func isTopology(err error) bool {
	if errors.Is(err, errMoved) {
		return true
	}
	e, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	_, moved := e.IsMoved()
	_, ask := e.IsAsk()
	return moved || ask || e.IsTryAgain() || e.IsClusterDown()
}

// resubscribe subscribes the lost channels again, then tells
// OnResubscribed about each.
func (s *Subscriber) resubscribe(ctx context.Context) error {
	s.mu.Lock()
	s.lost = false
	var chans []string
	for ch, e := range s.chans {
		if e.b == confirmed && e.c == nil {
			chans = append(chans, ch)
		}
	}
	s.mu.Unlock()
	s.hmu.Lock()
	if s.gapped == nil {
		s.gapped = make(map[string]bool)
	}
	for _, ch := range chans {
		s.gapped[ch] = true
	}
	s.hmu.Unlock()
	done, errs := s.subscribe(ctx, chans, nil)
	var err error
	if len(errs) > 0 {
		s.mu.Lock()
		s.lost = true
		s.mu.Unlock()
		for _, e := range errs {
			err = e
			break
		}
	}
	s.hmu.Lock()
	for _, ch := range done {
		s.signalGapLocked(ch)
	}
	for ch := range s.gapped {
		if !s.has(ch) {
			delete(s.gapped, ch) // left the set meanwhile
		}
	}
	s.hmu.Unlock()
	if err != nil {
		return fmt.Errorf("pubsub: subscribe again: %w", err)
	}
	return nil
}

// group is channels routed to one connection, or the error that
// prevented opening it.
type group struct {
	c     *conn
	err   error
	chans []string
}

// route groups chans by the connection to the node that owns each,
// opening connections as needed (except for unsub, which only uses open
// ones: a channel can be subscribed nowhere else).
func (s *Subscriber) route(ctx context.Context, chans []string, unsub bool) []group {
	byAddr := make(map[string][]string)
	s.mu.RLock()
	for _, ch := range chans {
		addr := ""
		if s.sharded {
			addr = s.owners[Slot(ch)]
		}
		byAddr[addr] = append(byAddr[addr], ch)
	}
	s.mu.RUnlock()
	out := make([]group, 0, len(byAddr))
	for addr, cs := range byAddr {
		g := group{chans: cs}
		if unsub {
			s.mu.RLock()
			g.c = s.conns[addr]
			s.mu.RUnlock()
			if g.c == nil {
				continue
			}
		} else if g.c, g.err = s.connTo(ctx, addr); g.err != nil && isTopology(g.err) {
			s.mu.Lock()
			s.stale = true
			s.mu.Unlock()
		}
		out = append(out, g)
	}
	return out
}

// connTo returns the open connection to the node at addr, or opens one.
func (s *Subscriber) connTo(ctx context.Context, addr string) (*conn, error) {
	s.mu.RLock()
	c, ok := s.conns[addr]
	ok = ok && !c.broken
	s.mu.RUnlock()
	if ok {
		return c, nil
	}
	client := s.client
	if s.sharded {
		if addr == "" {
			return nil, errMoved
		}
		if client, ok = s.client.Nodes()[addr]; !ok {
			return nil, fmt.Errorf("node %s: %w", addr, errMoved)
		}
	}
	dc, _ := client.Dedicate()
	c = &conn{addr: addr, dc: dc}
	wait := dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: s.onMessage,
		OnSubscription: func(p rueidis.PubSubSubscription) {
			if p.Kind == "sunsubscribe" {
				s.moved(c, p.Channel)
			}
		},
	})
	if err := dc.Do(ctx, dc.B().Ping().Build()).Error(); err != nil {
		dc.Close()
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		dc.Close()
		return nil, ErrClosed
	}
	if old := s.conns[addr]; old != nil {
		old.broken = true // closed by the next step
	}
	s.conns[addr] = c
	s.mu.Unlock()
	go func() {
		<-wait
		s.mu.Lock()
		s.brokeLocked(c)
		s.mu.Unlock()
		s.wake()
	}()
	return c, nil
}

// brokeLocked marks c broken and its channels lost. Lock must be held.
func (s *Subscriber) brokeLocked(c *conn) {
	if c.broken {
		return
	}
	c.broken = true
	s.stale = true // a node may have failed over
	for _, e := range s.chans {
		if e.c == c {
			e.c, s.lost = nil, true
		}
	}
}

// moved handles an "sunsubscribe" on c: for a channel still in the set
// (not one that Remove unsubscribed), its slot moved to another node.
func (s *Subscriber) moved(c *conn, ch string) {
	s.mu.Lock()
	e, ok := s.chans[ch]
	if ok && e.c == c {
		e.c, s.lost, s.stale = nil, true, true
	}
	s.mu.Unlock()
	if ok {
		s.wake()
	}
}

// exec sends (UN)SUBSCRIBE, sharded or not, for chans on c, in as few
// commands as it may (one slot each when sharded), pipelined. It returns
// each channel's error.
func (s *Subscriber) exec(ctx context.Context, c *conn, unsub bool, chans []string) []error {
	var groups [][]int // indexes into chans, one command each
	if s.sharded {
		bySlot := make(map[uint16][]int)
		for i, ch := range chans {
			bySlot[Slot(ch)] = append(bySlot[Slot(ch)], i)
		}
		for _, idx := range bySlot {
			groups = append(groups, idx)
		}
	} else {
		idx := make([]int, len(chans))
		for i := range idx {
			idx[i] = i
		}
		groups = append(groups, idx)
	}
	var cmds rueidis.Commands
	var cmdIdx [][]int
	for _, g := range groups {
		for len(g) > 0 {
			n := min(len(g), batchSize)
			names := make([]string, n)
			for i, j := range g[:n] {
				names[i] = chans[j]
			}
			b := c.dc.B()
			var cmd rueidis.Completed
			switch {
			case s.sharded && unsub:
				cmd = b.Sunsubscribe().Channel(names...).Build()
			case s.sharded:
				cmd = b.Ssubscribe().Channel(names...).Build()
			case unsub:
				cmd = b.Unsubscribe().Channel(names...).Build()
			default:
				cmd = b.Subscribe().Channel(names...).Build()
			}
			cmds = append(cmds, cmd)
			cmdIdx = append(cmdIdx, g[:n])
			g = g[n:]
		}
	}
	errs := make([]error, len(chans))
	if len(cmds) == 0 {
		return errs
	}
	for i, res := range c.dc.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			for _, j := range cmdIdx[i] {
				errs[j] = err
			}
		}
	}
	return errs
}

// readOwners reads which master owns each slot (CLUSTER SLOTS).
func (s *Subscriber) readOwners(ctx context.Context) error {
	ranges, err := s.client.Do(ctx, s.client.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return fmt.Errorf("pubsub: read the cluster's slots: %w", err)
	}
	owners := make([]string, Slots)
	for _, r := range ranges {
		f, err := r.ToArray()
		if err != nil || len(f) < 3 {
			return errors.New("pubsub: malformed CLUSTER SLOTS reply")
		}
		lo, err1 := f[0].AsInt64()
		hi, err2 := f[1].AsInt64()
		node, err3 := f[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(node) < 2 || lo < 0 || hi >= Slots || lo > hi {
			return errors.New("pubsub: malformed CLUSTER SLOTS reply")
		}
		host, _ := node[0].ToString()
		port, _ := node[1].AsInt64()
		addr := net.JoinHostPort(host, strconv.FormatInt(port, 10))
		for slot := lo; slot <= hi; slot++ {
			owners[slot] = addr
		}
	}
	s.mu.Lock()
	s.owners, s.stale = owners, false
	s.mu.Unlock()
	return nil
}

func (s *Subscriber) onMessage(m rueidis.PubSubMessage) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	s.signalGapLocked(m.Channel)
	if s.has(m.Channel) {
		s.opts.OnMessage(m.Channel, m.Message)
	}
}

// signalGapLocked calls OnResubscribed for ch if it is due: once per
// resubscription, before anything ch's new subscription delivers. hmu must
// be held.
func (s *Subscriber) signalGapLocked(ch string) {
	if !s.gapped[ch] {
		return
	}
	delete(s.gapped, ch)
	if s.has(ch) {
		s.opts.OnResubscribed(ch)
	}
}

// has reports whether ch is in the set.
func (s *Subscriber) has(ch string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.chans[ch]
	return ok
}
