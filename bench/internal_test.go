package bench

import (
	"context"
	"math"
	"testing"
	"time"
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
