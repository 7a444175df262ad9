package outbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CrashEnv names the test hook that kills the process at a chosen step of
// the relay, so that tests reach each crash step deterministically instead
// of by killing at random (docs/OUTBOX.md "Exactly once across crashes").
// Off when unset; never set it in production. Its value is STEP:N, where N
// counts the rows this process handled, from 1:
//
//   - before-publish:N — the process SIGKILLs itself before publishing its
//     Nth row (that row and the rest of its batch are neither published
//     nor deleted);
//   - after-publish:N — right after its Nth row was published, before the
//     batch's delete (the rows published in that batch are published and
//     still in the outbox).
const CrashEnv = "CORRAL_OUTBOX_CRASH"

// crashStep is a step of a pass the hook can crash at.
type crashStep int

const (
	crashNone crashStep = iota
	crashBeforePublish
	crashAfterPublish
)

// crashPoint is a parsed CrashEnv; the zero value never crashes. Only the
// leader's pass touches it (one goroutine), so it needs no lock.
type crashPoint struct {
	step crashStep
	at   int // the row count to crash at
	n    int // rows handled so far
}

// parseCrash parses CrashEnv's value; "" is no crash point.
func parseCrash(v string) (crashPoint, error) {
	if v == "" {
		return crashPoint{}, nil
	}
	step, n, ok := strings.Cut(v, ":")
	at, err := strconv.Atoi(n)
	if !ok || err != nil || at < 1 {
		return crashPoint{}, fmt.Errorf("outbox: %s=%q: want before-publish:N or after-publish:N with N >= 1", CrashEnv, v)
	}
	switch step {
	case "before-publish":
		return crashPoint{step: crashBeforePublish, at: at}, nil
	case "after-publish":
		return crashPoint{step: crashAfterPublish, at: at}, nil
	}
	return crashPoint{}, fmt.Errorf("outbox: %s=%q: unknown step %q (before-publish, after-publish)", CrashEnv, v, step)
}

// before is called before each row's publish: it counts the row and
// crashes when this is the chosen row and step.
func (c *crashPoint) before() {
	if c.step == crashNone {
		return
	}
	c.n++
	if c.step == crashBeforePublish && c.n == c.at {
		kill()
	}
}

// after is called after a row was published, before its delete.
func (c *crashPoint) after() {
	if c.step == crashAfterPublish && c.n == c.at {
		kill()
	}
}

// kill ends the process with SIGKILL, as kill -9 would: no deferred
// calls, no flush, no connection closed politely.
func kill() {
	p, err := os.FindProcess(os.Getpid())
	if err == nil {
		_ = p.Kill()
	}
	os.Exit(137) // not reached where Kill works
}
