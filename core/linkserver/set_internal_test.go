package linkserver

import (
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func testSet() (*set, prometheus.Gauge) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "links"})
	return newSet(g), g
}

func TestLinkSetAddRemoveClose(t *testing.T) {
	ls, g := testSet()
	a, b := &Link{}, &Link{}
	if !ls.add(a) || !ls.add(b) {
		t.Fatal("add refused before close")
	}
	n := 0
	ls.each(func(*Link) { n++ })
	if n != 2 || value(t, g) != 2 {
		t.Fatalf("each saw %d links, gauge %v; want 2, 2", n, value(t, g))
	}
	ls.remove(a)
	ls.remove(a) // twice: ignored
	if value(t, g) != 1 || len(ls.all()) != 1 {
		t.Fatalf("after remove: gauge %v, %d links; want 1, 1", value(t, g), len(ls.all()))
	}
	links, first := ls.close()
	if !first || len(links) != 1 || links[0] != b {
		t.Fatalf("close: %v %v, want [b] true", links, first)
	}
	if links, first := ls.close(); first || links != nil {
		t.Fatal("a second close returned links again")
	}
	if ls.add(&Link{}) {
		t.Fatal("a link was added after close")
	}
	ls.remove(b)
	if value(t, g) != 0 {
		t.Fatalf("gauge %v after the last remove, want 0", value(t, g))
	}
}

// TestLinkSetCloseRace adds links while the set closes: every link add
// accepted is among those close returns (the core ends it), and none is
// accepted after.
func TestLinkSetCloseRace(t *testing.T) {
	for range 50 {
		ls, _ := testSet()
		var mu sync.Mutex
		accepted := make(map[*Link]bool)
		var closed []*Link
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 20 {
					l := &Link{}
					if ls.add(l) {
						mu.Lock()
						accepted[l] = true
						mu.Unlock()
					}
				}
			})
		}
		wg.Go(func() { closed, _ = ls.close() })
		wg.Wait()
		if len(closed) != len(accepted) {
			t.Fatalf("close returned %d links, %d were accepted", len(closed), len(accepted))
		}
		for _, l := range closed {
			if !accepted[l] {
				t.Fatal("close returned a link add refused")
			}
		}
	}
}

// value reads a counter's or a gauge's value.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue() + d.GetGauge().GetValue()
}
