package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/state"
	"github.com/prometheus/client_golang/prometheus"
)

// Reloading the room classes: SIGHUP (cmd/corral) and POST /admin/reload
// (internal listener) call Node.Reload, which re-reads the config file
// through Options.Reload. A valid file's table replaces the one in force
// (Options.Core.Classes) at once, for new joins and running rooms alike
// (package roomclass: every setting is looked up when it is needed); an
// invalid one is refused, its errors logged, the old table kept. So is
// a valid one that would weaken policy by accident (checkKeepsPolicy): no
// room classes where some were in force, or none for a class that rooms
// of this core are using — what an empty or half-written file, or a
// deploy that lost a section, looks like.

// ErrNoConfig is returned by Reload on a node started without a config
// file (Options.Reload nil).
var ErrNoConfig = errors.New("server: no config file to reload (start with --config)")

// reloader is the node's part of reloading.
type reloader struct {
	mu      sync.Mutex // serializes reloads
	info    *prometheus.GaugeVec
	reloads *prometheus.CounterVec
	last    prometheus.Gauge

	infoMu sync.Mutex // guards the following fields
	loaded time.Time  // when the table in force was put in force
	// result is the last reload's outcome (RoomService.Config); nil
	// before the first.
	result *corralv1.ReloadResponse
}

func newReloader(reg prometheus.Registerer) *reloader {
	r := &reloader{
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "corral_config_info", Help: "The config file in force: 1 for its version key and hash (SHA-256, 12 hex digits).",
		}, []string{"version", "hash"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_config_reloads_total", Help: "Reloads of the config file (SIGHUP, POST /admin/reload), by result: ok, invalid (refused, old config kept), weakens (refused: the file drops every room class, or a class rooms here are using; old config kept).",
		}, []string{"result"}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "corral_config_reload_timestamp_seconds", Help: "When the config in force was loaded (Unix seconds).",
		}),
	}
	reg.MustRegister(r.info, r.reloads, r.last)
	r.reloads.WithLabelValues("ok")
	r.reloads.WithLabelValues("invalid")
	r.reloads.WithLabelValues("weakens")
	return r
}

// inForce records t as the table in force.
func (r *reloader) inForce(t *roomclass.Table) {
	r.info.Reset()
	r.info.WithLabelValues(t.Version, t.Hash).Set(1)
	r.last.SetToCurrentTime()
	r.infoMu.Lock()
	r.loaded = time.Now()
	r.infoMu.Unlock()
}

// record keeps a reload's outcome for RoomService.Config.
func (r *reloader) record(t *roomclass.Table, err error) *corralv1.ReloadResponse {
	res := &corralv1.ReloadResponse{Reloaded: err == nil, AtMs: time.Now().UnixMilli()}
	if t != nil {
		res.Version, res.Hash = t.Version, t.Hash
	}
	if err != nil {
		res.Error = err.Error()
	}
	r.infoMu.Lock()
	r.result = res
	r.infoMu.Unlock()
	return res
}

// lastResult returns when the table in force was loaded and the last
// reload's outcome (nil: none yet).
func (r *reloader) lastResult() (time.Time, *corralv1.ReloadResponse) {
	r.infoMu.Lock()
	defer r.infoMu.Unlock()
	return r.loaded, r.result
}

// classLimits is the history store's view of the room classes.
func classLimits(l *roomclass.Live) func(string) history.Limits {
	if l == nil {
		return nil
	}
	return func(room string) history.Limits {
		c := l.Lookup(room)
		return history.Limits{MaxLen: c.History.Size, TTL: c.History.TTL}
	}
}

// stateLimits is classLimits' counterpart for the keyed-state store: each
// room's bounds from its class in force.
func stateLimits(l *roomclass.Live) func(string) state.Limits {
	if l == nil {
		return nil
	}
	return func(room string) state.Limits {
		c := l.Lookup(room)
		return state.Limits{MaxKeys: c.State.MaxKeys, MaxValue: c.State.MaxValue}
	}
}

// Reload re-reads the config file and puts its room classes in force; on
// an invalid file it returns the errors (one per line, with file:line)
// and keeps the classes in force. It returns the table in force.
func (n *Node) Reload() (*roomclass.Table, error) {
	if n.opts.Reload == nil || n.opts.Core.Classes == nil {
		return nil, ErrNoConfig
	}
	r := n.reload
	r.mu.Lock()
	defer r.mu.Unlock()
	t, err := n.reloadLocked()
	r.record(t, err)
	return t, err
}

