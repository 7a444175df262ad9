// Package tryagain repeats Redis commands that Redis Cluster refused with
// TRYAGAIN: a multi-key command (a script on a room's keys) whose slot is
// being migrated while its keys are split between the two nodes. Such a
// command did not run, so repeating it is safe; the split lasts until the
// migration moves the remaining keys.
package tryagain

import (
	"context"
	"time"

	"github.com/redis/rueidis"
)

// Is reports whether err is a TRYAGAIN reply.
func Is(err error) bool {
	e, ok := rueidis.IsRedisErr(err)
	return ok && e.IsTryAgain()
}

// Wait sleeps before attempt number attempt (1, 2, ...) of a command
// refused with TRYAGAIN: 5 ms, doubling up to 200 ms. It reports false,
// at once, when ctx ends first.
func Wait(ctx context.Context, attempt int) bool {
	d := 5 * time.Millisecond << min(attempt-1, 6)
	d = min(d, 200*time.Millisecond)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Do calls fn again while it fails with TRYAGAIN, until ctx ends; it
// returns fn's last error.
func Do(ctx context.Context, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if !Is(err) || !Wait(ctx, attempt) {
			return err
		}
	}
}
