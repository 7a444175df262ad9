package door

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/grants"
	"github.com/corral-rt/corral/hooks"
	"github.com/corral-rt/corral/internal/safetext"
	"github.com/corral-rt/corral/roomclass"
)

// Options are what a Door needs of the core, given once by core.New.
type Options struct {
	// Grants is the run-time grants store; nil is a new grants.Memory.
	Grants grants.Store
	// Class is the settings of a room, from the class table in force.
	Class func(room string) *roomclass.Class
	// Hooks is the application's backend client; nil when none.
	Hooks *hooks.Client
	// MaxRoomName bounds room names in bytes.
	MaxRoomName int
	// Logger receives the door's warnings (a hook that cannot answer).
	Logger *slog.Logger
	// Refused counts a refusal by the door's reason; it must not block.
	Refused func(Reason)
}

// A Door decides admissions; see the package comment.
type Door struct {
	opt  Options
	wake chan struct{} // capacity 1: "changed is not empty"
	// enforceMu serializes enforcement, so that a Revoke counts the
	// memberships it ends before the store's announcement ends them.
	enforceMu sync.Mutex

	mu      sync.Mutex // guards changed
	changed map[string]struct{}
}

// New returns a Door on opt and watches opt.Grants for changes.
func New(opt Options) *Door {
	if opt.Grants == nil {
		opt.Grants = grants.NewMemory()
	}
	if opt.Refused == nil {
		opt.Refused = func(Reason) {}
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	d := &Door{opt: opt, wake: make(chan struct{}, 1), changed: make(map[string]struct{})}
	opt.Grants.Watch(d.Changed)
	return d
}

// Grants is the run-time grants store.
func (d *Door) Grants() grants.Store { return d.opt.Grants }

// ValidRoom checks a room name: 1..MaxRoomName bytes, by the one rule for
// names (safetext.CheckName; docs/SECURITY.md).
func (d *Door) ValidRoom(name string) error {
	if err := safetext.CheckName("room name", name, d.opt.MaxRoomName); err != nil {
		return fmt.Errorf("core: %w", err)
	}
	return nil
}

// JoinHooked says whether the Join hook decides room: its class turns
// the hook on (hooks: {join: true}) or hooks.Policy's Join patterns name
// it. The server refuses classes with hooks when no backend is configured
// (server/reload.go checkClassHooks), so a class's hook is never skipped
// silently.
func (d *Door) JoinHooked(room string) bool {
	return d.opt.Class(room).Hooks.Join || d.opt.Hooks.Policy().For(room).Join
}

// JoinCacheTTL is how long the hooks client caches an admission to room:
// its class's hooks.join-cache-ttl.
func (d *Door) JoinCacheTTL(room string) time.Duration {
	return d.opt.Class(room).Hooks.JoinCacheTTL
}

// Granted applies the token's (id) and the run-time grants of user to
// room. A store that cannot answer is an error (counted as GrantsUnavailable).
func (d *Door) Granted(ctx context.Context, user string, id *corralv1.Identity, kind grants.Kind, room string) (bool, error) {
	token := id.GetJoin()
	if kind == grants.Publish {
		token = id.GetPublish()
	}
	g, err := d.opt.Grants.Get(ctx, user)
	if err != nil {
		d.opt.Refused(GrantsUnavailable)
		return false, err
	}
	return grants.Allows(g, kind, token, room), nil
}

// Changed records that user's grants changed. It never blocks.
func (d *Door) Changed(user string) {
	d.mu.Lock()
	d.changed[user] = struct{}{}
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Wake is ready when users' grants changed since the last TakeChanged.
func (d *Door) Wake() <-chan struct{} { return d.wake }

// TakeChanged returns the users whose grants changed and forgets them.
func (d *Door) TakeChanged() map[string]struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	users := d.changed
	d.changed = make(map[string]struct{})
	return users
}

// Enforce runs f alone among Enforce calls.
func (d *Door) Enforce(f func()) {
	d.enforceMu.Lock()
	defer d.enforceMu.Unlock()
	f()
}
