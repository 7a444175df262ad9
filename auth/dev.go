package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/safetext"
)

// maxDevUserID bounds the user id Dev accepts, in bytes.
const maxDevUserID = 64

var (
	errDevJWT = refusal("token looks like a JWT, which --insecure-dev " +
		"does not verify; run without --insecure-dev, or pass a plain user id")
	errDevTooLong    = refusal("user id longer than 64 bytes")
	errDevNotPrinted = refusal("user id is not printable text")
)

// Dev is the --insecure-dev authenticator. It verifies nothing: it takes the
// token as the user id and grants every room for join and publish.
//
// An empty token gets the user id "anon-" followed by 8 random hex digits. A
// token of three dot-separated parts looks like a JWT and is refused, so that
// a real token is never mistaken for a user id. Any other token is the user
// id, and must be a valid name of at most 64 bytes (safetext.CheckName:
// no control, format or invisible characters, no space at either end).
type Dev struct{}

// Immediate implements [Immediate]: Dev never waits.
func (Dev) Immediate() {}

// Authenticate implements [Authenticator].
func (Dev) Authenticate(ctx context.Context, token string) (*corralv1.Identity, error) {
	var user string
	switch {
	case token == "":
		var b [4]byte
		rand.Read(b[:]) // never fails
		user = "anon-" + hex.EncodeToString(b[:])
	case strings.Count(token, ".") == 2:
		return nil, errDevJWT
	case len(token) > maxDevUserID:
		return nil, errDevTooLong
	case safetext.CheckName("user id", token, maxDevUserID) != nil:
		return nil, errDevNotPrinted
	default:
		user = token
	}
	return &corralv1.Identity{
		UserId:  user,
		Join:    []string{"*"},
		Publish: []string{"*"},
	}, nil
}
