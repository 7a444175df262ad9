package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/corral-rt/corral/auth"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

var (
	_ auth.Authenticator = auth.Dev{}
	_ auth.Authenticator = (*auth.JWT)(nil)
)

// testKeys holds every key the tests sign with.
type testKeys struct {
	hmac, hmac2 []byte
	rsa, rsa2   *rsa.PrivateKey
	ed, ed2     ed25519.PrivateKey
}

var (
	rsaOnce          sync.Once
	rsaKey1, rsaKey2 *rsa.PrivateKey
)

// newTestKeys returns fresh HMAC and Ed25519 keys and the RSA keys shared
// by the test binary (generating those is slow).
func newTestKeys(t testing.TB) testKeys {
	t.Helper()
	rsaOnce.Do(func() {
		var err error
		if rsaKey1, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if rsaKey2, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	})
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, ed2, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return testKeys{
		hmac:  []byte("0123456789abcdef0123456789abcdef"),
		hmac2: []byte("fedcba9876543210fedcba9876543210"),
		rsa:   rsaKey1,
		rsa2:  rsaKey2,
		ed:    ed,
		ed2:   ed2,
	}
}

func (k testKeys) hmacConfig() auth.JWTConfig {
	return auth.JWTConfig{HMACSecret: k.hmac}
}

func (k testKeys) rsaConfig() auth.JWTConfig {
	return auth.JWTConfig{RSAPublicKeys: []*rsa.PublicKey{&k.rsa.PublicKey}}
}

func (k testKeys) edConfig() auth.JWTConfig {
	return auth.JWTConfig{Ed25519PublicKeys: []ed25519.PublicKey{k.ed.Public().(ed25519.PublicKey)}}
}

func (k testKeys) allConfig() auth.JWTConfig {
	return auth.JWTConfig{
		HMACSecret:        k.hmac,
		RSAPublicKeys:     []*rsa.PublicKey{&k.rsa.PublicKey},
		Ed25519PublicKeys: []ed25519.PublicKey{k.ed.Public().(ed25519.PublicKey)},
	}
}

