package core

import (
	"context"
	"log/slog"
	"time"

	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/grants"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/hooks"
	"github.com/corral-rt/corral/presence"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/sessions"
	"github.com/corral-rt/corral/state"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Core. The zero value is usable: in-memory history and
// sessions with the defaults below.
type Config struct {
	// Core is the settings of package config (keys session-ttl,
	// signal-tick, max-payload, max-rooms-per-conn, conn-backlog-*):
	// SessionTTL, SignalTick, MaxPayload, MaxRoomsPerConn,
	// ConnQueueFrames and ConnQueueBytes. Zero fields take the defaults
	// below; config.Unlimited lifts a Limit.
	config.Core
	// History stores room logs and assigns seqs. Nil: in-memory.
	History history.Store
	// State stores the rooms' keyed state (docs/STATE.md). Nil: in
	// memory, bounded by the classes; a state.Redis is followed (its
	// Follow feed) so that members on every core see every write.
	State state.Store
	// Sessions stores resumable sessions. Nil: in-memory with SessionTTL.
	Sessions sessions.Store
	// UnsubscribeDelay is how often the rooms this core no longer holds
	// leave its Redis pub/sub subscription, in one batch; a room emptied
	// and re-joined meanwhile keeps its subscription. Default 10s.
	UnsubscribeDelay time.Duration
	// Heartbeat is how often clients are told to send something. Default 25s.
	Heartbeat time.Duration
	// LinkQueue bounds the frames waiting on one link. Default 262144.
	LinkQueue int
	// MaxRoomName bounds room names in bytes. Default 200.
	MaxRoomName int
	// Classes are the room classes (package roomclass): every per-room
	// setting (read-only, signal tick, payload and member limits,
	// presence, events, publish rate) is looked up there, at the time it
	// is needed, so a swapped table applies to running rooms. Nil: one
	// default class made of SignalTick, MaxPayload, Presence, and the
	// Hooks client's join and publish failure policies and join cache TTL.
	Classes *roomclass.Live
	// Grants holds run-time room grants (RoomService.Grant and Revoke).
	// Nil: in memory, this core only.
	Grants grants.Store
	// Hooks, when set, is the application's backend: its Policy says
	// which rooms' joins and publishes it decides (docs/HOOKS.md); each
	// room's class, what they get when it cannot answer. The core calls
	// Join (batched) and Publish; the edge calls the others.
	// Nil: no hooks.
	Hooks *hooks.Client
	// Logger receives structured logs. Nil: slog.Default().
	Logger *slog.Logger
	// Control carries Subscribe and Unsubscribe to the other cores
	// sharing the stores (package controlbus). Nil: this core is the
	// only one.
	Control ControlBus
	// NodeQuery answers the other cores' questions for the process
	// around the core (their first byte is NodeQueryKind; see
	// api.Service.AskNodes): a reload of its config file. Nil: not answered.
	NodeQuery func(ctx context.Context, query []byte) []byte
	// Registerer receives the core's metrics. Nil: not registered.
	Registerer prometheus.Registerer
	// API tunes the internal API (Broadcast, Batch, Events, Members).
	API APIConfig
	// Presence tunes presence (presence.go).
	Presence PresenceConfig
}

func (c *Config) withDefaults() Config {
	out := *c
	if out.SessionTTL <= 0 {
		out.SessionTTL = 2 * time.Minute
	}
	if out.UnsubscribeDelay <= 0 {
		out.UnsubscribeDelay = 10 * time.Second
	}
	if out.Heartbeat <= 0 {
		out.Heartbeat = 25 * time.Second
	}
	if out.LinkQueue <= 0 {
		out.LinkQueue = 1 << 18
	}
	if out.MaxRoomName <= 0 {
		out.MaxRoomName = 200
	}
	if out.SignalTick <= 0 {
		out.SignalTick = 33 * time.Millisecond
	}
	if out.MaxPayload <= 0 {
		out.MaxPayload = 64 << 10
	}
	if out.MaxRoomsPerConn == 0 {
		out.MaxRoomsPerConn = 128
	}
	if out.ConnQueueFrames == 0 {
		out.ConnQueueFrames = 1024
	}
	if out.ConnQueueBytes == 0 {
		out.ConnQueueBytes = 8 << 20
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.Classes == nil {
		def := roomclass.Default()
		pres := out.Presence.withDefaults()
		def.SignalTick, def.MaxPayload = out.SignalTick, out.MaxPayload
		def.Presence.Grace, def.Presence.MaxDiff = pres.Grace, pres.MaxDiffMembers
		if out.Hooks != nil {
			pol := out.Hooks.Policy()
			if pol.JoinPolicy != "" {
				def.Hooks.JoinPolicy = pol.JoinPolicy
			}
			if pol.PublishPolicy != "" {
				def.Hooks.PublishPolicy = pol.PublishPolicy
			}
			def.Hooks.JoinCacheTTL = out.Hooks.JoinCacheTTL()
		}
		out.Classes = roomclass.NewLive(roomclass.NewTable(def, nil))
	}
	return out
}

// PresenceConfig tunes presence. Zero fields mean defaults.
type PresenceConfig struct {
	// Presence is the settings of package config (presence-grace,
	// presence-tick, presence-max-diff): Grace, how long a dropped
	// connection stays counted, waiting for its session to resume
	// (default 15s); Tick, how often a room sends its presence changes
	// (default 500ms); MaxDiffMembers, above which rooms send counts
	// only (default 1000).
	config.Presence
	// NewStore makes the store with the core's callbacks. Nil: in memory,
	// for one process.
	NewStore func(presence.Options) (presence.Store, error)
	// MaxState bounds a user's presence state in bytes. Default 1024.
	MaxState int
	// PageLimit bounds the members of one PresencePage. Default 100.
	PageLimit int
}

func (p PresenceConfig) withDefaults() PresenceConfig {
	if p.Grace <= 0 {
		p.Grace = 15 * time.Second
	}
	if p.Tick <= 0 {
		p.Tick = 500 * time.Millisecond
	}
	if p.MaxDiffMembers <= 0 {
		p.MaxDiffMembers = 1000
	}
	if p.MaxState <= 0 {
		p.MaxState = 1024
	}
	if p.PageLimit <= 0 {
		p.PageLimit = 100
	}
	return p
}

// APIConfig tunes the internal API. Zero fields mean defaults.
type APIConfig struct {
	// API is the settings of package config (api-max-*, api-overload-queue):
	// MaxBroadcastRooms (default 10000), MaxMembers (a room with more is
	// refused with resource_exhausted; default 10000), MaxBatch (default
	// 1000), and OverloadQueueBytes, the push-back bound of Publish and
	// Broadcast: while the bytes waiting toward the edges (this core's
	// link queues, plus the send queues of the edges' connections, as each
	// edge reports them) exceed it, or a link queue holds half of
	// Config.LinkQueue frames, both answer resource_exhausted with a retry
	// hint instead of adding to the backlog (default 64 MiB;
	// config.Unlimited: never refuse).
	config.API
	// BroadcastConcurrency bounds the rooms one Broadcast publishes to at
	// once. Default 64.
	BroadcastConcurrency int
	// EventQueue bounds the member events waiting for the event log.
	// Default 65536.
	EventQueue int
	// EventsHeartbeat is how often an idle Events stream sends an empty
	// response. Default 15s.
	EventsHeartbeat time.Duration
}

// ControlBus sends the internal API's commands that act on every core to
// the other cores (controlbus.Redis implements it).
type ControlBus interface {
	// Publish sends cmd to the other cores and returns how many got it.
	Publish(ctx context.Context, cmd []byte) (int, error)
	// Listen sets the function called with other cores' commands; it
	// must not block.
	Listen(fn func(cmd []byte))
}

func (a APIConfig) withDefaults() APIConfig {
	if a.MaxBroadcastRooms <= 0 {
		a.MaxBroadcastRooms = 10000
	}
	if a.BroadcastConcurrency <= 0 {
		a.BroadcastConcurrency = 64
	}
	if a.EventQueue <= 0 {
		a.EventQueue = 1 << 16
	}
	if a.EventsHeartbeat <= 0 {
		a.EventsHeartbeat = 15 * time.Second
	}
	if a.MaxMembers <= 0 {
		a.MaxMembers = 10000
	}
	if a.MaxBatch <= 0 {
		a.MaxBatch = 1000
	}
	if a.OverloadQueueBytes == 0 {
		a.OverloadQueueBytes = 64 << 20
	}
	return a
}
