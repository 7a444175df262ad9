package auth

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/safetext"
	"github.com/corral-rt/corral/roompattern"
)

const (
	// maxTokenSize bounds the token JWT parses. JSON is decoded before the
	// signature is checked, so this caps what an attacker can make us do.
	maxTokenSize = 8 << 10
	// maxSubject bounds the "sub" claim, in bytes.
	maxSubject = 128
	// MinHMACSecret is the shortest HMAC secret NewJWT accepts, in bytes.
	MinHMACSecret = 32
	// minRSABits is the smallest RSA modulus NewJWT accepts.
	minRSABits = 2048
)

// Refusal reasons. Fixed values: a reason never carries token contents.
var (
	errNoToken         = refusal("no token")
	errTooLarge        = refusal("token larger than 8 KiB")
	errMalformed       = refusal("malformed token")
	errAlgorithm       = refusal("algorithm not allowed")
	errSignature       = refusal("bad signature")
	errExpired         = refusal("token expired")
	errNotYetValid     = refusal("token not yet valid")
	errIssuedInFuture  = refusal("token issued in the future")
	errInvalidClaims   = refusal("invalid claims")
	errMissingExpiry   = refusal("missing exp")
	errWrongIssuer     = refusal("wrong issuer")
	errWrongAudience   = refusal("wrong audience")
	errMissingSubject  = refusal("missing sub")
	errSubjectTooLong  = refusal("sub longer than 128 bytes")
	errSubjectNotPrint = refusal("sub is not printable text")
	errBadPattern      = refusal("rooms or publish has an invalid pattern")
	errCritical        = refusal("crit names an extension this server does not understand")
	errDuplicateMember = refusal("a header parameter or claim is set twice")
)

// JWTConfig configures [NewJWT].
type JWTConfig struct {
	// Keys; at least one must be set. Each kind of key enables one
	// algorithm: HMACSecret enables HS256, RSAPublicKeys RS256, and
	// Ed25519PublicKeys EdDSA. A token signed with any other algorithm is
	// refused. When there are several keys of a kind, a token is accepted
	// if any of them verifies it (which allows rotating keys).
	//
	// The HMAC secret must be at least MinHMACSecret (32) bytes, and
	// should be random. RSA keys must be at least 2048 bits. [ParsePublicKeysPEM] reads public keys from PEM.
	HMACSecret        []byte
	RSAPublicKeys     []*rsa.PublicKey
	Ed25519PublicKeys []ed25519.PublicKey

	// Issuer, if set, must equal the "iss" claim.
	Issuer string
	// Audience, if set, must be one of the "aud" claim's values.
	Audience string
	// Leeway is the clock skew allowed when checking "exp", "nbf" and
	// "iat". Zero allows none.
	Leeway time.Duration
	// RequireExpiry refuses tokens without an "exp" claim. corral's
	// command sets it unless --insecure-dev (--require-exp).
	RequireExpiry bool
}

// JWT authenticates JSON Web Tokens; see the package documentation for the
// claims it reads. It is safe for concurrent use.
type JWT struct {
	parser        *jwt.Parser
	hmacKeys      jwt.VerificationKeySet
	rsaKeys       jwt.VerificationKeySet
	edKeys        jwt.VerificationKeySet
	issuer        string
	audience      string
	requireExpiry bool
}

// Immediate implements [Immediate]: a token is checked with keys the JWT
// holds, nothing fetched.
func (*JWT) Immediate() {}

// NewJWT returns a JWT authenticator. It returns an error if cfg has no key
// or an unusable one.
func NewJWT(cfg JWTConfig) (*JWT, error) {
	j := &JWT{
		issuer:        cfg.Issuer,
		audience:      cfg.Audience,
		requireExpiry: cfg.RequireExpiry,
	}
	var methods []string
	if n := len(cfg.HMACSecret); n > 0 && n < MinHMACSecret {
		// A short secret can be brute-forced offline from one token.
		return nil, fmt.Errorf("auth: HMAC secret of %d bytes; need at least %d", n, MinHMACSecret)
	}
	if len(cfg.HMACSecret) > 0 {
		methods = append(methods, jwt.SigningMethodHS256.Alg())
		j.hmacKeys.Keys = []jwt.VerificationKey{slices.Clone(cfg.HMACSecret)}
	}
	if len(cfg.RSAPublicKeys) > 0 {
		methods = append(methods, jwt.SigningMethodRS256.Alg())
		for i, k := range cfg.RSAPublicKeys {
			if k == nil || k.N == nil {
				return nil, fmt.Errorf("auth: RSA public key %d is nil", i)
			}
			if n := k.N.BitLen(); n < minRSABits {
				return nil, fmt.Errorf("auth: RSA public key %d has %d bits, need at least %d", i, n, minRSABits)
			}
			j.rsaKeys.Keys = append(j.rsaKeys.Keys, k)
		}
	}
	if len(cfg.Ed25519PublicKeys) > 0 {
		methods = append(methods, jwt.SigningMethodEdDSA.Alg())
		for i, k := range cfg.Ed25519PublicKeys {
			if len(k) != ed25519.PublicKeySize {
				return nil, fmt.Errorf("auth: Ed25519 public key %d has %d bytes, want %d", i, len(k), ed25519.PublicKeySize)
			}
			j.edKeys.Keys = append(j.edKeys.Keys, slices.Clone(k))
		}
	}
	if len(methods) == 0 {
		return nil, errors.New("auth: no key configured for JWT")
	}
	if cfg.Leeway < 0 {
		return nil, errors.New("auth: negative JWT leeway")
	}
	// The parser is read-only after construction, so one is shared by all
	// calls. Issuer, audience and required exp are checked after parsing,
	// where a missing claim and a wrong one give the same clear reason.
	j.parser = jwt.NewParser(
		jwt.WithValidMethods(methods),
		jwt.WithLeeway(cfg.Leeway),
		jwt.WithIssuedAt(),
		jwt.WithStrictDecoding(),
	)
	return j, nil
}