func sign(t testing.TB, m jwt.SigningMethod, key any, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signRaw signs a header and claims as written (HS256), duplicates and all.
func signRaw(t testing.TB, key []byte, header, claims string) string {
	t.Helper()
	in := b64(header) + "." + b64(claims)
	sig, err := jwt.SigningMethodHS256.Sign(in, key)
	if err != nil {
		t.Fatal(err)
	}
	return in + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func b64(s string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

func rsaPublicPEM(t testing.TB, k *rsa.PublicKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func TestJWTAuthenticate(t *testing.T) {
	k := newTestKeys(t)
	now := time.Now()
	exp := now.Add(time.Hour).Unix()
	base := func() jwt.MapClaims {
		return jwt.MapClaims{
			"sub":     "alice",
			"exp":     exp,
			"iat":     now.Unix(),
			"rooms":   []string{"game:*", "lobby"},
			"publish": []string{"game:*"},
		}
	}
	with := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := base()
		edit(c)
		return c
	}
	alice := &corralv1.Identity{
		UserId:      "alice",
		Join:        []string{"game:*", "lobby"},
		Publish:     []string{"game:*"},
		ExpiresUnix: exp,
	}

	tests := map[string]struct {
		cfg   auth.JWTConfig
		token func(t *testing.T) string
		want  *corralv1.Identity // nil when refused
		err   string             // reason expected in the refusal
	}{
		"HS256": {
			cfg:   k.hmacConfig(),
			token: func(t *testing.T) string { return sign(t, jwt.SigningMethodHS256, k.hmac, base()) },
			want:  alice,
		},
		"RS256": {
			cfg:   k.rsaConfig(),
			token: func(t *testing.T) string { return sign(t, jwt.SigningMethodRS256, k.rsa, base()) },
			want:  alice,
		},
		"EdDSA": {
			cfg:   k.edConfig(),
			token: func(t *testing.T) string { return sign(t, jwt.SigningMethodEdDSA, k.ed, base()) },
			want:  alice,
		},
		"EdDSA with all kinds of key configured": {
			cfg:   k.allConfig(),
			token: func(t *testing.T) string { return sign(t, jwt.SigningMethodEdDSA, k.ed, base()) },
			want:  alice,
		},
		"second of two RSA keys": {
			cfg: auth.JWTConfig{RSAPublicKeys: []*rsa.PublicKey{&k.rsa2.PublicKey, &k.rsa.PublicKey}},
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodRS256, k.rsa, base())
			},
			want: alice,
		},
		"publish defaults to rooms": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { delete(c, "publish") }))
			},
			want: &corralv1.Identity{
				UserId: "alice", Join: []string{"game:*", "lobby"},
				Publish: []string{"game:*", "lobby"}, ExpiresUnix: exp,
			},
		},
		"null publish defaults to rooms": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { c["publish"] = nil }))
			},
			want: &corralv1.Identity{
				UserId: "alice", Join: []string{"game:*", "lobby"},
				Publish: []string{"game:*", "lobby"}, ExpiresUnix: exp,
			},
		},
		"empty publish grants none": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { c["publish"] = []string{} }))
			},
			want: &corralv1.Identity{
				UserId: "alice", Join: []string{"game:*", "lobby"}, ExpiresUnix: exp,
			},
		},
		"no grants, no expiry": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, jwt.MapClaims{"sub": "bob"})
			},
			want: &corralv1.Identity{UserId: "bob"},
		},
		"issuer and audience match": {
			cfg: auth.JWTConfig{HMACSecret: k.hmac, Issuer: "https://idp", Audience: "corral"},
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) {
					c["iss"] = "https://idp"
					c["aud"] = []string{"other", "corral"}
				}))
			},
			want: alice,
		},
		"audience as a string": {
			cfg: auth.JWTConfig{HMACSecret: k.hmac, Audience: "corral"},
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { c["aud"] = "corral" }))
			},
			want: alice,
		},
		"expired within leeway": {
			cfg: auth.JWTConfig{HMACSecret: k.hmac, Leeway: 10 * time.Second},
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, jwt.MapClaims{"sub": "bob", "exp": now.Add(-2 * time.Second).Unix()})
			},
			want: &corralv1.Identity{UserId: "bob", ExpiresUnix: now.Add(-2 * time.Second).Unix()},
		},
		"expired": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() }))
			},
			err: "token expired",
		},
		"expired beyond leeway": {
			cfg: auth.JWTConfig{HMACSecret: k.hmac, Leeway: 5 * time.Second},
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() }))
			},
			err: "token expired",
		},
		"nbf in the future": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() }))
			},
			err: "token not yet valid",
		},
		"iat in the future": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { c["iat"] = now.Add(time.Minute).Unix() }))
			},
			err: "token issued in the future",
		},
		"expiry required but missing": {
			cfg: auth.JWTConfig{HMACSecret: k.hmac, RequireExpiry: true},
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { delete(c, "exp") }))
			},
			err: "missing exp",
		},
		"wrong HMAC secret": {
			cfg:   k.hmacConfig(),
			token: func(t *testing.T) string { return sign(t, jwt.SigningMethodHS256, k.hmac2, base()) },
			err:   "bad signature",
		},
		"other RSA key": {
			cfg:   k.rsaConfig(),
			token: func(t *testing.T) string { return sign(t, jwt.SigningMethodRS256, k.rsa2, base()) },
			err:   "bad signature",
		},
		"other Ed25519 key": {
			cfg:   k.edConfig(),
			token: func(t *testing.T) string { return sign(t, jwt.SigningMethodEdDSA, k.ed2, base()) },
			err:   "bad signature",
		},
		"tampered claims": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				parts := strings.Split(sign(t, jwt.SigningMethodHS256, k.hmac, base()), ".")
				parts[1] = b64(`{"sub":"mallory","rooms":["*"]}`)
				return strings.Join(parts, ".")
			},
			err: "bad signature",
		},
		"crit with an unknown extension": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				tok := jwt.NewWithClaims(jwt.SigningMethodHS256, base())
				tok.Header["crit"] = []string{"x-must-check"}
				tok.Header["x-must-check"] = true
				s, err := tok.SignedString(k.hmac)
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			err: "crit names an extension this server does not understand",
		},
		"sub set twice": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return signRaw(t, k.hmac, `{"alg":"HS256","typ":"JWT"}`, fmt.Sprintf(`{"sub":"alice","rooms":["lobby"],"exp":%d,"sub":"mallory"}`, exp))
			},
			err: "a header parameter or claim is set twice",
		},
		"alg set twice": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return signRaw(t, k.hmac, `{"alg":"HS256","typ":"JWT","alg":"HS256"}`, fmt.Sprintf(`{"sub":"alice","exp":%d}`, exp))
			},
			err: "a header parameter or claim is set twice",
		},
		"a nested member set twice": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return signRaw(t, k.hmac, `{"alg":"HS256","typ":"JWT"}`, fmt.Sprintf(`{"sub":"alice","exp":%d,"x":[{"a":1,"a":2}]}`, exp))
			},
			err: "a header parameter or claim is set twice",
		},
		"alg none": {
			cfg: k.allConfig(),
			token: func(t *testing.T) string {
				return b64(`{"alg":"none","typ":"JWT"}`) + "." + b64(`{"sub":"mallory","rooms":["*"]}`) + "."
			},
			err: "algorithm not allowed",
		},
		"alg none with a signature": {
			cfg: k.allConfig(),
			token: func(t *testing.T) string {
				return b64(`{"alg":"none","typ":"JWT"}`) + "." + b64(`{"sub":"mallory"}`) + "." + b64("sig")
			},
			err: "algorithm not allowed",
		},
		"alg confusion: HS256 keyed with the RSA public key": {
			cfg: k.rsaConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, rsaPublicPEM(t, &k.rsa.PublicKey), base())
			},
			err: "algorithm not allowed",
		},
		"RS256 when only HMAC is configured": {
			cfg:   k.hmacConfig(),
			token: func(t *testing.T) string { return sign(t, jwt.SigningMethodRS256, k.rsa, base()) },
			err:   "algorithm not allowed",
		},
		"HS512 is not allowed": {
			cfg:   k.hmacConfig(),
			token: func(t *testing.T) string { return sign(t, jwt.SigningMethodHS512, k.hmac, base()) },
			err:   "algorithm not allowed",
		},
		"unknown alg": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return b64(`{"alg":"XX999"}`) + "." + b64(`{"sub":"mallory"}`) + "." + b64("sig")
			},
			err: "algorithm not allowed",
		},
		"missing alg": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return b64(`{"typ":"JWT"}`) + "." + b64(`{"sub":"mallory"}`) + "." + b64("sig")
			},
			err: "algorithm not allowed",
		},
		"wrong audience": {
			cfg: auth.JWTConfig{HMACSecret: k.hmac, Audience: "corral"},
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { c["aud"] = []string{"other"} }))
			},
			err: "wrong audience",
		},
		"missing audience": {
			cfg:   auth.JWTConfig{HMACSecret: k.hmac, Audience: "corral"},
			token: func(t *testing.T) string { return sign(t, jwt.SigningMethodHS256, k.hmac, base()) },
			err:   "wrong audience",
		},
		"wrong issuer": {
			cfg: auth.JWTConfig{HMACSecret: k.hmac, Issuer: "https://idp"},
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { c["iss"] = "https://evil" }))
			},
			err: "wrong issuer",
		},
		"missing issuer": {
			cfg:   auth.JWTConfig{HMACSecret: k.hmac, Issuer: "https://idp"},
			token: func(t *testing.T) string { return sign(t, jwt.SigningMethodHS256, k.hmac, base()) },
			err:   "wrong issuer",
		},
		"missing sub": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { delete(c, "sub") }))
			},
			err: "missing sub",
		},
		"empty sub": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { c["sub"] = "" }))
			},
			err: "missing sub",
		},
		"sub of 128 bytes": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, jwt.MapClaims{"sub": strings.Repeat("u", 128)})
			},
			want: &corralv1.Identity{UserId: strings.Repeat("u", 128)},
		},
		"sub too long": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { c["sub"] = strings.Repeat("u", 129) }))
			},
			err: "sub longer than 128 bytes",
		},
		"sub with a control character": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { c["sub"] = "alice\nlevel=admin" }))
			},
			err: "sub is not printable text",
		},
		"sub not a string": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { c["sub"] = 42 }))
			},
			err: "malformed token",
		},
		"rooms not an array": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { c["rooms"] = "*" }))
			},
			err: "malformed token",
		},
		"exp not a number": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { c["exp"] = "tomorrow" }))
			},
			err: "malformed token",
		},
		"garbage": {
			cfg:   k.hmacConfig(),
			token: func(t *testing.T) string { return "this is not a token at all" },
			err:   "malformed token",
		},
		"garbage in three parts": {
			cfg:   k.hmacConfig(),
			token: func(t *testing.T) string { return "!!!.???.***" },
			err:   "malformed token",
		},
		"four parts": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, base()) + ".extra"
			},
			err: "malformed token",
		},
		"padded base64": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				parts := strings.Split(sign(t, jwt.SigningMethodHS256, k.hmac, base()), ".")
				parts[2] += "="
				return strings.Join(parts, ".")
			},
			err: "malformed token",
		},
		"empty": {
			cfg:   k.hmacConfig(),
			token: func(t *testing.T) string { return "" },
			err:   "no token",
		},
		"oversized": {
			cfg: k.hmacConfig(),
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, k.hmac, with(func(c jwt.MapClaims) { c["pad"] = strings.Repeat("x", 8<<10) }))
			},
			err: "token larger than 8 KiB",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			a, err := auth.NewJWT(tt.cfg)
			if err != nil {
				t.Fatalf("NewJWT: %v", err)
			}
			token := tt.token(t)
			got, err := a.Authenticate(context.Background(), token)
			if tt.want != nil {
				if err != nil {
					t.Fatalf("Authenticate: %v", err)
				}
				checkIdentity(t, got, tt.want)
				return
			}
			if err == nil {
				t.Fatalf("Authenticate accepted the token: %v", got)
			}
			if got != nil {
				t.Errorf("Authenticate returned an identity with its error: %v", got)
			}
			if !errors.Is(err, auth.ErrUnauthenticated) {
				t.Errorf("error %q does not wrap ErrUnauthenticated", err)
			}
			if want := "auth: unauthenticated: " + tt.err; err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
			for _, part := range strings.Split(token, ".") {
				if len(part) >= 8 && strings.Contains(err.Error(), part) {
					t.Errorf("error %q echoes the token", err)
				}
			}
		})
	}
}

