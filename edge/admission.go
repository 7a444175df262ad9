package edge

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"golang.org/x/time/rate"
)

// Admission control: a reconnect storm must be queued, not dropped, and must
// not starve the clients already connected. New handshakes and resumes each
// have a token bucket, separate from steady traffic. Past its bucket a
// request is answered at once, before the upgrade, with 503 and a jittered
// Retry-After, instead of letting the accept backlog overflow or work pile
// up inside the server (seed W1: backlog overflow at ~5,000 clients, then
// event-loop saturation with p99 6.6 s).
//
// A client says it is resuming by adding ?resume=1 to the URL (the Go and
// JS clients do); such requests draw on the resume bucket.

// admission holds the two buckets.
type admission struct {
	handshakes *rate.Limiter // nil: unlimited
	resumes    *rate.Limiter
}

func newAdmission(cfg Config) *admission {
	a := &admission{}
	if cfg.HandshakeRate > 0 {
		a.handshakes = rate.NewLimiter(rate.Limit(cfg.HandshakeRate), max(cfg.HandshakeBurst, 1))
	}
	if cfg.ResumeRate > 0 {
		a.resumes = rate.NewLimiter(rate.Limit(cfg.ResumeRate), max(cfg.ResumeBurst, 1))
	}
	return a
}

// admit takes a token for r, or returns how long the client should wait.
func (a *admission) admit(r *http.Request) (kind string, wait time.Duration) {
	kind, lim := "handshake", a.handshakes
	if r.URL.Query().Has("resume") {
		kind, lim = "resume", a.resumes
	}
	if lim == nil {
		return kind, 0
	}
	now := time.Now()
	res := lim.ReserveN(now, 1)
	if !res.OK() {
		return kind, time.Second
	}
	d := res.DelayFrom(now)
	if d == 0 {
		return kind, 0
	}
	res.CancelAt(now)
	return kind, d
}

// refuse answers 503 with a jittered delay: the time until a token frees
// up, spread over as much again so the refused do not return together.
func refuse(w http.ResponseWriter, wait time.Duration) {
	refuseWith(w, wait, "corral is admitting connections gradually; retry after the delay")
}

// refuseWith answers 503 with CODE_OVERLOADED, msg and a jittered delay.
func refuseWith(w http.ResponseWriter, wait time.Duration, msg string) {
	ms := wait.Milliseconds()
	ms += rand.Int64N(ms + 100)
	w.Header().Set("Retry-After", strconv.FormatInt((ms+999)/1000, 10))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	json.NewEncoder(w).Encode(map[string]any{
		"code":         int(corralv1.Code_CODE_OVERLOADED),
		"message":      msg,
		"retryAfterMs": ms,
	})
}
