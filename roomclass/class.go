package roomclass

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// Class is the settings of the rooms one class matches. The `doc` tags
// are the key table of docs/CONFIG.md and the JSON Schema's descriptions.
// A Class in a [Table] must not be modified.
type Class struct {
	Name  string   `yaml:"name" doc:"the class's name, unique in the file (shown in logs and metrics); \"default\" is the class of unmatched rooms"`
	Match Patterns `yaml:"match" doc:"room pattern, or list of patterns (exact name, or * for any run of characters); the first class with a matching pattern wins"`

	History  History  `yaml:"history" doc:"the room's retained messages"`
	Publish  Access   `yaml:"publish" doc:"who may publish messages: clients (members with a publish grant) or none (read-only: internal services only)"`
	Signal   Access   `yaml:"signal" doc:"who may send signals (cursors, typing): clients or none"`
	Presence Presence `yaml:"presence" doc:"who is here"`
	// JoinLeaveEvents: presence frames name the users who came and went;
	// false: counts only.
	JoinLeaveEvents bool `yaml:"join-leave-events" doc:"presence frames to members name each user who joined or left; false: member counts only"`
	// EventsStream: member events (joined, left, disconnected) of the
	// room go to RoomService.Events.
	EventsStream bool          `yaml:"events-stream" doc:"member events (joined, left, disconnected) of these rooms go to the event log read by RoomService.Events"`
	SignalTick   time.Duration `yaml:"signal-tick" doc:"how often a room sends the signals that changed (duration, e.g. 16ms)"`
	// WriteDelay: live messages wait up to this long and go to each
	// socket together (core/roomdelay.go); 0: each at once.
	WriteDelay   time.Duration `yaml:"write-delay" doc:"live messages of a room wait up to this long and go to each socket together, in one write (duration, at most 1s; 0: each message at once). A publisher may get its published ack before its own message comes back"`
	MaxMembers   int           `yaml:"max-members" doc:"connections one room holds at once on one core; past it a join is refused with 4408 (0: unlimited)"`
	MaxPayload   int           `yaml:"max-payload" doc:"largest message or signal payload in bytes, a client's or the internal API's (past it: error 4413; the API answers invalid_argument)"`
	PublishRate  float64       `yaml:"publish-rate" doc:"publishes per second per user in one room of this class, kept by the core across the user's connections, reconnects and resumes (token bucket, past it: error 4101 with a retry delay; negative: unlimited, only the connection-wide publish-rate key)"`
	PublishBurst int           `yaml:"publish-burst" doc:"burst of that bucket"`
	Hooks        Hooks         `yaml:"hooks" doc:"which backend hooks decide these rooms (docs/HOOKS.md; needs hooks-url)"`
	State        State         `yaml:"state" doc:"the room's keyed state (docs/STATE.md): its bounds, default TTL and deltas; written by members when publish is clients, by the internal API always"`
	Growing      Growing       `yaml:"growing" doc:"growing messages (append, docs/MESSAGES.md): their size, rate and deltas"`
}

// State is a class's keyed-state settings (docs/STATE.md).
type State struct {
	MaxKeys  int           `yaml:"max-keys" doc:"keys one room holds; a set of a new key past it is refused with 4414"`
	MaxValue int           `yaml:"max-value" doc:"largest value of a key in bytes (past it: 4413)"`
	TTL      time.Duration `yaml:"ttl" doc:"the TTL of a key set without one (duration; 0: none): the key is removed after it, and members see a change with expired"`
	Delta    bool          `yaml:"delta" doc:"send a member a set's fossil delta against the value it holds instead of the value, when smaller (docs/DELTA.md)"`
}

// Growing is a class's bounds of growing messages (core/grow.go).
type Growing struct {
	MaxBytes    int     `yaml:"max-bytes" doc:"longest assembled body of one growing message in bytes (past it: error 4413, nothing stored; the API answers invalid_argument)"`
	AppendRate  float64 `yaml:"append-rate" doc:"appends per second per user in one room of this class, kept by the core across the user's connections, reconnects and resumes (token bucket, past it: error 4101 with a retry delay; negative: unlimited). The internal API is not bound by it"`
	AppendBurst int     `yaml:"append-burst" doc:"burst of that bucket"`
	Delta       bool    `yaml:"delta" doc:"a replace chunk reaches the members, who hold the version before it, as a delta against that version when the delta is smaller (docs/DELTA.md)"`
}