func checkIdentity(t *testing.T, got, want *corralv1.Identity) {
	t.Helper()
	if got.GetUserId() != want.GetUserId() ||
		!slices.Equal(got.GetJoin(), want.GetJoin()) ||
		!slices.Equal(got.GetPublish(), want.GetPublish()) ||
		got.GetExpiresUnix() != want.GetExpiresUnix() {
		t.Errorf("identity\n got: %v\nwant: %v", got, want)
	}
}

func TestJWTConcurrent(t *testing.T) {
	k := newTestKeys(t)
	a, err := auth.NewJWT(k.allConfig())
	if err != nil {
		t.Fatal(err)
	}
	tokens := []string{
		sign(t, jwt.SigningMethodHS256, k.hmac, jwt.MapClaims{"sub": "h"}),
		sign(t, jwt.SigningMethodRS256, k.rsa, jwt.MapClaims{"sub": "r"}),
		sign(t, jwt.SigningMethodEdDSA, k.ed, jwt.MapClaims{"sub": "e"}),
		sign(t, jwt.SigningMethodHS256, k.hmac2, jwt.MapClaims{"sub": "bad"}),
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				tok := tokens[(i+j)%len(tokens)]
				id, err := a.Authenticate(context.Background(), tok)
				if (err == nil) == (tok == tokens[3]) {
					t.Errorf("token %d: identity %v, error %v", (i+j)%len(tokens), id, err)
				}
			}
		})
	}
	wg.Wait()
}

