package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Limit is a count or size bound: a positive number, or [Unlimited]. Its
// text form (a flag, an environment variable, a file key) is the number
// or "unlimited" (a negative number, the old spelling, is read as
// unlimited too); 0 is refused rather than read as a default or as
// "unlimited", so that no value means two things.
type Limit int

// Unlimited is the Limit that bounds nothing.
const Unlimited Limit = -1

// Bounded reports whether l bounds anything.
func (l Limit) Bounded() bool { return l > 0 }

func (l Limit) String() string {
	if l < 0 {
		return "unlimited"
	}
	return strconv.Itoa(int(l))
}

// MarshalText implements encoding.TextMarshaler.
func (l Limit) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (l *Limit) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "unlimited" {
		*l = Unlimited
		return nil
	}
	n, err := strconv.Atoi(s)
	if err == nil && n < 0 {
		*l = Unlimited
		return nil
	}
	if err != nil || n == 0 {
		return fmt.Errorf("want a positive number or unlimited, got %q", s)
	}
	*l = Limit(n)
	return nil
}

// Rate is a token bucket's rate in events per second: a positive number,
// or [UnlimitedRate]. Its text form is the number or "unlimited" (a
// negative number, the old spelling, is read as unlimited too); 0 is
// refused (a class that must not publish says publish: none).
type Rate float64

// UnlimitedRate is the Rate that limits nothing.
const UnlimitedRate Rate = -1

// Limited reports whether r limits anything.
func (r Rate) Limited() bool { return r > 0 }

func (r Rate) String() string {
	if r < 0 {
		return "unlimited"
	}
	return strconv.FormatFloat(float64(r), 'g', -1, 64)
}

// MarshalText implements encoding.TextMarshaler.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *Rate) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "unlimited" {
		*r = UnlimitedRate
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err == nil && f < 0 {
		*r = UnlimitedRate
		return nil
	}
	if err != nil || !(f > 0) {
		return fmt.Errorf("want a positive rate per second or unlimited, got %q", s)
	}
	*r = Rate(f)
	return nil
}

// Window is a duration that can be switched off: text a Go duration
// ("250ms") or "off". [Off] is the Window that is off; a zero duration is
// refused, so that 0 never means "off" in one place and "default" in
// another.
type Window time.Duration

// Off is the Window that is switched off.
const Off Window = -1

// On reports whether w is a duration rather than Off.
func (w Window) On() bool { return w > 0 }

func (w Window) String() string {
	if w < 0 {
		return "off"
	}
	return time.Duration(w).String()
}

// MarshalText implements encoding.TextMarshaler.
func (w Window) MarshalText() ([]byte, error) { return []byte(w.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (w *Window) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "off" {
		*w = Off
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("want a positive duration (e.g. 250ms) or off, got %q", s)
	}
	*w = Window(d)
	return nil
}
