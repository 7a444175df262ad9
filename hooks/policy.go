package hooks

import (
	"fmt"

	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/roompattern"
)

// Policy says which events go to the backend and what happens when it
// cannot answer. The zero Policy sends nothing.
type Policy struct {
	// HookPolicy is the hooks-* keys (package config): Connect, Refresh
	// and Call turn those hooks on for every connection; JoinPolicy and
	// PublishPolicy are the default room class's failure policies
	// (roomclass.Hooks join-policy, publish-policy: a class decides for
	// its rooms); RefreshPolicy is what a refresh gets when the backend
	// cannot answer (closed, or allow-known: the connection is kept until
	// its token's expiry plus RefreshGrace). Connect and Call have no
	// failure policy: a connection the backend could not authenticate,
	// or a call it could not answer, always gets CODE_UNAVAILABLE
	// (closed). Every request a policy other than closed lets through
	// unchecked is counted in corral_hook_unchecked_total{hook}
	// ([Client.Unchecked]).
	config.HookPolicy
	// Join and Publish are the room patterns (package roompattern) whose
	// joins and publishes go to the backend.
	Join, Publish []string
}

// RefreshAllowKnown reports whether a refresh the backend cannot answer
// keeps the connection (RefreshPolicy allow-known) rather than closing it.
func (p *Policy) RefreshAllowKnown() bool { return p.RefreshPolicy == roomclass.AllowKnown }

// Check reports the first invalid room pattern.
func (p *Policy) Check() error {
	for _, pat := range append(append([]string(nil), p.Join...), p.Publish...) {
		if err := roompattern.Check(pat); err != nil {
			return fmt.Errorf("hooks: %w", err)
		}
	}
	return nil
}

// Events are the room hooks that apply to one room.
type Events struct {
	Join, Publish bool
}

// For returns the hooks that apply to room. It is the one place that maps
// rooms to hooks, so that room classes can replace the patterns.
func (p *Policy) For(room string) Events {
	if p == nil {
		return Events{}
	}
	return Events{
		Join:    roompattern.Match(p.Join, room),
		Publish: roompattern.Match(p.Publish, room),
	}
}