// History is a class's retained messages.
type History struct {
	Size int           `yaml:"size" doc:"messages kept per room (at least 1: a room's order needs its newest message)"`
	TTL  time.Duration `yaml:"ttl" doc:"the history is forgotten this long after the room's last message (duration); it then starts over under a new epoch. At least the session TTL"`
}

// Presence is a class's presence settings.
type Presence struct {
	Enabled bool          `yaml:"enabled" doc:"members may join with presence and see who is here; false: joins with presence are accepted without it"`
	MaxDiff int           `yaml:"max-diff" doc:"rooms with more members than this send presence counts only"`
	Grace   time.Duration `yaml:"grace" doc:"a dropped connection stays in presence this long (duration)"`
}

// Hooks says whether the application's Join and Publish hooks decide
// these rooms (core/door.go joinHooked; the server refuses classes with
// hooks when no hooks backend is configured), what their joins and
// publishes get when the backend cannot answer, and how long an admission
// is cached. The policies and the TTL apply to the class's rooms the hook
// decides (a class turns it on with Join or Publish; hooks.Policy's
// patterns, for a program that sets them); the default class takes them from hooks-policy-join,
// hooks-policy-publish and hooks-join-cache-ttl.
type Hooks struct {
	Join          bool          `yaml:"join" doc:"call the join hook for these rooms"`
	Publish       bool          `yaml:"publish" doc:"call the publish hook for these rooms (not on a read-only class)"`
	JoinPolicy    Failure       `yaml:"join-policy" enum:"closed,allow-known" doc:"when the backend cannot answer a join: closed (refuse with 4103, retry later) or allow-known (the rooms of a resume pass unchecked; new joins are refused as closed)"`
	PublishPolicy Failure       `yaml:"publish-policy" enum:"closed,open" doc:"when the backend cannot answer a publish: closed (refuse with 4103, retry with the same id) or open (the message is stored unchecked, as sent)"`
	JoinCacheTTL  time.Duration `yaml:"join-cache-ttl" doc:"keep each (user, room) admission of the join hook this long (duration; refusals are never kept; 0: no cache)"`
}

// Failure is a hook's failure policy (package hooks' Failure): which
// values a key takes is checked per key (its enum tag, the schema's).
type Failure string

// The values of Failure.
const (
	Closed     Failure = "closed"
	AllowKnown Failure = "allow-known"
	Open       Failure = "open"
)

// Access is who may send a kind of frame to a room.
type Access string

// The values of Access.
const (
	Clients Access = "clients" // any member the grants allow
	None    Access = "none"    // no client: internal services only
)

// UnmarshalYAML accepts "clients" or "none".
func (a *Access) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	switch Access(s) {
	case Clients, None:
		*a = Access(s)
		return nil
	}
	return fmt.Errorf("want clients or none, got %q", s)
}

// Patterns is one room pattern or a list of them.
type Patterns []string

// UnmarshalYAML accepts a string or a list of strings.
func (p *Patterns) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var s string
		if err := n.Decode(&s); err != nil {
			return err
		}
		*p = Patterns{s}
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return fmt.Errorf("want a pattern or a list of patterns")
	}
	*p = l
	return nil
}

// ReadOnly reports whether clients may neither publish nor signal.
func (c *Class) ReadOnly() bool { return c.Publish == None && c.Signal == None }

// Default returns the built-in default class: the settings every room had
// before classes, with the flags' defaults.
func Default() Class {
	return Class{
		Name:            "default",
		History:         History{Size: 1000, TTL: 24 * time.Hour},
		Publish:         Clients,
		Signal:          Clients,
		Presence:        Presence{Enabled: true, MaxDiff: 1000, Grace: 15 * time.Second},
		JoinLeaveEvents: true,
		EventsStream:    true,
		SignalTick:      33 * time.Millisecond,
		MaxPayload:      64 << 10,
		PublishRate:     -1,
		PublishBurst:    100,
		Hooks:           Hooks{JoinPolicy: Closed, PublishPolicy: Closed},
		State:           State{MaxKeys: 1000, MaxValue: 64 << 10},
		Growing:         Growing{MaxBytes: 1 << 20, AppendRate: 100, AppendBurst: 200},
	}
}