// claims is what JWT reads from a token.
type claims struct {
	jwt.RegisteredClaims
	Rooms   []string `json:"rooms"`
	Publish []string `json:"publish"`
}

// Authenticate implements [Authenticator]. It does not block; ctx is unused.
func (j *JWT) Authenticate(ctx context.Context, token string) (*corralv1.Identity, error) {
	if token == "" {
		return nil, errNoToken
	}
	if len(token) > maxTokenSize {
		return nil, errTooLarge
	}
	var c claims
	// The parser checks "alg" against the allowed methods before it asks
	// for a key; keyed records whether it got that far, which tells a
	// refused algorithm from a bad signature.
	keyed := false
	_, err := j.parser.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		keyed = true
		switch t.Method.Alg() {
		case jwt.SigningMethodHS256.Alg():
			return j.hmacKeys, nil
		case jwt.SigningMethodRS256.Alg():
			return j.rsaKeys, nil
		case jwt.SigningMethodEdDSA.Alg():
			return j.edKeys, nil
		}
		return nil, errors.New("no key for algorithm") // unreachable
	})
	if err != nil {
		return nil, reason(err, keyed)
	}
	if err := strictJOSE(token); err != nil {
		return nil, err
	}

	exp := c.ExpiresAt
	switch {
	case exp == nil && j.requireExpiry:
		return nil, errMissingExpiry
	case j.issuer != "" && c.Issuer != j.issuer:
		return nil, errWrongIssuer
	case j.audience != "" && !slices.Contains(c.Audience, j.audience):
		return nil, errWrongAudience
	case c.Subject == "":
		return nil, errMissingSubject
	case len(c.Subject) > maxSubject:
		return nil, errSubjectTooLong
	case safetext.CheckName("sub", c.Subject, maxSubject) != nil:
		return nil, errSubjectNotPrint
	case !validPatterns(c.Rooms) || !validPatterns(c.Publish):
		return nil, errBadPattern
	}

	id := &corralv1.Identity{
		UserId:  c.Subject,
		Join:    c.Rooms,
		Publish: c.Publish,
	}
	if c.Publish == nil {
		id.Publish = slices.Clone(c.Rooms)
	}
	if exp != nil {
		id.ExpiresUnix = exp.Unix()
	}
	return id, nil
}

// maxJSONDepth bounds the nesting strictJOSE walks; no claim corral
// reads nests more than two deep.
const maxJSONDepth = 32

// strictJOSE refuses what the JWT library lets through (RFC 7515 and
// 7519 let a recipient refuse both, and corral does): a header with
// "crit" (§4.1.11: a recipient must refuse an extension it does not
// understand, and corral understands none), and a header or claims set
// with a member named twice, which encoding/json settles by keeping the
// last — two "sub" members then mean one user to a library that keeps
// the first and another to corral. token has been parsed and verified.
func strictJOSE(token string) error {
	parts := strings.SplitN(token, ".", 3)
	if len(parts) != 3 {
		return errMalformed
	}
	for i, part := range parts[:2] {
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(part, "="))
		if err != nil {
			return errMalformed
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		top, err := uniqueMembers(dec, 0)
		if err != nil {
			return err
		}
		if i == 0 && top["crit"] {
			return errCritical
		}
	}
	return nil
}

// uniqueMembers reads one JSON value from dec and refuses an object, at
// any depth, with a member named twice. It returns the member names of
// the value when it is an object.
func uniqueMembers(dec *json.Decoder, depth int) (map[string]bool, error) {
	if depth > maxJSONDepth {
		return nil, errMalformed
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, errMalformed
	}
	switch tok {
	case json.Delim('{'):
		names := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			name, ok := k.(string)
			if err != nil || !ok {
				return nil, errMalformed
			}
			if names[name] {
				return nil, errDuplicateMember
			}
			names[name] = true
			if _, err := uniqueMembers(dec, depth+1); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, errMalformed
		}
		return names, nil
	case json.Delim('['):
		for dec.More() {
			if _, err := uniqueMembers(dec, depth+1); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, errMalformed
		}
	}
	return nil, nil
}

// validPatterns reports whether every room pattern of a claim is valid
// (roompattern.Check), as grants.Validate requires of the API's.
func validPatterns(ps []string) bool {
	for _, p := range ps {
		if roompattern.Check(p) != nil {
			return false
		}
	}
	return true
}

// reason maps an error from the jwt parser to a refusal. keyed reports
// whether the parser got as far as asking for a key.
func reason(err error, keyed bool) error {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return errMalformed
	case !keyed:
		// An unknown, missing or disallowed "alg".
		return errAlgorithm
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return errSignature
	case errors.Is(err, jwt.ErrTokenExpired):
		return errExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return errNotYetValid
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return errIssuedInFuture
	}
	return errInvalidClaims
}
