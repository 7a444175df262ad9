package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"strings"

	"connectrpc.com/connect/v2"
	"github.com/corral-rt/corral/internal/reasons"
	"github.com/prometheus/client_golang/prometheus"
)

// MinAPIKeyLen is the shortest API key a server accepts.
const MinAPIKeyLen = 16

var (
	errNoAPIKey    = errors.New("server: missing API key: send \"Authorization: Bearer <key>\"")
	errWrongAPIKey = errors.New("server: API key not accepted")
)

// RequireAPIKey returns a server interceptor that admits a call only when
// its "Authorization: Bearer <key>" header names one of keys, and refuses
// it otherwise with CodeUnauthenticated. Keys are compared in constant
// time (as SHA-256 digests, so neither their content nor their length
// shows in the timing). refused, if not nil, counts the refusals by reason
// ("missing", "wrong").
func RequireAPIKey(keys []string, refused *prometheus.CounterVec) (connect.ServerInterceptor, error) {
	if len(keys) == 0 {
		return nil, errors.New("server: no API keys")
	}
	check, err := newKeyCheck(keys)
	if err != nil {
		return nil, err
	}
	counters := reasons.Counters("server", refused, keyRefusalNames[:])
	refuse := func(reason keyRefusal, err error) error {
		if counters != nil {
			counters[reason].Inc()
		}
		return connect.NewError(connect.CodeUnauthenticated, err.Error()).WithCause(err)
	}
	return func(next connect.ServerFunc) connect.ServerFunc {
		return func(ctx context.Context, spec connect.Spec, stream connect.ServerStream) error {
			info, _ := connect.CallInfoForServerContext(ctx)
			var h string
			if info != nil {
				h = info.RequestHeader().Get("Authorization")
			}
			if err := check(h); err != nil {
				return refuse(keyRefusalOf(err), err)
			}
			return next(ctx, spec, stream)
		}
	}, nil
}

// newKeyCheck returns a function that checks an Authorization header
// against keys in constant time (as SHA-256 digests, so neither their
// content nor their length shows in the timing).
func newKeyCheck(keys []string) (func(header string) error, error) {
	if len(keys) == 0 {
		return nil, errors.New("server: no API keys")
	}
	digests := make([][sha256.Size]byte, len(keys))
	for i, k := range keys {
		if len(k) < MinAPIKeyLen {
			return nil, fmt.Errorf("server: API key %d is shorter than %d characters", i+1, MinAPIKeyLen)
		}
		digests[i] = sha256.Sum256([]byte(k))
	}
	return func(header string) error {
		key, ok := bearer(header)
		if !ok {
			return errNoAPIKey
		}
		d := sha256.Sum256([]byte(key))
		match := 0
		for i := range digests {
			match |= subtle.ConstantTimeCompare(d[:], digests[i][:])
		}
		if match != 1 {
			return errWrongAPIKey
		}
		return nil
	}, nil
}

// bearer extracts the token of an "Authorization: Bearer <token>" value.
func bearer(h string) (string, bool) {
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	t := strings.TrimSpace(h[len(scheme):])
	return t, t != ""
}

// ParseAPIKeys splits a comma-separated list of keys, dropping blanks.
func ParseAPIKeys(list string) []string {
	var keys []string
	for _, k := range strings.Split(list, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// ReadAPIKeyFile reads keys from a file: one per line; blank lines and
// lines starting with '#' are skipped.
func ReadAPIKeyFile(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("server: API key file: %w", err)
	}
	var keys []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		keys = append(keys, line)
	}
	return keys, sc.Err()
}
