package edge

import (
	"github.com/corral-rt/corral/config"
	"reflect"
	"testing"
	"time"
	"unsafe"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/mono"
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
	cfg = (&Config{Edge: config.Edge{MessageRate: 10, SignalRate: -1}}).withDefaults()
	if cfg.MessageBurst != 20 || cfg.SignalRate != -1 {
		t.Fatalf("a rate without a burst: %+v", cfg)
	}
}

// TestEveryFrameKindHasARule: every ClientFrame kind the protocol defines
// has its own row in the rate-limit table, and every row's bucket has a
// default rate: a new frame kind cannot reach the core unbounded by
// accident (it fails here until it gets a row).
func TestEveryFrameKindHasARule(t *testing.T) {
	cfg := (&Config{}).withDefaults()
	l := newLimiter(bucketRules(&cfg))
	for i := range l.rules {
		if l.rules[i].rate <= 0 {
			t.Errorf("bucket %d has no default rate", i)
		}
	}
	kind := (&corralv1.ClientFrame{}).ProtoReflect().Descriptor().Oneofs().ByName("kind")
	fields := kind.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		f := &corralv1.ClientFrame{}
		m := f.ProtoReflect()
		m.Set(fd, m.NewField(fd))
		if _, ok := rules[reflect.TypeOf(f.GetKind())]; !ok {
			t.Errorf("ClientFrame.%s has no rate-limit rule (edge/limits.go) and no row in docs/SECURITY.md", fd.Name())
		}
	}
	if r := ruleOf(nil); r.bucket != bucketMisc || r.reason != refusedRateMisc {
		t.Errorf("an unknown kind: %+v", r)
	}
}

// TestPublishBudgetSurvivesReconnects: a user who spends the message
// burst and reconnects at once starts from what it left, not a new
// burst: 20 reconnects in a loop publish about one burst and the rate
// for the time spent, not 20 bursts. A user away long enough for the
// bucket to fill again starts fresh, and nothing is kept for it.
func TestPublishBudgetSurvivesReconnects(t *testing.T) {
	e := &Edge{cfg: Config{Edge: config.Edge{MessageRate: 50, MessageBurst: 100}}, users: map[string]int{}, spent: map[string]bucket{}}
	start := mono.Now()
	sent := 0
	for range 20 {
		ok, spent := e.userAdd("loop")
		if !ok {
			t.Fatal("refused")
		}
		l := newLimiter(bucketRules(&e.cfg))
		if spent.rate > 0 {
			l.setBucket(bucketMessages, spent)
		}
		for {
			if ok, _ := l.take(bucketMessages, mono.Now()); !ok {
				break
			}
			sent++
		}
		e.userDone("loop", l.bucket(bucketMessages))
	}
	elapsed := time.Duration(mono.Now() - start)
	if allowed := 100 + int(50*elapsed.Seconds()) + 1; sent > allowed {
		t.Fatalf("20 reconnects published %d in %v, want at most %d (one burst and the rate)", sent, elapsed, allowed)
	}
	// Full again: nothing kept, a fresh burst.
	b := newBucket(50, 100)
	b.take(mono.Now() - int64(3*time.Second))
	e.spent["away"] = b
	if _, spent := e.userAdd("away"); spent.rate != 0 {
		t.Fatalf("a bucket full again was carried over: %+v", spent)
	}
	if len(e.spent) != 1 { // loop's
		t.Fatalf("spent holds %d users, want 1", len(e.spent))
	}
}

// TestLimiterSmall: a connection's limiter holds only each bucket's
// tokens and last refill, not its rate and burst (the edge's rules): it
// is allocated for every connection, idle or not (issue 34 item 4).
func TestLimiterSmall(t *testing.T) {
	if n := unsafe.Sizeof(limiter{}); n > 160 {
		t.Fatalf("limiter is %d bytes, want at most 160 (8 buckets' tokens and refill times, the strikes)", n)
	}
}
