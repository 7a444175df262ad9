package tracing

import (
	"bytes"
	"context"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"log/slog"

	"github.com/corral-rt/corral/internal/eventually"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestExporters(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    []string
		wantErr string
	}{
		{"nothing set: off", nil, nil, ""},
		{"endpoint: otlp", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, []string{"otlp"}, ""},
		{"traces endpoint: otlp", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, []string{"otlp"}, ""},
		{"SDK disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_SDK_DISABLED": "true"}, nil, ""},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_TRACES_EXPORTER": "none"}, nil, ""},
		{"exporter otlp, default endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, []string{"otlp"}, ""},
		{"console", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, []string{"console"}, ""},
		{"both", map[string]string{"OTEL_TRACES_EXPORTER": "otlp, console"}, []string{"otlp", "console"}, ""},
		{"unknown exporter: an error, not off", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_TRACES_EXPORTER": "zipkin"}, nil, `OTEL_TRACES_EXPORTER="zipkin"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := exporters(envOf(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("exporters = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestSamplerFromEnv(t *testing.T) {
	for _, tc := range []struct {
		sampler, arg, want string // want: the sampler's description, or an error's text
	}{
		{"", "", "ParentBased{root:TraceIDRatioBased{0.01}"},
		{"always_on", "", "AlwaysOnSampler"},
		{"parentbased_always_off", "", "ParentBased{root:AlwaysOffSampler"},
		{"traceidratio", "0.25", "TraceIDRatioBased{0.25}"},
		{"parentbased_traceidratio", "", "ParentBased{root:TraceIDRatioBased{1}"},
		{"traceidratio", "2", "OTEL_TRACES_SAMPLER_ARG"},
		{"jaeger_remote", "", `OTEL_TRACES_SAMPLER="jaeger_remote"`},
	} {
		s, err := samplerFromEnv(envOf(map[string]string{"OTEL_TRACES_SAMPLER": tc.sampler, "OTEL_TRACES_SAMPLER_ARG": tc.arg}))
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = s.Description()
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s %s: %q, want %q in it", tc.sampler, tc.arg, got, tc.want)
		}
	}
}

func TestProtocolRefused(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	_, err := Setup(context.Background(), "test", slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Fatalf("Setup with http/json: %v, want an error naming the variable", err)
	}
	if Enabled() {
		t.Fatal("tracing on after a refused Setup")
	}
}

// TestConsoleExporter: OTEL_TRACES_EXPORTER=console turns tracing on and
// writes the spans out (it used to leave tracing off without a word).
func TestConsoleExporter(t *testing.T) {
	var out bytes.Buffer
	consoleOut = &out
	t.Cleanup(func() { consoleOut = os.Stdout })
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	shutdown, err := Setup(context.Background(), "test", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if !Enabled() {
		t.Fatal("console exporter: tracing is off")
	}
	_, span := Start(context.Background(), SpanPublish, "lobby", 0)
	End(span, nil)
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), string(SpanPublish)) {
		t.Fatalf("console exporter wrote %q, want the %s span", out.String(), SpanPublish)
	}
}

// syncBuffer is a log destination the exporter's goroutine and the test
// share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestExportErrorsLogged: over either protocol, a collector that refuses
// the connection shows in the structured log as a warning, with the
// protocol the environment asked for (OTEL_EXPORTER_OTLP_PROTOCOL=grpc
// used to be ignored: the exporter was always OTLP/HTTP).
func TestExportErrorsLogged(t *testing.T) {
	for _, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			// A port that refuses: listen, note it, close.
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
			t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "300")
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
			t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
			var logs syncBuffer
			shutdown, err := Setup(context.Background(), "test", slog.New(slog.NewJSONHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer shutdown(context.Background())
			if !strings.Contains(logs.String(), `"protocol":"`+proto+`"`) {
				t.Errorf("start log %s does not name protocol %s", logs.String(), proto)
			}
			_, span := Start(context.Background(), SpanPublish, "lobby", 0)
			End(span, nil)
			if !eventually.Within(20*time.Second, func() bool {
				return strings.Contains(logs.String(), `"msg":"tracing: export failed"`)
			}) {
				t.Fatalf("no export error in the log: %s", logs.String())
			}
		})
	}
}
