package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/corral-rt/corral/core/api"
	"github.com/corral-rt/corral/core/door"
	"github.com/corral-rt/corral/core/eventlog"
	"github.com/corral-rt/corral/core/everycore"
	"github.com/corral-rt/corral/core/linkserver"
	"github.com/corral-rt/corral/core/pubrate"
	"github.com/corral-rt/corral/core/replay"
	csession "github.com/corral-rt/corral/core/session"
	"github.com/corral-rt/corral/core/sessiontable"
	"github.com/corral-rt/corral/events"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/grants"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/sessions"
)

// Core is the room service: it serves the edges' Link streams
// (linkv1connect.LinkServiceHandler), and its internal API is API's
// Service. All methods are safe for concurrent use.
type Core struct {
	cfg      Config
	hist     history.Store
	sess     sessions.Store
	ownStore bool
	metrics  *metrics
	// sub brings other processes' messages (shared stores only); nil when
	// this process is the only publisher.
	sub *history.Subscription

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// The concepts with their own state (and locks).
	api    *api.Service            // the internal API (core/api, apicore.go)
	events *eventlog.Log[*session] // member events for the log (core/eventlog)
	pres   presenceState           // presence.go
	// presErr is why the presence store could not be made; Start fails
	// with it (New falls back to memory).
	presErr error

	door   *door.Door    // the door's decisions (core/door)
	adm    *admission    // the core's side of the door (door.go)
	keyed  *stateRooms   // keyed room state: the store, each room's mirror (keyed.go)
	grow   grower        // growing messages (grow.go)
	missed *replay.Reads // joins' history reads, batched, bounded (core/replay)
	// page bounds one page of a join's replay (replay.go); tests lower it.
	page replayPage
	// pubRates are the room classes' publish budgets per (user, room),
	// which outlive a connection (core/pubrate).
	pubRates *pubrate.Table

	// id names this core in Info; started is when it began.
	id      string
	started time.Time

	// The three tables, each its own lock (never two held at once): the
	// rooms in use (roomtable.go), the sessions attached to a connection
	// (package core/sessiontable) and the open edge links (the link
	// server's, package core/linkserver).
	rooms    *roomTable
	roomOpts *roomOpts // what every room shares (roomparts.go)
	attached *sessiontable.Table[*session]
	workOpts *csession.WorkOptions // what every connection's work shares (sessionparts.go)
	// life is the sessions' attach, resume, joins and detach
	// (core/session, wired in sessionparts.go).
	life  *csession.Lifecycle
	links *linkserver.Server
	// linkOpts are the link server's settings, kept for tests' unserved
	// links.
	linkOpts linkserver.Options
}

// ControlAsker is a control bus that also carries queries between cores
// (controlbus.Redis implements it). Without one a core answers for
// itself.
type ControlAsker = everycore.Asker

// NodeQueryKind is the first byte of a question for the process around
// each core rather than for the core (Config.NodeQuery,
// api.Service.AskNodes).
const NodeQueryKind = everycore.NodeQueryKind

var _ linkv1connect.LinkServiceHandler = (*Core)(nil)

// Link serves one edge stream until the edge closes it or it fails
// (package core/linkserver).
func (c *Core) Link(ctx context.Context, stream linkv1connect.LinkServiceLinkServerStream) error {
	return c.links.Link(ctx, stream)
}

