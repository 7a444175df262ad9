package tracing

import (
	"context"
	"errors"
	"testing"
)

// TestOffCostsNothing: with tracing off, the publish hooks allocate
// nothing (they run per message).
func TestOffCostsNothing(t *testing.T) {
	Enable(nil)
	ctx := context.Background()
	err := errors.New("x")
	allocs := testing.AllocsPerRun(100, func() {
		c, span := Start(ctx, SpanPublish, "lobby", 0)
		_, child := Start(c, SpanFanout, "lobby", 7)
		SetSeq(span, 7)
		End(child, nil)
		End(span, err)
		edge, tp := StartCarried(SpanEdgePublish, "lobby")
		_ = Continue(ctx, tp)
		_ = Continue(ctx, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		End(edge, nil)
		if tp != "" {
			t.Fatalf("traceparent %q with tracing off", tp)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per publish with tracing off, want 0", allocs)
	}
}
