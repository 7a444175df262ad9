package hooks

import (
	"fmt"
	"slices"
	"time"

	"github.com/corral-rt/corral/roompattern"
)

// Policy says which events go to the backend and what happens when it
// cannot answer. The zero Policy sends nothing.
type Policy struct {
	// Connect, Refresh and Call turn those hooks on for every connection.
	Connect, Refresh, Call bool
	// Join and Publish are the room patterns (package roompattern) whose
	// joins and publishes go to the backend.
	Join, Publish []string
	// JoinFailure is what a join gets when the backend cannot answer
	// (Closed or AllowKnown), and PublishFailure a publish (Closed or
	// Open). They are the default room class's (roomclass.Hooks
	// join-policy, publish-policy) when the core is given no classes;
	// a class decides for its rooms.
	JoinFailure, PublishFailure Failure
	// RefreshFailure is what a refresh gets when the backend cannot
	// answer (Closed or AllowKnown). Under AllowKnown the connection is
	// kept until its token's expiry plus RefreshGrace (0: none;
	// hooks-refresh-grace defaults to 1m).
	RefreshFailure Failure
	RefreshGrace   time.Duration
	// Connect and Call have no failure policy: a connection the backend
	// could not authenticate, or a call it could not answer, always gets
	// CODE_UNAVAILABLE (closed).
}

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

// Failure is a hook's failure policy: what a request gets when the
// backend is down, slow or its breaker is open. Every request a policy
// other than Closed lets through unchecked is counted in
// corral_hook_unchecked_total{hook} ([Client.Unchecked]).
type Failure int

const (
	// Closed refuses with CODE_UNAVAILABLE (retry later). The default,
	// and the only policy of Connect and Call.
	Closed Failure = iota
	// AllowKnown lets through what the backend admitted before: the
	// rooms of a resume (Join; new joins are refused as Closed does),
	// and a connection whose refresh could not be checked, until its
	// token's expiry plus a grace (Refresh).
	AllowKnown
	// Open lets the request through unchecked (Publish: the client's
	// payload is stored as sent).
	Open
)

// ParseFailure reads the failure policy of hook (HookJoin, HookPublish,
// HookRefresh): "closed", or "allow-known" (join, refresh) or "open"
// (publish). Connect and Call accept only "closed".
func ParseFailure(hook, s string) (Failure, error) {
	var f Failure
	switch s {
	case "", "closed":
		return Closed, nil
	case "allow-known":
		f = AllowKnown
	case "open":
		f = Open
	default:
		return Closed, fmt.Errorf("hooks: unknown failure policy %q", s)
	}
	if !slices.Contains(Failures(hook), f) {
		return Closed, fmt.Errorf("hooks: the %s hook's failure policy is one of %v, not %q", hook, Failures(hook), s)
	}
	return f, nil
}

// Failures lists the failure policies hook accepts, Closed first.
func Failures(hook string) []Failure {
	switch hook {
	case HookJoin, HookRefresh:
		return []Failure{Closed, AllowKnown}
	case HookPublish:
		return []Failure{Closed, Open}
	}
	return []Failure{Closed}
}

func (f Failure) String() string {
	switch f {
	case AllowKnown:
		return "allow-known"
	case Open:
		return "open"
	}
	return "closed"
}
