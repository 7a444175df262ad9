package bench

import (
	"context"
	"math"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connectproto"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

func TestHistogramBuckets(t *testing.T) {
	prevHi := uint64(0)
	for i := range histBuckets {
		lo, hi := bucketRange(i)
		if lo != prevHi || hi <= lo {
			t.Fatalf("bucket %d is [%d,%d), previous ended at %d", i, lo, hi, prevHi)
		}
		if got := bucketOf(lo); got != i {
			t.Fatalf("bucketOf(%d) = %d, want %d", lo, got, i)
		}
		if got := bucketOf(hi - 1); got != i {
			t.Fatalf("bucketOf(%d) = %d, want %d", hi-1, got, i)
		}
		prevHi = hi
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.observe(time.Duration(i) * time.Millisecond)
	}
	tests := map[string]struct {
		q    float64
		want time.Duration
	}{
		"p50": {0.50, 500 * time.Millisecond},
		"p99": {0.99, 990 * time.Millisecond},
		"max": {1, 1000 * time.Millisecond},
	}
	for name, tt := range tests {
		got := h.quantile(tt.q)
		if math.Abs(float64(got-tt.want)) > 0.035*float64(tt.want) {
			t.Errorf("%s = %v, want %v within 3.5%%", name, got, tt.want)
		}
	}
}

func TestProfileSchedule(t *testing.T) {
	tests := map[string]struct {
		p    profile
		want int // events in the whole profile
	}{
		"steady":    {steady(100, 2*time.Second), 200},
		"ramp":      {profile{{10 * time.Second, 0, 200}}, 1000},
		"ramp+hold": {profile{{time.Second, 0, 100}, {time.Second, 100, 100}}, 150},
		"zero":      {steady(0, time.Second), 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			n := 0
			var last time.Duration
			for {
				at, ok := tt.p.at(n)
				if !ok {
					break
				}
				if at < last {
					t.Fatalf("event %d at %v, before %v", n, at, last)
				}
				last = at
				n++
				if n > 10*tt.want+10 {
					t.Fatal("profile never ends")
				}
			}
			if n < tt.want-1 || n > tt.want+1 {
				t.Errorf("%d events, want %d", n, tt.want)
			}
		})
	}
}

func TestPaceStopsOnLimit(t *testing.T) {
	n := pace(context.Background(), time.Now(), steady(1e6, time.Hour), 50, func(int, time.Time) bool { return true })
	if n != 50 {
		t.Errorf("fired %d, want 50", n)
	}
}

func TestPayloadCarriesTime(t *testing.T) {
	at := time.Unix(1700000000, 123456789)
	p := payload(nil, at, 7, 100)
	if len(p) != 100 {
		t.Errorf("payload is %d bytes, want 100: %s", len(p), p)
	}
	got, ok := sentTime(p)
	if !ok || got != at.UnixNano() {
		t.Errorf("sentTime = %d, %v; want %d", got, ok, at.UnixNano())
	}
	if _, ok := sentTime([]byte(`{"text":"hi"}`)); ok {
		t.Error("sentTime read a foreign payload")
	}
}

// TestOverloadHint: only a resource_exhausted error whose corral.v1.Error
// detail is CODE_OVERLOADED is a hint to back off, for its retry_after_ms.
func TestOverloadHint(t *testing.T) {
	withDetail := func(code connect.Code, e *corralv1.Error) error {
		err := connect.NewError(code, "x")
		d, derr := connectproto.NewErrorDetail(e)
		if derr != nil {
			t.Fatal(derr)
		}
		return err.WithDetail(d)
	}
	for name, tc := range map[string]struct {
		err  error
		want time.Duration
		ok   bool
	}{
		"overloaded":       {withDetail(connect.CodeResourceExhausted, &corralv1.Error{Code: corralv1.Code_CODE_OVERLOADED, RetryAfterMs: 250}), 250 * time.Millisecond, true},
		"no detail":        {connect.NewError(connect.CodeResourceExhausted, "store busy"), 0, false},
		"other code":       {withDetail(connect.CodeUnavailable, &corralv1.Error{Code: corralv1.Code_CODE_OVERLOADED, RetryAfterMs: 250}), 0, false},
		"other error code": {withDetail(connect.CodeResourceExhausted, &corralv1.Error{Code: corralv1.Code_CODE_UNAVAILABLE, RetryAfterMs: 250}), 0, false},
		"not connect":      {context.DeadlineExceeded, 0, false},
	} {
		t.Run(name, func(t *testing.T) {
			d, ok := overloadHint(tc.err)
			if d != tc.want || ok != tc.ok {
				t.Fatalf("overloadHint = %v, %v; want %v, %v", d, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestVersusCheckNamesGapsAndTails: the versus check counts a hole in what
// a member read apart from a member left behind, and names both.
func TestVersusCheckNamesGapsAndTails(t *testing.T) {
	x := &vsRun{r: newRun("versus", Options{}, time.Minute), upto: map[string]uint64{}}
	gap := &vsMember{idx: 1, room: "r"}
	tail := &vsMember{idx: 2, room: "r"}
	whole := &vsMember{idx: 3, room: "r"}
	x.members = []*vsMember{gap, tail, whole}
	for _, m := range x.members {
		m.last.Store(10) // joined at 10
	}
	for _, off := range []uint64{11, 12, 15, 16, 17, 18, 19, 20} {
		x.read(gap, 0, Pub{Offset: off})
		x.read(whole, 0, Pub{Offset: off})
	}
	for _, off := range []uint64{11, 12, 13, 14, 15, 16, 17} {
		x.read(tail, 0, Pub{Offset: off})
	}
	whole.gaps.Store(0) // read 13 and 14 too, as far as the check goes
	whole.gapFrom.Store(0)
	d := x.check()
	if d.Lost != 2+3 {
		t.Fatalf("lost %d, want 5 (2 in a gap, 3 behind)", d.Lost)
	}
	want := []string{
		"member 1 (r): 2 missing in gaps, the first 13-14",
		"member 2 (r): behind when the drain ended, read up to 17 of 20",
	}
	if len(d.Violations) != len(want) {
		t.Fatalf("violations %q, want %q", d.Violations, want)
	}
	for i := range want {
		if d.Violations[i] != want[i] {
			t.Fatalf("violation %d: %q, want %q", i, d.Violations[i], want[i])
		}
	}
}

// TestVersusDrainWaitsForTheLastFrames: with client publishes (no offset
// in the acknowledgement), the drain waits for a member still within its
// server's write window instead of ending at once and counting it behind.
func TestVersusDrainWaitsForTheLastFrames(t *testing.T) {
	x := &vsRun{r: newRun("versus", Options{}, time.Minute), upto: map[string]uint64{}}
	early := &vsMember{idx: 1, room: "r"}
	late := &vsMember{idx: 2, room: "r"}
	x.members = []*vsMember{early, late}
	for _, off := range []uint64{1, 2, 3} {
		x.read(early, 0, Pub{Offset: off})
	}
	x.read(late, 0, Pub{Offset: 1})
	x.read(late, 0, Pub{Offset: 2})
	go func() {
		time.Sleep(150 * time.Millisecond) // a coalesced write lands
		x.read(late, 0, Pub{Offset: 3})
	}()
	x.drain(context.Background(), 5*time.Second)
	if d := x.check(); d.Lost != 0 || len(d.Violations) != 0 {
		t.Fatalf("lost %d: %q", d.Lost, d.Violations)
	}
}
