package mono_test

import (
	"testing"
	"time"

	"github.com/corral-rt/corral/internal/mono"
)

// TestNowMeasuresIntervals: Now is never 0, never goes back, and two
// readings a sleep apart differ by at least the sleep.
func TestNowMeasuresIntervals(t *testing.T) {
	a := mono.Now()
	if a <= 0 {
		t.Fatalf("Now() = %d, want > 0 (0 means none to callers)", a)
	}
	time.Sleep(20 * time.Millisecond)
	b := mono.Now()
	if d := time.Duration(b - a); d < 20*time.Millisecond {
		t.Fatalf("20ms apart, Now() moved %v", d)
	}
	for range 1000 {
		c := mono.Now()
		if c < b {
			t.Fatalf("Now() went back: %d after %d", c, b)
		}
		b = c
	}
}

func BenchmarkNow(b *testing.B) {
	for b.Loop() {
		mono.Now()
	}
}

func BenchmarkWallUnixNano(b *testing.B) {
	for b.Loop() {
		_ = time.Now().UnixNano()
	}
}
