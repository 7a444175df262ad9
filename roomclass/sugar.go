package roomclass

import (
	"fmt"
	"time"
)

// Tick is a signal tick for the rooms matching Pattern: one item of the
// --signal-tick-rooms flag.
type Tick struct {
	Pattern string
	Tick    time.Duration
}

// FromFlags is the classes that the pattern flags --read-only-rooms and
// --signal-tick-rooms stand for, each a copy of def that changes one
// thing: "read-only-N" classes (publish and signal none) first, then
// "signal-tick-N" classes. A read-only pattern takes the tick of the
// first tick pattern that matches every room it does ([Subsumes]), as the
// two flags did together; rooms that two overlapping patterns only partly
// share get the read-only class's tick: write such rooms as classes in
// the config file instead.
func FromFlags(def Class, readOnly []string, ticks []Tick) []Class {
	var out []Class
	for i, p := range readOnly {
		c := def
		c.Name, c.Match = fmt.Sprintf("read-only-%d", i+1), Patterns{p}
		c.Publish, c.Signal = None, None
		for _, t := range ticks {
			if Subsumes(t.Pattern, p) {
				c.SignalTick = t.Tick
				break
			}
		}
		out = append(out, c)
	}
	for i, t := range ticks {
		c := def
		c.Name, c.Match = fmt.Sprintf("signal-tick-%d", i+1), Patterns{t.Pattern}
		c.SignalTick = t.Tick
		out = append(out, c)
	}
	return out
}