// reloadLocked is Reload's work. r.mu must be held.
func (n *Node) reloadLocked() (*roomclass.Table, error) {
	r := n.reload
	t, err := n.opts.Reload()
	if err != nil {
		r.reloads.WithLabelValues("invalid").Inc()
		old := n.opts.Core.Classes.Table()
		n.opts.Logger.Error("config reload refused; the config in force is kept", "err", err, "version", old.Version, "hash", old.Hash)
		return old, err
	}
	if err := checkClassHooks(t, n.hooks != nil); err != nil && n.opts.Mode != EdgeOnly {
		r.reloads.WithLabelValues("invalid").Inc()
		old := n.opts.Core.Classes.Table()
		n.opts.Logger.Error("config reload refused; the config in force is kept", "err", err, "version", old.Version, "hash", old.Hash)
		return old, err
	}
	old := n.opts.Core.Classes.Table()
	if err := checkKeepsPolicy(old, t, n.roomsInUse()); err != nil {
		r.reloads.WithLabelValues("weakens").Inc()
		n.opts.Logger.Error("config reload refused; the config in force is kept", "err", err, "version", old.Version, "hash", old.Hash)
		return old, err
	}
	n.opts.Core.Classes.Swap(t)
	r.reloads.WithLabelValues("ok").Inc()
	r.inForce(t)
	n.opts.Logger.Info("config reloaded", "version", t.Version, "hash", t.Hash, "classes", len(t.Classes()))
	return t, nil
}

// reloadHandler serves POST /admin/reload: 200 and the version in force,
// or 422 and the file's errors (the old config stays in force).
func (n *Node) reloadHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t, err := n.Reload()
		w.Header().Set("Content-Type", "application/json")
		resp := map[string]any{"reloaded": err == nil, "at": time.Now().UTC().Format(time.RFC3339)}
		if t != nil {
			resp["version"], resp["hash"] = t.Version, t.Hash
		}
		if err != nil {
			resp["error"] = err.Error()
			w.WriteHeader(http.StatusUnprocessableEntity)
		}
		json.NewEncoder(w).Encode(resp)
	})
}

// checkClassHooks refuses room classes that turn a backend hook on when no
// hooks backend is configured (--hooks-url): their joins or publishes
// would otherwise pass unchecked, which the class asked not to happen.
func checkClassHooks(t *roomclass.Table, haveHooks bool) error {
	if haveHooks {
		return nil
	}
	for _, c := range t.Classes() {
		if c.Hooks.Join || c.Hooks.Publish {
			return fmt.Errorf("room class %q turns on a backend hook (hooks.join or hooks.publish) but no hooks backend is configured: set --hooks-url (docs/HOOKS.md)", c.Name)
		}
	}
	return nil
}

// checkKeepsPolicy refuses a table that drops every room class of the
// table in force, or drops (by name) a class that one of the rooms in
// use belongs to: such a room would fall to another class or to the
// default at once, e.g. a read-only room taking client publishes. To
// retire a class, empty its rooms first or restart with the new file.
func checkKeepsPolicy(old, next *roomclass.Table, inUse []string) error {
	if len(next.Classes()) == 0 && len(old.Classes()) > 0 {
		return fmt.Errorf("the file has no room classes where %d are in force: refused as a file emptied or cut by accident (restart with it to run on the default class alone)", len(old.Classes()))
	}
	kept := map[string]bool{}
	for _, c := range next.Classes() {
		kept[c.Name] = true
	}
	for _, room := range inUse {
		c := old.Lookup(room)
		if c == old.Default() || kept[c.Name] {
			continue
		}
		return fmt.Errorf("room class %q is gone from the file but room %q is using it: refused (empty its rooms first, or restart with the new file)", c.Name, room)
	}
	return nil
}

// roomsInUse lists the rooms with members on this node's core (none on
// an edge: its cores check their own reloads).
func (n *Node) roomsInUse() []string {
	if n.core == nil {
		return nil
	}
	var names []string
	req := &corralv1.RoomsRequest{}
	for {
		resp, err := n.core.API().Rooms(context.Background(), req)
		if err != nil {
			return names
		}
		for _, r := range resp.GetRooms() {
			names = append(names, r.GetName())
		}
		if resp.GetNextPageToken() == "" {
			return names
		}
		req.PageToken = resp.GetNextPageToken()
	}
}