func TestNewJWT(t *testing.T) {
	k := newTestKeys(t)
	tests := map[string]struct {
		cfg     auth.JWTConfig
		wantErr bool
	}{
		"HMAC":                {cfg: k.hmacConfig()},
		"RSA":                 {cfg: k.rsaConfig()},
		"Ed25519":             {cfg: k.edConfig()},
		"all":                 {cfg: k.allConfig()},
		"no key":              {cfg: auth.JWTConfig{Issuer: "x", Audience: "y"}, wantErr: true},
		"empty HMAC secret":   {cfg: auth.JWTConfig{HMACSecret: []byte{}}, wantErr: true},
		"1-byte HMAC secret":  {cfg: auth.JWTConfig{HMACSecret: []byte("x")}, wantErr: true},
		"31-byte HMAC secret": {cfg: auth.JWTConfig{HMACSecret: k.hmac[:31]}, wantErr: true},
		"nil RSA key":         {cfg: auth.JWTConfig{RSAPublicKeys: []*rsa.PublicKey{nil}}, wantErr: true},
		"small RSA key":       {cfg: auth.JWTConfig{RSAPublicKeys: []*rsa.PublicKey{{N: big.NewInt(3233), E: 17}}}, wantErr: true},
		"short Ed25519 key":   {cfg: auth.JWTConfig{Ed25519PublicKeys: []ed25519.PublicKey{make([]byte, 31)}}, wantErr: true},
		"negative leeway":     {cfg: auth.JWTConfig{HMACSecret: k.hmac, Leeway: -time.Second}, wantErr: true},
		"RSA and bad Ed25519": {cfg: auth.JWTConfig{RSAPublicKeys: k.rsaConfig().RSAPublicKeys, Ed25519PublicKeys: []ed25519.PublicKey{nil}}, wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			a, err := auth.NewJWT(tt.cfg)
			if tt.wantErr {
				if err == nil {
					t.Fatal("NewJWT succeeded")
				}
				if !strings.HasPrefix(err.Error(), "auth: ") {
					t.Errorf("error %q lacks the package prefix", err)
				}
				return
			}
			if err != nil || a == nil {
				t.Fatalf("NewJWT: %v", err)
			}
		})
	}
}

