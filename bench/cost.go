package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// costSampler reads a server's CPU seconds and resident memory: from
// /proc/<pid> when the pid is known (the honest figure: nothing is asked
// of the server), otherwise from its Prometheus endpoint
// (process_cpu_seconds_total, process_resident_memory_bytes). The Go heap
// and goroutine count come from the endpoint when it answers.
type costSampler struct {
	pid     int
	metrics string
	hc      *http.Client
}

type costSample struct {
	at         time.Time
	cpu        float64 // seconds
	rss        uint64  // bytes
	heap       uint64  // bytes, metrics only
	goroutines uint64  // metrics only
	// flushFrames and flushes are corral_edge_frames_per_flush's sum and
	// count: how many frames the edge wrote and in how many writes.
	flushFrames, flushes float64
	// queued is what the server still holds for its clients:
	// corral_edge_queued_frames plus corral_core_conn_backlog_frames;
	// queuedKnown says the endpoint exposes at least the first.
	queued      float64
	queuedKnown bool
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat;
// 100 on every Linux architecture Go supports.
const clockTicks = 100

func newCostSampler(t Target) *costSampler {
	return &costSampler{
		pid:     t.PID,
		metrics: t.metricsURL(),
		hc:      &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConns: 1}},
	}
}

func (s *costSampler) source() string {
	if s.pid > 0 {
		return fmt.Sprintf("/proc/%d", s.pid)
	}
	return s.metrics
}

func (s *costSampler) sample(ctx context.Context) (costSample, error) {
	if s.pid > 0 {
		c, err := procSample(s.pid)
		if err != nil {
			return c, err
		}
		// The heap and goroutines are a bonus; the endpoint may be absent.
		if m, err := s.scrape(ctx); err == nil {
			c.heap, c.goroutines = m.heap, m.goroutines
			c.flushFrames, c.flushes = m.flushFrames, m.flushes
		}
		return c, nil
	}
	return s.scrape(ctx)
}

func procSample(pid int) (costSample, error) {
	c := costSample{at: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return c, fmt.Errorf("bench: read server cpu: %w", err)
	}
	// The command name may hold spaces; the fields after it are fixed:
	// state is field 3, utime 14 and stime 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return c, errors.New("bench: unexpected /proc/<pid>/stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return c, errors.New("bench: unexpected /proc/<pid>/stat")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return c, errors.New("bench: unexpected /proc/<pid>/stat")
	}
	c.cpu = float64(ut+st) / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return c, fmt.Errorf("bench: read server memory: %w", err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return c, fmt.Errorf("bench: parse VmRSS: %w", err)
			}
			c.rss = kb << 10
		}
	}
	return c, nil
}

func (s *costSampler) scrape(ctx context.Context) (costSample, error) {
	c := costSample{at: time.Now()}
	if s.metrics == "" {
		return c, errors.New("bench: no metrics URL")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.metrics, nil)
	if err != nil {
		return c, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return c, fmt.Errorf("bench: scrape %s: %w", s.metrics, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("bench: scrape %s: %s", s.metrics, resp.Status)
	}
	found := 0
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		switch name {
		case "process_cpu_seconds_total":
			c.cpu = v
			found++
		case "process_resident_memory_bytes":
			c.rss = uint64(v)
			found++
		case "go_memstats_heap_inuse_bytes":
			c.heap = uint64(v)
		case "go_goroutines":
			c.goroutines = uint64(v)
		case "corral_edge_frames_per_flush_sum":
			c.flushFrames = v
		case "corral_edge_frames_per_flush_count":
			c.flushes = v
		case "corral_edge_queued_frames":
			c.queued += v
			c.queuedKnown = true
		case "corral_core_conn_backlog_frames":
			c.queued += v
		}
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("bench: scrape %s: %w", s.metrics, err)
	}
	if found < 2 {
		return c, fmt.Errorf("bench: %s has no process_cpu_seconds_total or process_resident_memory_bytes", s.metrics)
	}
	return c, nil
}

// window turns two samples into the cost of the time between them.
func (s *costSampler) window(a, b costSample, peak uint64) *Cost {
	c := &Cost{
		Source:     s.source(),
		CPUSeconds: b.cpu - a.cpu,
		RSSStart:   a.rss,
		RSSEnd:     b.rss,
		RSSPeak:    max(peak, a.rss, b.rss),
		Goroutines: b.goroutines,
	}
	if d := b.at.Sub(a.at).Seconds(); d > 0 {
		c.CPUPercent = 100 * c.CPUSeconds / d
	}
	if n := b.flushes - a.flushes; n > 0 {
		c.FramesPerWrite = (b.flushFrames - a.flushFrames) / n
	}
	return c
}

// machineSample reads the CPU seconds every core of this machine spent busy
// (everything but idle and iowait), from /proc/stat: with the server's and
// the generator's own figures it shows what else ran on a shared machine.
func machineSample() (busy float64, at time.Time, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, time.Time{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, time.Time{}, errors.New("bench: unexpected /proc/stat")
	}
	var total, idle uint64
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, time.Time{}, errors.New("bench: unexpected /proc/stat")
		}
		if i >= 7 { // steal, guest and guest_nice: not this machine's work
			break
		}
		total += n
		if i == 3 || i == 4 {
			idle += n
		}
	}
	return float64(total-idle) / clockTicks, time.Now(), nil
}