// API is the core's internal API, the RoomService handler the server
// registers.
func (c *Core) API() *api.Service { return c.api }

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
		id:      newNodeID(),
		started: time.Now(),
	}
	c.grow = grower{c: c}
	c.door = door.New(door.Options{
		Grants:      cfg.Grants,
		Class:       c.class,
		Hooks:       cfg.Hooks,
		MaxRoomName: cfg.MaxRoomName,
		Logger:      cfg.Logger,
		Refused:     func(r door.Reason) { c.metrics.refuse(doorReasons[r]) },
	})
	if g, ok := c.door.Grants().(*grants.Memory); ok {
		c.metrics.memoryGrants(cfg.Registerer, g)
	}
	if c.hist == nil {
		c.hist = history.NewMemory(history.MemoryOptions{Events: events.NewMemory(events.MemoryOptions{})})
		c.ownStore = true
	}
	c.keyed = newStateRooms(c)
	c.missed = c.newMissedReads(replay.MaxBatch, replay.MaxQueued)
	c.page = replayPage{messages: history.MaxPage, bytes: replayPageBytes}
	c.pubRates = pubrate.New(maxPublishBudgets)
	c.metrics.publishBudgets(cfg.Registerer, c.pubRates)
	c.roomOpts = newRoomOpts(c)
	c.workOpts = newWorkOpts(c)
	hold, _ := c.hist.(roomHolder)
	c.rooms = newRoomTable(func(name string) *room { return newRoom(c, name) }, hold, c.metrics.rooms)
	c.attached = sessiontable.New[*session](c.metrics.sessions)
	c.metrics.sessionDrops(cfg.Registerer, c.attached)
	c.linkOpts = linkserver.Options{
		QueueFrames: cfg.LinkQueue, Closed: errCoreClosed,
		Links: c.metrics.links, Sends: c.metrics.linkSends, Frames: c.metrics.linkFrames, Overflows: c.metrics.linkOverflows,
	}
	c.links = linkserver.New(linkHandler{c}, c.linkOpts)
	if c.sess == nil {
		mem := sessions.NewMemory(sessions.Options{TTL: cfg.SessionTTL})
		c.metrics.memorySessions(cfg.Registerer, mem)
		c.sess = mem
		c.ownStore = true
	}
	apiCfg := cfg.API.withDefaults()
	c.events = eventlog.New[*session](eventlog.Options{
		Store: c.hist, Limit: apiCfg.EventQueue,
		Keep:   func(room string) bool { return c.class(room).EventsStream },
		Logger: cfg.Logger, Registerer: cfg.Registerer,
	})
	if c.events.Store() != nil {
		c.wg.Go(func() { c.events.Run(c.ctx) })
	}
	parts := presenceParts{
		ctx: c.ctx, logger: cfg.Logger, class: c.class,
		rooms: c.rooms, attached: c.attached, events: c.events, failed: c.storeFailed,
	}
	if err := c.pres.init(c.cfg.Presence, parts); err != nil {
		c.presErr = err
		c.cfg.Logger.Error("presence store failed; presence is local to this core", "err", err)
		c.cfg.Presence.NewStore = nil
		_ = c.pres.init(c.cfg.Presence, parts)
	}
	c.adm = &admission{
		ctx: c.ctx, logger: cfg.Logger, door: c.door, class: c.class,
		hooks: cfg.Hooks, maxRooms: int(cfg.MaxRoomsPerConn), metrics: c.metrics,
		sess: c.sess, rooms: c.rooms, attached: c.attached, events: c.events, pres: &c.pres,
	}
	c.life = newLifecycle(c)
	c.api = c.newAPI(apiCfg)
	c.wg.Go(func() { c.life.TouchLoop(c.ctx) })
	c.wg.Go(c.adm.grantsLoop)
	c.wg.Go(c.pres.unwatchLoop)
	return c
}

// subscriber is a history store that can bring other processes' messages.
type subscriber interface {
	Subscribe(ctx context.Context, handler func(room string, msg *corralv1.Message)) (*history.Subscription, error)
}

// Start is New for stores shared between processes: with a store that
// publishes (Redis), the core subscribes to the rooms it has members in, so
// members everywhere see one order.
func Start(ctx context.Context, cfg Config) (*Core, error) {
	c := New(cfg)
	if c.presErr != nil {
		c.Close()
		return nil, fmt.Errorf("core: presence: %w", c.presErr)
	}
	if s, ok := c.hist.(subscriber); ok {
		sub, err := s.Subscribe(ctx, c.onRemote)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("core: subscribe: %w", err)
		}
		c.sub = sub
		c.roomOpts.Subscribe = c.subscribe // before any room is made
		c.wg.Add(1)
		go c.unsubscribeLoop()
	}
	if err := c.keyed.follow(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("core: follow the state store: %w", err)
	}
	return c, nil
}

// Close ends every link (their clients are told to resume), stops background
// work and closes the stores the Core created itself. Safe to call twice.
func (c *Core) Close() error {
	if !c.links.Close() {
		return nil
	}
	c.cancel()
	if c.sub != nil {
		c.sub.Close()
	}
	c.missed.Close() // its batches end with c.ctx; none reads a closed store
	c.wg.Wait()
	perr := errors.Join(c.pres.close(), c.keyed.close())
	if c.ownStore {
		return errors.Join(perr, c.sess.Close(), c.hist.Close())
	}
	return perr
}

var errCoreClosed = errors.New("core: closed")

// class is the settings of room, from the class table in force.
func (c *Core) class(room string) *roomclass.Class {
	return c.cfg.Classes.Lookup(room)
}
