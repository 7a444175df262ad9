//go:build !unix

package server

import "errors"

// setBacklog is not available here: the platform's listen queue stays at
// Go's default. backlog reports it instead of ignoring it.
func setBacklog(uintptr, int) error {
	return errors.New("backlog is not supported on this platform")
}
