package auth

import (
	"context"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

var errNone = refusal("tokens are checked by the hooks backend, " +
	"and this one was not sent to it")

// None refuses every token. It is the authenticator of an edge whose hooks
// backend authenticates connections (hooks-connect without a JWT key):
// hellos go to the backend, and a token that reaches None instead (a
// refresh without hooks-refresh) is refused rather than trusted.
type None struct{}

// Immediate implements [Immediate]: None never waits.
func (None) Immediate() {}

// Authenticate implements [Authenticator]: it always fails.
func (None) Authenticate(ctx context.Context, token string) (*corralv1.Identity, error) {
	return nil, errNone
}
