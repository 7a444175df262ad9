package retry

import (
	"context"
	"testing"
	"time"
)

func TestCeilingDoublesToCap(t *testing.T) {
	b := Backoff{Base: 10 * time.Millisecond, Cap: 75 * time.Millisecond}
	want := []time.Duration{10, 20, 40, 75, 75, 75}
	for i, w := range want {
		if got := b.Ceiling(); got != w*time.Millisecond {
			t.Fatalf("failure %d: ceiling %v, want %v", i, got, w*time.Millisecond)
		}
		if d := b.Next(); d < 0 || d > w*time.Millisecond {
			t.Fatalf("failure %d: delay %v outside [0, %v]", i, d, w*time.Millisecond)
		}
	}
	b.Reset()
	if got := b.Ceiling(); got != 10*time.Millisecond {
		t.Fatalf("after Reset: ceiling %v", got)
	}
}

func TestDefaults(t *testing.T) {
	var b Backoff
	if got := b.Ceiling(); got != defaultBase {
		t.Fatalf("zero value ceiling %v, want %v", got, defaultBase)
	}
	for range 100 {
		b.Next()
	}
	if got := b.Ceiling(); got != defaultCap {
		t.Fatalf("after many failures: ceiling %v, want %v", got, defaultCap)
	}
}

// Full jitter: delays spread over the whole range, not just its top half.
func TestFullJitter(t *testing.T) {
	b := Backoff{Base: time.Second, Cap: time.Second}
	low := 0
	for range 1000 {
		if b.Next() < 250*time.Millisecond {
			low++
		}
	}
	if low < 150 || low > 350 {
		t.Fatalf("%d of 1000 delays below a quarter of the ceiling; want about 250", low)
	}
}

func TestResetAfterLongAttempt(t *testing.T) {
	b := Backoff{Base: time.Millisecond, Cap: time.Second, ResetAfter: time.Hour}
	for range 5 {
		b.Start()
		b.Next()
	}
	if got := b.Ceiling(); got != 32*time.Millisecond {
		t.Fatalf("ceiling %v after 5 short attempts", got)
	}
	// An attempt that started two hours ago ran past ResetAfter (set
	// directly: a sleeping test would depend on the machine's speed).
	b.started = time.Now().Add(-2 * time.Hour)
	b.Next()
	if got := b.Ceiling(); got != 2*time.Millisecond {
		t.Fatalf("ceiling %v after a long attempt; want the schedule restarted", got)
	}
}

func TestWaitEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := Backoff{Base: time.Hour, Cap: time.Hour}
	b.failures = 3
	start := time.Now()
	if b.Wait(ctx) {
		t.Fatal("Wait reported true with a cancelled context")
	}
	if time.Since(start) > time.Second {
		t.Fatal("Wait did not return at once")
	}
	if Sleep(ctx, 0) {
		t.Fatal("Sleep(0) reported true with a cancelled context")
	}
}
