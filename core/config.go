package core

import (
	"log/slog"
	"time"

	"github.com/corral-rt/corral/grants"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/sessions"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Core. The zero value is usable: in-memory history and
// sessions with the defaults below.
type Config struct {
	// History stores room logs and assigns seqs. Nil: in-memory.
	History history.Store
	// Sessions stores resumable sessions. Nil: in-memory with SessionTTL.
	Sessions sessions.Store
	// SessionTTL is how long a dropped session stays resumable; told to
	// clients in Welcome. Default 2 minutes.
	SessionTTL time.Duration
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
	// SignalTick is how often a room sends the signals that changed.
	// Default 33ms (about 30 Hz).
	SignalTick time.Duration
	// SignalTicks override SignalTick for rooms matching a pattern (exact
	// name, or "*" for any run of characters, as in token grants); the
	// first match wins. E.g. {"canvas:*": 16ms} for a 60 Hz canvas.
	SignalTicks []RoomTick
	// MaxPayload bounds message and signal payloads in bytes. Default 64 KiB.
	MaxPayload int
	// Grants holds run-time room grants (RoomService.Grant and Revoke).
	// Nil: in memory, this core only.
	Grants grants.Store
	// ReadOnlyRooms are room patterns (exact names, or "*" for any run of
	// characters) where clients may not publish or signal, whatever their
	// grants: only internal services publish there.
	ReadOnlyRooms []string
	// MaxRoomsPerConn bounds the rooms one connection is in; past it a
	// join gets CODE_LIMIT_EXCEEDED. Default 128; negative: unlimited.
	MaxRoomsPerConn int
	// ConnQueueFrames and ConnQueueBytes bound the client frames of one
	// connection waiting for the core (proto size). Past either the frame
	// is refused, the queue dropped, and the connection closed with
	// CODE_BACKLOG_FULL (counted as conn_backlog). The edge's rate limits
	// keep an honest client far below. Defaults 1024 and 8 MiB; negative:
	// unlimited.
	ConnQueueFrames int
	ConnQueueBytes  int
	// Logger receives structured logs. Nil: slog.Default().
	Logger *slog.Logger
	// Registerer receives the core's metrics. Nil: not registered.
	Registerer prometheus.Registerer
	// API tunes the internal API (Broadcast, Events).
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
	return out
}

// RoomTick is a signal tick for the rooms matching Pattern.
type RoomTick struct {
	Pattern string
	Tick    time.Duration
}
