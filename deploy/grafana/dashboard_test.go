// Package grafana_test keeps deploy/grafana/corral.json true: every metric
// its queries name must be exported by a running corral, so a renamed or
// removed metric fails here instead of leaving an empty panel.
package grafana_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/config"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/pgtest"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/server"
)

// TestDashboardMetricsExported starts corral in split mode (a core and an
// edge over h2c, in this process; the core with an outbox on a private
// Postgres), drives every kind of event the dashboard shows (connections,
// a publish read back, a resume, refusals, a slow consumer), scrapes both /metrics and checks each metric name the
// dashboard queries is among the exported series.
func TestDashboardMetricsExported(t *testing.T) {
	names := dashboardMetrics(t, "corral.json")
	if len(names) < 20 {
		t.Fatalf("found %d metric names in the dashboard, want at least 20: %v", len(names), names)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	core, err := server.Start(server.Options{
		Mode: server.CoreOnly, Node: config.Node{Addr: "127.0.0.1:0", HistoryMaxLen: 16, RedisURL: "redis://" + redistest.Start(t), RedisPrefix: redistest.Prefix(t), OutboxURL: pgtest.Start(t).URL}, APIInsecure: true,
		Logger: logger,
		// On Redis, so that the Redis store metrics are exported too.

		// With an outbox, so that the relay's metrics are exported too.

	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { core.Close(context.Background()) })
	opts := server.Options{
		Mode: server.EdgeOnly, Node: config.Node{Addr: "127.0.0.1:0", CoreURL: "http://" + core.Addr()},
		Auth: auth.Dev{}, Logger: logger,
	}
	// A small send queue and no publish limit, so that a client that stops
	// reading becomes a slow consumer after a few hundred KiB.
	opts.Edge.QueueFrames, opts.Edge.QueueBytes = 16, 64<<10
	opts.Edge.MessageRate = -1
	edge, err := server.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { edge.Close(context.Background()) })
	url := "ws://" + edge.Addr() + "/ws"

	// Connect, join, publish, read back.
	pub, err := client.Dial(ctx, url, client.Options{Token: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.CloseNow()
	go func() { // the publisher reads its own messages; let them go
		for range pub.Frames() {
		}
	}()
	if _, err := pub.Join(ctx, "dash", 0, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Publish(ctx, "dash", "m0", []byte(`{"n":0}`)); err != nil {
		t.Fatal(err)
	}
	// A core refusal: publishing to a room not joined.
	if _, err := pub.Publish(ctx, "elsewhere", "x", []byte(`{}`)); err == nil {
		t.Fatal("a publish to a room not joined was accepted")
	}

	// A resume: drop a connection, resume its session.
	first, err := client.Dial(ctx, url, client.Options{Token: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Join(ctx, "dash", 0, ""); err != nil {
		t.Fatal(err)
	}
	w := first.Welcome()
	first.CloseNow()
	var resumed *client.Conn
	for i := 0; resumed == nil; i++ { // the core may not have seen the drop yet
		c, err := client.Dial(ctx, url, client.Options{Token: "bob", Resume: &corralv1.Resume{
			SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken(),
		}})
		if err == nil && c.Welcome().GetResumed() {
			resumed = c
			break
		}
		if c != nil {
			c.CloseNow()
		}
		if i == 50 || ctx.Err() != nil {
			t.Fatalf("no resume after %d tries: %v", i+1, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resumed.CloseNow()

	// An edge refusal: a frame past the read limit (close 4413).
	big, err := client.Dial(ctx, url, client.Options{Token: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	big.SendRaw(ctx, make([]byte, 65<<10))
	select {
	case <-big.Done():
	case <-ctx.Done():
		t.Fatal("an oversized frame did not close the connection")
	}

	// A slow consumer: a member that never reads while 60 KiB messages
	// arrive. Its socket buffers fill, then its send queue.
	stopReading := make(chan struct{})
	slow, err := client.Dial(ctx, url, client.Options{Token: "dave", FrameBuffer: 1, OnFrame: func(*corralv1.ServerFrame) {
		<-stopReading // stop reading at the first frame after the join
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.CloseNow()
	defer close(stopReading)
	if err := slow.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: "dash"}}}); err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"pad":"` + strings.Repeat("x", 60<<10) + `"}`)
	for i := 1; ; i++ {
		if _, err := pub.Publish(ctx, "dash", fmt.Sprintf("p%d", i), payload); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if i%20 == 0 && strings.Contains(scrape(t, ctx, edge.Addr()), "corral_edge_slow_consumers_total{") {
			break
		}
		if i == 2000 {
			t.Fatal("no slow consumer after 2000 publishes of 60 KiB")
		}
	}

	exported := series(scrape(t, ctx, edge.Addr()) + scrape(t, ctx, core.Addr()))
	var missing []string
	for _, n := range names {
		if !exported[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		t.Errorf("the dashboard queries metrics a running corral does not export: %v", missing)
	}
}

// TestDashboardMetricNames checks the query parser this test relies on.
func TestDashboardMetricNames(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`sum by (instance) (corral_edge_connections{instance=~"$edge"})`, "corral_edge_connections"},
		{`histogram_quantile(0.99, sum by (le, op) (rate(corral_core_store_seconds_bucket{instance=~"$core"}[$__rate_interval])))`, "corral_core_store_seconds_bucket"},
		{`sum(rate(a_total[5m])) / sum(rate(b_count{x="y z"}[1m] offset 5m))`, "a_total b_count"},
		{`label_values(corral_core_links, instance)`, "corral_core_links"},
		{`rate(x[1m]) * on (instance) group_left (version) build_info`, "build_info x"},
	} {
		got := strings.Join(metricNames(tc.expr), " ")
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// dashboardMetrics returns the sorted metric names of every panel query and
// template variable query in the dashboard file.
func dashboardMetrics(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Type    string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Type  string
				Query json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("template variable query: %v", err)
		}
		exprs = append(exprs, q.Query)
	}
	seen := map[string]bool{}
	for _, e := range exprs {
		for _, n := range metricNames(e) {
			seen[n] = true
		}
	}
	var names []string
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

var (
	strLit   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	grafVar  = regexp.MustCompile(`\$\{[^}]*\}|\$\w+`)
	matchers = regexp.MustCompile(`\{[^}]*\}`)
	ranges   = regexp.MustCompile(`\[[^\]]*\]`)
	numbers  = regexp.MustCompile(`\b\d[\w.]*`) // 0.99, 5m (after offset)
	labelsOp = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	ident    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	// In label_values(metric, label) the second argument is a label.
	labelValues = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,[^)]*\)`)
	keywords    = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
		"group_right": true, "offset": true, "bool": true, "and": true, "or": true, "unless": true, "inf": true, "nan": true}
)

// metricNames returns the sorted metric names a PromQL expression reads:
// identifiers outside label matchers, ranges, strings and label lists that
// are not functions or keywords.
func metricNames(expr string) []string {
	e := labelValues.ReplaceAllString(expr, "$1")
	e = strLit.ReplaceAllString(e, `""`)
	e = grafVar.ReplaceAllString(e, "")
	e = matchers.ReplaceAllString(e, " ")
	e = ranges.ReplaceAllString(e, " ")
	e = labelsOp.ReplaceAllString(e, " ")
	e = numbers.ReplaceAllString(e, " ")
	seen := map[string]bool{}
	for _, m := range ident.FindAllString(e, -1) {
		if strings.HasSuffix(m, "(") || keywords[strings.ToLower(m)] {
			continue
		}
		seen[m] = true
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func scrape(t *testing.T, ctx context.Context, addr string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %v", addr, resp.StatusCode, err)
	}
	return string(b)
}

// series returns the names of the samples in a Prometheus text exposition
// (histograms as their _bucket, _sum and _count series).
func series(text string) map[string]bool {
	out := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			out[line[:i]] = true
		}
	}
	return out
}
