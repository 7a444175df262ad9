package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/sessions"
)

// Core is the room service. It implements
// corralv1connect.RoomServiceHandler. All methods are safe for concurrent use.
type Core struct {
	corralv1connect.UnimplementedRoomServiceHandler

	cfg      Config
	hist     history.Store
	sess     sessions.Store
	ownStore bool
	metrics  *metrics

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex // guards the following fields
	// rooms holds rooms that have members or work in flight.
	rooms map[string]*room
	// live holds sessions attached to a connection, by session id.
	live   map[string]*session
	links  map[*link]struct{}
	closed bool
}

var _ corralv1connect.RoomServiceHandler = (*Core)(nil)

// New returns a running Core. Close stops it.
func New(cfg Config) *Core {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Core{
		cfg:     cfg,
		hist:    cfg.History,
		sess:    cfg.Sessions,
		metrics: newMetrics(cfg.Registerer),
		ctx:     ctx,
		cancel:  cancel,
		rooms:   make(map[string]*room),
		live:    make(map[string]*session),
		links:   make(map[*link]struct{}),
	}
	if c.hist == nil {
		c.hist = history.NewMemory(history.MemoryOptions{})
		c.ownStore = true
	}
	if c.sess == nil {
		c.sess = sessions.NewMemory(sessions.Options{TTL: cfg.SessionTTL})
		c.ownStore = true
	}
	c.wg.Add(1)
	go c.touchLoop()
	return c
}

// Close ends every link (their clients are told to resume), stops background
// work and closes the stores the Core created itself. Safe to call twice.
func (c *Core) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	links := make([]*link, 0, len(c.links))
	for l := range c.links {
		links = append(links, l)
	}
	c.mu.Unlock()
	for _, l := range links {
		l.fail(errCoreClosed)
	}
	c.cancel()
	c.wg.Wait()
	if c.ownStore {
		return errors.Join(c.sess.Close(), c.hist.Close())
	}
	return nil
}

var errCoreClosed = errors.New("core: closed")

// touchLoop keeps the sessions of connected clients from expiring.
func (c *Core) touchLoop() {
	defer c.wg.Done()
	period := c.cfg.SessionTTL / 3
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		ids := make([]string, 0, len(c.live))
		for id := range c.live {
			ids = append(ids, id)
		}
		c.mu.Unlock()
		for _, id := range ids {
			ctx, cancel := context.WithTimeout(c.ctx, period)
			if err := c.sess.Touch(ctx, id); err != nil && !errors.Is(err, sessions.ErrNotFound) {
				c.cfg.Logger.Warn("session touch failed", "session", id, "err", err)
			}
			cancel()
		}
	}
}

// validRoom checks a room name: 1..MaxRoomName bytes of printable UTF-8.
func (c *Core) validRoom(name string) error {
	if name == "" {
		return errors.New("core: empty room name")
	}
	if len(name) > c.cfg.MaxRoomName {
		return fmt.Errorf("core: room name longer than %d bytes", c.cfg.MaxRoomName)
	}
	if !utf8.ValidString(name) {
		return errors.New("core: room name is not UTF-8")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return errors.New("core: room name has control characters")
		}
	}
	return nil
}

// acquireRoom returns the live room for name, creating it (and loading its
// state from history) when needed. The caller must call releaseRoom when done
// so that empty rooms are forgotten.
func (c *Core) acquireRoom(ctx context.Context, name string) (*room, error) {
	c.mu.Lock()
	r, ok := c.rooms[name]
	if !ok {
		r = newRoom(c, name)
		c.rooms[name] = r
		c.metrics.rooms.Inc()
	}
	r.refs++
	c.mu.Unlock()
	if err := r.load(ctx); err != nil {
		c.releaseRoom(r)
		return nil, err
	}
	return r, nil
}

// releaseRoom drops a reference taken by acquireRoom and forgets the room
// when nothing uses it.
func (c *Core) releaseRoom(r *room) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r.refs--
	if r.refs > 0 {
		return
	}
	r.mu.Lock()
	empty := len(r.members) == 0
	r.mu.Unlock()
	if empty && c.rooms[r.name] == r {
		delete(c.rooms, r.name)
		c.metrics.rooms.Dec()
	}
}
