package hooks

import (
	"fmt"

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
	// JoinFailure is what a join gets when the backend cannot answer.
	JoinFailure Failure
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
// backend is down, slow or its breaker is open.
type Failure int

const (
	// Closed refuses with CODE_UNAVAILABLE (retry later). The default.
	Closed Failure = iota
	// AllowKnown lets resumed rooms through (the session was admitted to
	// them before) and refuses new joins as Closed does.
	AllowKnown
)

// ParseFailure reads "closed" or "allow-known".
func ParseFailure(s string) (Failure, error) {
	switch s {
	case "", "closed":
		return Closed, nil
	case "allow-known":
		return AllowKnown, nil
	}
	return Closed, fmt.Errorf("hooks: unknown failure policy %q (closed or allow-known)", s)
}

func (f Failure) String() string {
	if f == AllowKnown {
		return "allow-known"
	}
	return "closed"
}
