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

func TestWanted(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing set: off", nil, false},
		{"endpoint: on", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{"traces endpoint: on", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{"SDK disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_SDK_DISABLED": "true"}, false},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_TRACES_EXPORTER": "none"}, false},
		{"exporter otlp", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"exporter otlp, default endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"another exporter", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_TRACES_EXPORTER": "zipkin"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := wanted(func(k string) string { return tc.env[k] }); got != tc.want {
				t.Errorf("wanted = %v, want %v", got, tc.want)
			}
		})
	}
}
