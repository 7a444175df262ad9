package server

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// This file keeps secrets given on the command line out of what corral
// shows: /debug/pprof/cmdline serves Options.DebugCmdline, which the
// command fills with RedactArgs, and every secret flag has a file form
// (ReadSecretFile) so that it need not be on the command line at all
// (/proc/<pid>/cmdline is readable by every local user).

// Redacted replaces a secret in what corral shows.
const Redacted = "REDACTED"

// maxSecretFile bounds a secret file, in bytes.
const maxSecretFile = 64 << 10

// RedactArgs returns args with the value of every flag secret reports
// true for (its name without dashes) replaced by [Redacted], in the forms
// -name=value, --name=value, -name value and --name value. A value that is
// a URL with user info (redis://:password@host) keeps everything but the
// user info, so the address stays readable. args[0] and arguments after
// "--" are kept.
func RedactArgs(args []string, secret func(flag string) bool) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i := 1; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !secret(name) {
			continue
		}
		if hasValue {
			out[i] = a[:len(a)-len(value)] + redactValue(value)
			continue
		}
		if i+1 < len(out) {
			i++
			out[i] = redactValue(out[i])
		}
	}
	return out
}

// redactValue hides a secret value: a URL's user info, or the whole value.
func redactValue(v string) string {
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return Redacted
	}
	if u.User != nil {
		u.User = url.User(Redacted)
	}
	// A password may also come as a query parameter; other parameters
	// (e.g. more node addresses) stay readable.
	if q := u.Query(); q.Has("password") {
		q.Set("password", Redacted)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// ReadSecretFile reads a secret from a file (the --*-file flags and
// CORRAL_*_FILE variables, e.g. a Docker or Kubernetes secret): its content
// without trailing white space. An empty file is an error.
func ReadSecretFile(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("server: secret file: %w", err)
	}
	if fi.Size() > maxSecretFile {
		return "", fmt.Errorf("server: secret file %s is larger than %d bytes", path, maxSecretFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("server: secret file: %w", err)
	}
	b = bytes.TrimRight(b, " \t\r\n")
	if len(b) == 0 {
		return "", fmt.Errorf("server: secret file %s is empty", path)
	}
	return string(b), nil
}
