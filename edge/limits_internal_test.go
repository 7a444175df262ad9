package edge

import (
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	const sec = int64(time.Second)
	tests := map[string]struct {
		rate  float64
		burst int
		at    []int64 // times of takes, nanoseconds
		want  []bool
	}{
		"unlimited":        {0, 0, []int64{0, 0, 0}, []bool{true, true, true}},
		"burst then empty": {1, 3, []int64{1, 1, 1, 1}, []bool{true, true, true, false}},
		"refills at rate":  {2, 1, []int64{1, 1, 1 + sec/4, 1 + sec/2}, []bool{true, false, false, true}},
		"refill is capped": {10, 2, []int64{1, 1, 1 + 10*sec, 1 + 10*sec, 1 + 10*sec}, []bool{true, true, true, true, false}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			b := newBucket(tt.rate, tt.burst)
			for i, at := range tt.at {
				ok, wait := b.take(at)
				if ok != tt.want[i] {
					t.Fatalf("take %d at %v: %v, want %v", i, time.Duration(at), ok, tt.want[i])
				}
				if !ok && wait <= 0 {
					t.Fatalf("take %d refused without a wait", i)
				}
			}
		})
	}
}

func TestBucketDefaults(t *testing.T) {
	cfg := (&Config{}).withDefaults()
	if cfg.MessageRate != 50 || cfg.MessageBurst != 100 || cfg.SignalRate != 100 || cfg.SignalBurst != 200 {
		t.Fatalf("defaults: %+v", cfg)
	}
	cfg = (&Config{MessageRate: 10, SignalRate: -1}).withDefaults()
	if cfg.MessageBurst != 20 || cfg.SignalRate != -1 {
		t.Fatalf("a rate without a burst: %+v", cfg)
	}
}