func TestJWTKeysAreCopied(t *testing.T) {
	k := newTestKeys(t)
	secret := slices.Clone(k.hmac)
	a, err := auth.NewJWT(auth.JWTConfig{HMACSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	clear(secret)
	tok := sign(t, jwt.SigningMethodHS256, k.hmac, jwt.MapClaims{"sub": "alice"})
	if _, err := a.Authenticate(context.Background(), tok); err != nil {
		t.Fatalf("changing the caller's secret changed the authenticator: %v", err)
	}
}

func TestParsePublicKeysPEM(t *testing.T) {
	k := newTestKeys(t)
	edPub := k.ed.Public().(ed25519.PublicKey)

	pkixPEM := func(key any) []byte {
		der, err := x509.MarshalPKIXPublicKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.rsa2.PublicKey)})
	certPEM := selfSigned(t, k.ed)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(k.ed)
	if err != nil {
		t.Fatal(err)
	}
	privPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER})
	cat := func(bs ...[]byte) []byte { return slices.Concat(bs...) }

	tests := map[string]struct {
		in      []byte
		rsa     []*rsa.PublicKey
		ed      []ed25519.PublicKey
		wantErr bool
	}{
		"RSA PKIX":          {in: pkixPEM(&k.rsa.PublicKey), rsa: []*rsa.PublicKey{&k.rsa.PublicKey}},
		"RSA PKCS1":         {in: pkcs1, rsa: []*rsa.PublicKey{&k.rsa2.PublicKey}},
		"Ed25519 PKIX":      {in: pkixPEM(edPub), ed: []ed25519.PublicKey{edPub}},
		"Ed25519 cert":      {in: certPEM, ed: []ed25519.PublicKey{edPub}},
		"several with text": {in: cat([]byte("# keys\n"), pkixPEM(&k.rsa.PublicKey), []byte("comment\n"), pkixPEM(edPub), pkcs1), rsa: []*rsa.PublicKey{&k.rsa.PublicKey, &k.rsa2.PublicKey}, ed: []ed25519.PublicKey{edPub}},
		"empty":             {in: nil, wantErr: true},
		"not PEM":           {in: []byte("hello"), wantErr: true},
		"private key":       {in: privPEM, wantErr: true},
		"ECDSA key":         {in: pkixPEM(&ecKey.PublicKey), wantErr: true},
		"bad DER":           {in: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte("junk")}), wantErr: true},
		"truncated second":  {in: cat(pkixPEM(edPub), pkixPEM(edPub)[:40]), wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			rsaKeys, edKeys, err := auth.ParsePublicKeysPEM(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParsePublicKeysPEM succeeded: %d RSA, %d Ed25519", len(rsaKeys), len(edKeys))
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePublicKeysPEM: %v", err)
			}
			if !slices.EqualFunc(rsaKeys, tt.rsa, func(a, b *rsa.PublicKey) bool { return a.Equal(b) }) {
				t.Errorf("RSA keys differ: got %d, want %d", len(rsaKeys), len(tt.rsa))
			}
			if !slices.EqualFunc(edKeys, tt.ed, func(a, b ed25519.PublicKey) bool { return a.Equal(b) }) {
				t.Errorf("Ed25519 keys differ: got %d, want %d", len(edKeys), len(tt.ed))
			}
		})
	}
}

func TestParsePublicKeysPEMThenAuthenticate(t *testing.T) {
	k := newTestKeys(t)
	rsaKeys, edKeys, err := auth.ParsePublicKeysPEM(rsaPublicPEM(t, &k.rsa.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.NewJWT(auth.JWTConfig{RSAPublicKeys: rsaKeys, Ed25519PublicKeys: edKeys})
	if err != nil {
		t.Fatal(err)
	}
	tok := sign(t, jwt.SigningMethodRS256, k.rsa, jwt.MapClaims{"sub": "alice", "rooms": []string{"*"}})
	id, err := a.Authenticate(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	checkIdentity(t, id, &corralv1.Identity{UserId: "alice", Join: []string{"*"}, Publish: []string{"*"}})
}

func selfSigned(t *testing.T, key ed25519.PrivateKey) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "corral test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
