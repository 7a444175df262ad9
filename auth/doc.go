// Package auth verifies connection tokens and says which rooms their bearer
// may join and publish to.
//
// An [Authenticator] turns the token a client presents when it connects into
// a [corralv1.Identity]: a user id, join grants, publish grants and an expiry.
// Every refusal wraps [ErrUnauthenticated] with a short reason; no error ever
// contains the token.
//
// # Token format
//
// [JWT] accepts a compact JWS (RFC 7519) of at most 8 KiB, signed with one of
// the algorithms whose keys are configured: HS256 (HMAC secret), RS256 (RSA
// public keys) or EdDSA (Ed25519 public keys). Any other "alg", including
// "none", is refused. So is a token whose header has "crit" (RFC 7515
// §4.1.11: corral understands no extension) and one whose header or claims
// name a member twice (two "sub": parsers disagree on which one counts).
// The claims are:
//
//	sub      required; a name of 1 to 128 bytes (the one rule for names:
//	         docs/SECURITY.md); becomes the user id
//	exp      optional expiry (NumericDate); required when RequireExpiry is set
//	nbf      optional; the token is refused before it
//	iat      optional; a token issued in the future is refused
//	iss      checked against JWTConfig.Issuer when that is set
//	aud      string or array; must contain JWTConfig.Audience when that is set
//	rooms    array of strings: join grants, each a name of at most 256
//	         bytes (a token with another is refused)
//	publish  array of strings: publish grants; when absent or null, the same
//	         as rooms (an empty array grants no publishing)
//
// For example:
//
//	{"sub": "alice", "exp": 1767225600, "aud": "corral",
//	 "rooms": ["game:*", "lobby"], "publish": ["game:*"]}
//
// The time checks on exp, nbf and iat allow JWTConfig.Leeway of clock skew.
//
// # Grants
//
// A grant is an exact room name, or a pattern in which '*' matches any run of
// characters, including none: "game:*", "org:*:chat", "*". There are no other
// metacharacters. [roompattern.Match] checks a room against a list of
// grants in time linear in the lengths of both.
//
// [Dev] accepts any plain user id without verification, for local
// development only.
package auth
