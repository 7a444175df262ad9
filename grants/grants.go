package grants

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/corral-rt/corral/internal/safetext"
	"github.com/corral-rt/corral/roompattern"
)

// Limits of one user's grants, so that a runaway service cannot make every
// check slow.
const (
	// MaxPatterns bounds each list of a user's Grants.
	MaxPatterns = 256
	// MaxPatternLen bounds one pattern in bytes (roompattern.Check).
	MaxPatternLen = roompattern.MaxLen
	// MaxUserID bounds a user id in bytes (a JWT's sub has at most 128).
	MaxUserID = 256
)

// ErrInvalid reports a request that breaks the limits above, or names no
// user or no pattern.
var ErrInvalid = errors.New("grants: invalid request")

// Kind is what a grant allows.
type Kind int

const (
	// Join allows joining a room (and staying in it).
	Join Kind = iota
	// Publish allows publishing and signalling in a room.
	Publish
)

// Grants are one user's run-time grants and revocations. A Grants value is
// never modified once a store returned it.
type Grants struct {
	Join           []string `json:"join,omitempty"`
	JoinRevoked    []string `json:"joinRevoked,omitempty"`
	Publish        []string `json:"publish,omitempty"`
	PublishRevoked []string `json:"publishRevoked,omitempty"`
}

// Allows reports whether a user whose token grants token (patterns) may
// do kind in room, given the user's run-time grants g (nil: none).
func Allows(g *Grants, kind Kind, token []string, room string) bool {
	if g == nil {
		return roompattern.Match(token, room)
	}
	granted, revoked := g.Join, g.JoinRevoked
	if kind == Publish {
		granted, revoked = g.Publish, g.PublishRevoked
	}
	return (roompattern.Match(token, room) || roompattern.Match(granted, room)) && !roompattern.Match(revoked, room)
}

// Empty reports whether g holds nothing.
func (g *Grants) Empty() bool {
	return g == nil || len(g.Join)+len(g.JoinRevoked)+len(g.Publish)+len(g.PublishRevoked) == 0
}

// Store holds every user's grants. All methods may be called concurrently.
type Store interface {
	// Get returns user's grants; nil when there are none.
	Get(ctx context.Context, user string) (*Grants, error)
	// Grant adds grants for user and lifts the revocations they match.
	Grant(ctx context.Context, user string, join, publish []string) error
	// Revoke removes the grants the patterns match and records them as
	// revocations.
	Revoke(ctx context.Context, user string, join, publish []string) error
	// Watch sets the function called with a user whose grants changed,
	// by this process or another. It is called with AnyUser when changes
	// may have been missed (a shared store's announcements were lost
	// while its subscription was down): every user must be checked again.
	// It is called from a goroutine of the store and must not block. Call
	// Watch before the store is used.
	Watch(fn func(user string))
	Close() error
}

// AnyUser is the user a Watch function is called with when any user's
// grants may have changed unannounced.
const AnyUser = ""

// Validate checks a Grant or Revoke request.
func Validate(user string, join, publish []string) error {
	if err := safetext.CheckName("user id", user, MaxUserID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(join)+len(publish) == 0 {
		return fmt.Errorf("%w: no pattern", ErrInvalid)
	}
	for _, list := range [][]string{join, publish} {
		if len(list) > MaxPatterns {
			return fmt.Errorf("%w: more than %d patterns", ErrInvalid, MaxPatterns)
		}
		for _, p := range list {
			if err := roompattern.Check(p); err != nil {
				return fmt.Errorf("%w: %w", ErrInvalid, err)
			}
		}
	}
	return nil
}

// apply returns g changed by a Grant (grant true) or a Revoke of the
// patterns. g is not modified.
func apply(g *Grants, grant bool, join, publish []string) (*Grants, error) {
	out := &Grants{}
	if g != nil {
		*out = *g
	}
	var err error
	if grant {
		out.Join, out.JoinRevoked, err = change(out.Join, out.JoinRevoked, join)
		if err == nil {
			out.Publish, out.PublishRevoked, err = change(out.Publish, out.PublishRevoked, publish)
		}
	} else {
		out.JoinRevoked, out.Join, err = change(out.JoinRevoked, out.Join, join)
		if err == nil {
			out.PublishRevoked, out.Publish, err = change(out.PublishRevoked, out.Publish, publish)
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// change adds each pattern to add (once) and removes from remove every
// entry the pattern matches. Both are copied.
func change(add, remove, patterns []string) ([]string, []string, error) {
	if len(patterns) == 0 {
		return add, remove, nil
	}
	add = slices.Clone(add)
	var kept []string
	for _, r := range remove {
		covered := false
		for _, p := range patterns {
			if p == r || roompattern.Match([]string{p}, r) {
				covered = true
				break
			}
		}
		if !covered {
			kept = append(kept, r)
		}
	}
	for _, p := range patterns {
		if !slices.Contains(add, p) {
			add = append(add, p)
		}
	}
	if len(add) > MaxPatterns {
		return nil, nil, fmt.Errorf("%w: a user may hold at most %d patterns of a kind", ErrInvalid, MaxPatterns)
	}
	return add, kept, nil
}
