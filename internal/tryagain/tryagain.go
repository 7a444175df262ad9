// Package tryagain repeats Redis commands that Redis Cluster refused with
// TRYAGAIN: a multi-key command (a script on a room's keys) whose slot is
// being migrated while its keys are split between the two nodes. Such a
// command did not run, so repeating it is safe; the split lasts until the
// migration moves the remaining keys.
package tryagain

import (
	"context"
	"time"

	"github.com/corral-rt/corral/internal/retry"
	"github.com/redis/rueidis"
)

// Is reports whether err is a TRYAGAIN reply.
func Is(err error) bool {
	e, ok := rueidis.IsRedisErr(err)
	return ok && e.IsTryAgain()
}

// Backoff is the schedule between attempts of a command refused with
// TRYAGAIN: a migration's split is short, so the ceiling starts at 5 ms
// and stops at 200 ms (full jitter, see retry). Each retry loop owns one.
func Backoff() *retry.Backoff {
	return &retry.Backoff{Base: 5 * time.Millisecond, Cap: 200 * time.Millisecond}
}

// Do calls fn again while it fails with TRYAGAIN, until ctx ends; it
// returns fn's last error.
func Do(ctx context.Context, fn func() error) error {
	b := Backoff()
	for {
		err := fn()
		if !Is(err) || !b.Wait(ctx) {
			return err
		}
	}
}
