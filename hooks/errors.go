package hooks

import (
	"errors"
	"fmt"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/safetext"
)

// ErrUnavailable is wrapped by every error of a hook that could not be
// answered: the backend failed or is unreachable, it did not answer in
// time, its breaker is open, or too many calls are in flight. The client
// gets CODE_UNAVAILABLE; [RetryAfter] says when to come back.
var ErrUnavailable = errors.New("hooks: backend unavailable")

// Kinds of failure, the label kind of corral_hook_errors_total.
const (
	KindTimeout     = "timeout"
	KindBackend     = "backend"      // the call failed (connection, RPC error)
	KindBreakerOpen = "breaker_open" // not called: the breaker is open
	KindOverloaded  = "overloaded"   // not called: too many in flight
	KindBadResponse = "bad_response" // answered, but not as the contract says
)

// unavailable is the error of a call that could not be answered.
type unavailable struct {
	hook, kind string
	retry      time.Duration
	err        error // the cause, for logs; may be nil
}

func (e *unavailable) Error() string {
	if e.err != nil {
		return fmt.Sprintf("hooks: %s: %s: %v", e.hook, e.kind, e.err)
	}
	return fmt.Sprintf("hooks: %s: %s", e.hook, e.kind)
}

func (e *unavailable) Is(target error) bool { return target == ErrUnavailable }
func (e *unavailable) Unwrap() error        { return e.err }

// RetryAfter returns how long a client refused because of err should
// wait: the time left on an open breaker, else one second.
func RetryAfter(err error) time.Duration {
	var u *unavailable
	if errors.As(err, &u) && u.retry > 0 {
		return u.retry
	}
	return time.Second
}

// Kind returns the kind of failure of an error wrapping [ErrUnavailable]
// (KindTimeout, ...), or "".
func Kind(err error) string {
	var u *unavailable
	if errors.As(err, &u) {
		return u.kind
	}
	return ""
}

// ClientRefusal turns a backend's refusal into what the client sees: its
// code when it is a code of the client table (4000-4499), else fallback;
// the reason cut to the protocol's bound (and a default when empty).
func ClientRefusal(r *corralv1.Refusal, fallback corralv1.Code) (corralv1.Code, string) {
	code := r.GetCode()
	_, known := corralv1.Code_name[int32(code)]
	if !known || code < 4000 || code > 4499 {
		code = fallback
	}
	reason := r.GetReason()
	if reason == "" {
		reason = "refused by the application"
	}
	return code, safetext.Reason(reason)
}
