package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// WriteText writes the summary table a terminal shows after a run.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s against %s  (%s, %.0fs)\n", r.Scenario, r.Target.WS, r.Started.Format("2006-01-02 15:04:05"), r.Seconds)
	keys := slices.Sorted(maps.Keys(r.Params))
	var ps []string
	for _, k := range keys {
		if v := fmt.Sprint(r.Params[k]); v != "" {
			ps = append(ps, "--"+k+"="+v)
		}
	}
	fmt.Fprintf(&b, "  %s\n\n", strings.Join(ps, " "))

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\ttarget\tachieved\tdeliveries/s\tp50 ms\tp95 ms\tp99 ms\tmax ms\tack p99 ms\tlost\tdup\terrors\tok\t")
	for i, s := range r.Steps {
		ack := "-"
		if s.Acks != nil {
			ack = fmt.Sprintf("%.1f", s.Acks.P99)
		}
		ok := "no"
		if s.OK {
			ok = "yes"
		}
		if i == r.Best {
			ok += " *"
		}
		fmt.Fprintf(tw, "%s\t%g\t%.1f\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%d\t%d\t%d\t%s\t\n",
			s.Name, s.Rate, s.Achieved, s.DeliveriesPerSec, s.Latency.P50, s.Latency.P95, s.Latency.P99,
			s.Latency.Max, ack, s.Lost, s.Duplicated, s.Errors.total(), ok)
	}
	tw.Flush()
	switch {
	case r.Scenario == "connect":
		fmt.Fprintf(&b, "  (* passed: p95 connect-to-joined <= %g ms, no failed connection)\n", r.SLOMs)
	case r.SLOMs > 0:
		fmt.Fprintf(&b, "  (* the highest step that passed: p99 <= %g ms, nothing lost, no errors)\n", r.SLOMs)
	}

	b.WriteString("\n")
	lat := func(name string, l Latency) {
		fmt.Fprintf(&b, "  %-22s n=%d  p50 %.1f  p95 %.1f  p99 %.1f  p99.9 %.1f  max %.1f ms\n",
			name, l.Count, l.P50, l.P95, l.P99, l.P999, l.Max)
	}
	if c := r.Connect; c != nil {
		fmt.Fprintf(&b, "  connections            %d of %d joined, %d failed", c.Joined, c.Target, c.Failed)
		if c.Achieved > 0 {
			fmt.Fprintf(&b, ", %.0f/s (target %g/s)", c.Achieved, c.Rate)
		}
		b.WriteString("\n")
		lat("connect-to-joined", c.Latency)
	}
	if r.Scenario != "connect" {
		lat("delivery latency", r.Latency)
	}
	if r.Acks != nil {
		lat("publish acks", *r.Acks)
	}
	if sm := r.Storm; sm != nil {
		fmt.Fprintf(&b, "  storm                  %d clients, %d connections ended (%s): %d resumed, %d failed, %d not back; all back in %.2f s, peak %d resumes/s\n",
			sm.Clients, sm.Cut, sm.Cause, sm.Resumed, sm.Failed, sm.NotBack, sm.AllBackSeconds, sm.PeakPerSecond)
		lat("cut to resumed", sm.Recovery)
		b.WriteString("  dials per reconnect   ")
		for _, k := range sortedKeys(sm.Attempts) {
			fmt.Fprintf(&b, " %s: %d", k, sm.Attempts[k])
		}
		b.WriteString("\n  disconnects seen      ")
		for _, k := range sortedKeys(sm.Disconnects) {
			fmt.Fprintf(&b, " %s: %d", k, sm.Disconnects[k])
		}
		b.WriteString("\n")
	}
	if h := r.Hooks; h != nil {
		b.WriteString(h.text())
	}
	if fr := r.Freshness; fr != nil {
		fmt.Fprintf(&b, "  signals                %d sent, %d delivered (%.0f/s), %d samples, %.3f%% within %g ms, %d never fresh\n",
			fr.Sent, fr.Deliveries, fr.DeliveriesPerSec, fr.Samples, 100*fr.Share, fr.SLOMs, fr.Never)
		lat("signal freshness", fr.Latency)
	}
	if p := r.Presence; p != nil {
		fmt.Fprintf(&b, "  presence               %d members: %.1f frames (max %d), %.0f bytes (max %d) per member\n",
			p.Members, p.FramesPerMember, p.MaxFramesPerMember, p.BytesPerMember, p.MaxBytesPerMember)
	}
	d := r.Delivery
	fmt.Fprintf(&b, "  delivery check         %d published, %d expected, %d received, %d late (after the drain), %d lost, %d duplicated",
		d.Published, d.Expected, d.Received, d.Late, d.Lost, d.Duplicated)
	if d.Late > 0 || d.ServerQueued != 0 {
		if d.ServerQueued < 0 {
			fmt.Fprintf(&b, "; the server does not expose its queues")
		} else {
			fmt.Fprintf(&b, "; %.0f frames still queued in the server when judged", d.ServerQueued)
		}
	}
	if len(d.Violations) == 0 {
		b.WriteString(": OK\n")
	} else {
		fmt.Fprintf(&b, ": %d VIOLATIONS\n", len(d.Violations))
		for i, v := range d.Violations {
			if i == 10 {
				fmt.Fprintf(&b, "    ... and %d more\n", len(d.Violations)-10)
				break
			}
			fmt.Fprintf(&b, "    %s\n", v)
		}
	}
	if len(r.Errors) > 0 {
		b.WriteString("  errors                ")
		for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
			fmt.Fprintf(&b, " %s=%d", k, r.Errors[k])
		}
		b.WriteString("\n")
	}
	if s := r.Server; s != nil {
		fmt.Fprintf(&b, "  server (%s)  cpu %.1fs = %.0f%% of a core; rss %s -> %s (peak %s)",
			s.Source, s.CPUSeconds, s.CPUPercent, mib(s.RSSStart), mib(s.RSSEnd), mib(s.RSSPeak))
		if s.PerConn > 0 {
			fmt.Fprintf(&b, "; %.1f KiB per connection", float64(s.PerConn)/1024)
		}
		if s.HeapPerConn > 0 {
			fmt.Fprintf(&b, " (Go heap %.1f KiB)", float64(s.HeapPerConn)/1024)
		}
		if s.FramesPerWrite > 0 {
			fmt.Fprintf(&b, "; %.2f frames per write", s.FramesPerWrite)
		}
		b.WriteString("\n")
	}
	if g := r.Generator; g != nil {
		fmt.Fprintf(&b, "  generator (this process)  cpu %.1fs = %.0f%% of a core; rss %s\n", g.CPUSeconds, g.CPUPercent, mib(g.RSSEnd))
	}
	if r.MachineCPU > 0 {
		fmt.Fprintf(&b, "  machine                busy %.0f%% of a core", r.MachineCPU)
		if r.Server != nil && r.Generator != nil {
			fmt.Fprintf(&b, " (other processes: %.0f%%)", max(r.MachineCPU-r.Server.CPUPercent-r.Generator.CPUPercent, 0))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n  %s\n", r.Headline)
	_, err := io.WriteString(w, b.String())
	return err
}
