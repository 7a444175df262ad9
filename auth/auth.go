package auth

import (
	"context"
	"errors"
	"fmt"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// Authenticator verifies a connection token. Implementations are safe for
// concurrent use.
type Authenticator interface {
	// Authenticate returns who the token's bearer is and what it may do, or
	// an error wrapping [ErrUnauthenticated] saying why the token is refused.
	Authenticate(ctx context.Context, token string) (*corralv1.Identity, error)
}

// Immediate is implemented by an Authenticator whose Authenticate never
// waits for anything (no I/O, its context unread): the edge then calls it
// without a deadline context of its own (a context and a timer per hello).
// Dev, None and *JWT (keys it holds) are.
type Immediate interface {
	Authenticator
	Immediate()
}

// ErrUnauthenticated is wrapped by every refusal, together with the reason,
// as in "auth: unauthenticated: token expired".
var ErrUnauthenticated = errors.New("auth: unauthenticated")

// refusal returns an error wrapping ErrUnauthenticated with reason.
func refusal(reason string) error {
	return fmt.Errorf("%w: %s", ErrUnauthenticated, reason)
}
