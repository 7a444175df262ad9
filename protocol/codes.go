package protocol

import (
	"strconv"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// Advice is what a client should do after a close code or an error code.
//
// The range of a [corralv1.Code] gives the advice (see codes.proto):
//
//	Range      Advice  Codes
//	4000-4099  resume  4000 GOING_AWAY, 4001 SLOW_CONSUMER,
//	                   4002 CORE_UNAVAILABLE, 4003 HEARTBEAT_TIMEOUT,
//	                   4004 SESSION_TAKEN_OVER
//	4100-4199  retry   4100 OVERLOADED, 4101 RATE_LIMITED,
//	                   4102 SESSION_EXPIRED, 4103 UNAVAILABLE,
//	                   4104 TOKEN_EXPIRED, 4105 BACKLOG_FULL,
//	                   4106 OUT_OF_ORDER
//	4400-4499  stop    4400 BAD_FRAME, 4401 UNAUTHENTICATED,
//	                   4402 RESUME_REFUSED, 4403 FORBIDDEN, 4404 NOT_JOINED,
//	                   4405 HELLO_REQUIRED, 4406 UNKNOWN_FRAME,
//	                   4407 INVALID_ARGUMENT, 4408 LIMIT_EXCEEDED,
//	                   4409 UNSUBSCRIBED, 4410 UNIMPLEMENTED,
//	                   4411 VERSION_CONFLICT, 4412 MESSAGE_FINAL,
//	                   4413 TOO_LARGE, 4414 TOO_MANY_KEYS
//	other      stop    0 UNSPECIFIED, and any number outside the ranges
//
// Resume: reconnect (after ReconnectHint.delay_ms, if given) and resume the
// session. Retry: try again later with a new connection or, for an error
// frame, repeat the operation after retry_after_ms. Stop: do not reconnect
// or repeat the operation unchanged.
//
// Two codes qualify their range's advice, as codes.proto says: after 4004
// SESSION_TAKEN_OVER the session lives on another connection, so this one
// must not reconnect by itself; after 4102 SESSION_EXPIRED the retry is a
// new session (no resume), and state must be refetched.
type Advice uint8

const (
	// AdviceStop: do not reconnect or repeat the operation unchanged.
	AdviceStop Advice = iota
	// AdviceResume: reconnect and resume the session; nothing is lost.
	AdviceResume
	// AdviceRetry: try again later.
	AdviceRetry
)

// String returns "stop", "resume" or "retry".
func (a Advice) String() string {
	switch a {
	case AdviceStop:
		return "stop"
	case AdviceResume:
		return "resume"
	case AdviceRetry:
		return "retry"
	}
	return "Advice(" + strconv.Itoa(int(a)) + ")"
}

// AdviceOf returns the advice of a code's range: 4000-4099 resume,
// 4100-4199 retry, everything else stop. Unknown codes in a range get the
// range's advice, so older clients understand newer codes.
func AdviceOf(c corralv1.Code) Advice {
	switch {
	case c >= 4000 && c <= 4099:
		return AdviceResume
	case c >= 4100 && c <= 4199:
		return AdviceRetry
	}
	return AdviceStop
}
