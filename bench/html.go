package bench

import (
	"fmt"
	"html"
	"html/template"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
)

// WriteHTML writes a self-contained page (inline SVG, no external assets)
// with the summary, the latency histogram and the per-second timeline.
func (r *Result) WriteHTML(w io.Writer) error {
	xs := make([]float64, len(r.Timeline))
	conns := make([]float64, len(r.Timeline))
	deliv := make([]float64, len(r.Timeline))
	sent := make([]float64, len(r.Timeline))
	p99 := make([]float64, len(r.Timeline))
	cpu := make([]float64, len(r.Timeline))
	gcpu := make([]float64, len(r.Timeline))
	mcpu := make([]float64, len(r.Timeline))
	rss := make([]float64, len(r.Timeline))
	var haveCPU bool
	for i, s := range r.Timeline {
		xs[i] = float64(s.T)
		conns[i] = float64(s.Conns)
		deliv[i] = float64(s.Deliveries)
		sent[i] = float64(s.Sent)
		p99[i] = s.P99
		cpu[i] = s.ServerCPU
		gcpu[i] = s.GeneratorCPU
		mcpu[i] = s.MachineCPU
		rss[i] = float64(s.ServerRSS) / (1 << 20)
		haveCPU = haveCPU || s.ServerRSS > 0
	}
	charts := []template.HTML{
		lineChart("Connections", xs, "", series{"open", "#2563eb", conns}),
		lineChart("Per second", xs, "", series{"deliveries", "#16a34a", deliv}, series{"sent (publishes or dials)", "#9333ea", sent}),
		lineChart("p99 latency of the second's deliveries (ms)", xs, "ms", series{"p99", "#dc2626", p99}),
	}
	if haveCPU {
		charts = append(charts,
			lineChart("CPU (% of one core)", xs, "%", series{"server", "#ea580c", cpu}, series{"generator", "#6b7280", gcpu}, series{"whole machine", "#d1d5db", mcpu}),
			lineChart("Server RSS (MiB)", xs, "MiB", series{"rss", "#0891b2", rss}))
	}
	histTitle := "Delivery latency"
	if r.Scenario == "connect" {
		histTitle = "Connect-to-joined latency"
	}
	var errs []string
	for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
		errs = append(errs, fmt.Sprintf("%s: %d", k, r.Errors[k]))
	}
	var text strings.Builder
	_ = r.WriteText(&text)
	return pageTmpl.Execute(w, map[string]any{
		"R":         r,
		"Hist":      histogramChart(histTitle, r.Histogram, r.Latency, r.SLOMs),
		"Charts":    charts,
		"Errors":    errs,
		"Text":      text.String(),
		"Violation": len(r.Delivery.Violations) > 0,
	})
}

type series struct {
	name  string
	color string
	ys    []float64
}

const chartW, chartH, padL, padR, padT, padB = 920.0, 190.0, 64.0, 16.0, 28.0, 28.0

// lineChart draws series over xs as an SVG.
func lineChart(title string, xs []float64, unit string, ss ...series) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %g %g" width="%g" height="%g" role="img"><title>%s</title>`,
		chartW, chartH, chartW, chartH, html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="%g" y="16" class="t">%s</text>`, padL, html.EscapeString(title))
	if len(xs) == 0 {
		b.WriteString(`<text x="64" y="90">no data</text></svg>`)
		return template.HTML(b.String())
	}
	xmax := max(xs[len(xs)-1], 1)
	ymax := 0.0
	for _, s := range ss {
		for _, y := range s.ys {
			ymax = max(ymax, y)
		}
	}
	ymax = niceCeil(ymax)
	px := func(x float64) float64 { return padL + (chartW-padL-padR)*x/xmax }
	py := func(y float64) float64 { return chartH - padB - (chartH-padT-padB)*y/ymax }
	axes(&b, px, py, xmax, ymax, unit)
	for i, s := range ss {
		var pts strings.Builder
		for j, y := range s.ys {
			fmt.Fprintf(&pts, "%.1f,%.1f ", px(xs[j]), py(y))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`, s.color, pts.String())
		fmt.Fprintf(&b, `<rect x="%g" y="%g" width="10" height="3" fill="%s"/><text x="%g" y="%g" class="l">%s</text>`,
			chartW-padR-260, 8+float64(i)*12, s.color, chartW-padR-245, 12+float64(i)*12, html.EscapeString(s.name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func axes(b *strings.Builder, px, py func(float64) float64, xmax, ymax float64, unit string) {
	fmt.Fprintf(b, `<line x1="%g" y1="%g" x2="%g" y2="%g" class="ax"/>`, padL, chartH-padB, chartW-padR, chartH-padB)
	fmt.Fprintf(b, `<line x1="%g" y1="%g" x2="%g" y2="%g" class="ax"/>`, padL, padT, padL, chartH-padB)
	for i := 0; i <= 4; i++ {
		y := ymax * float64(i) / 4
		fmt.Fprintf(b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" class="grid"/><text x="%g" y="%.1f" class="yl">%s</text>`,
			padL, py(y), chartW-padR, py(y), padL-6, py(y)+4, short(y))
	}
	step := niceCeil(xmax / 10)
	for x := 0.0; x <= xmax; x += step {
		fmt.Fprintf(b, `<text x="%.1f" y="%g" class="xl">%gs</text>`, px(x), chartH-padB+16, x)
	}
}

// histogramChart draws latency buckets on a log time axis, with the
// percentiles and the SLO marked.
func histogramChart(title string, bs []Bucket, l Latency, slo float64) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %g %g" width="%g" height="%g" role="img"><title>%s</title>`,
		chartW, chartH+40, chartW, chartH+40, html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="%g" y="16" class="t">%s (log time axis; count per bucket)</text>`, padL, html.EscapeString(title))
	if len(bs) == 0 {
		b.WriteString(`<text x="64" y="90">no data</text></svg>`)
		return template.HTML(b.String())
	}
	lo := math.Max(bs[0].LoMs, 0.001)
	hi := math.Max(bs[len(bs)-1].HiMs, slo*1.2)
	llo, lhi := math.Log10(lo), math.Log10(hi)
	if lhi-llo < 1 {
		lhi = llo + 1
	}
	var cmax uint64
	for _, x := range bs {
		cmax = max(cmax, x.Count)
	}
	h := chartH + 40
	px := func(v float64) float64 {
		return padL + (chartW-padL-padR)*(math.Log10(math.Max(v, lo))-llo)/(lhi-llo)
	}
	py := func(c float64) float64 { return h - padB - (h-padT-padB)*c/float64(cmax) }
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" class="ax"/>`, padL, h-padB, chartW-padR, h-padB)
	for e := math.Floor(llo); e <= math.Ceil(lhi); e++ {
		v := math.Pow(10, e)
		if v < lo || v > hi {
			continue
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" class="grid"/><text x="%.1f" y="%g" class="xl">%s ms</text>`,
			px(v), padT, px(v), h-padB, px(v), h-padB+16, short(v))
	}
	for _, x := range bs {
		x0, x1 := px(math.Max(x.LoMs, lo)), px(x.HiMs)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.2f" height="%.1f" fill="#2563eb"><title>%.3f-%.3f ms: %d</title></rect>`,
			x0, py(float64(x.Count)), math.Max(x1-x0, 0.8), h-padB-py(float64(x.Count)), x.LoMs, x.HiMs, x.Count)
	}
	mark := func(v float64, name, color string, row int) {
		if v <= 0 {
			return
		}
		x, anchor := px(v)+3, "start"
		if x > chartW-120 {
			x, anchor = px(v)-3, "end" // keep the label inside the chart
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="%s" stroke-dasharray="4 3"/><text x="%.1f" y="%d" fill="%s" text-anchor="%s" class="l">%s %s ms</text>`,
			px(v), padT, px(v), h-padB, color, x, 40+row*12, color, anchor, name, short(v))
	}
	mark(l.P50, "p50", "#16a34a", 0)
	mark(l.P95, "p95", "#ea580c", 1)
	mark(l.P99, "p99", "#dc2626", 2)
	mark(slo, "SLO", "#111827", 3)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func short(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", math.Round(v/1e4)/100)
	case v >= 1e4:
		return fmt.Sprintf("%gk", math.Round(v/100)/10)
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>corral bench: {{.R.Scenario}}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:960px;color:#111827}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 8px}
.head{font-size:16px;padding:10px 12px;border-radius:6px;background:#ecfdf5;border:1px solid #a7f3d0}
.bad{background:#fef2f2;border-color:#fecaca}
table{border-collapse:collapse;font-variant-numeric:tabular-nums} td,th{padding:3px 8px;border-bottom:1px solid #e5e7eb;text-align:right} th{background:#f9fafb}
td:first-child,th:first-child{text-align:left}
svg{display:block;margin:8px 0;background:#fff}
svg .t{font-weight:600;font-size:13px} svg .l{font-size:11px} svg .ax{stroke:#6b7280} svg .grid{stroke:#e5e7eb}
svg .yl{font-size:10px;text-anchor:end;fill:#6b7280} svg .xl{font-size:10px;text-anchor:middle;fill:#6b7280}
pre{background:#f9fafb;padding:10px;overflow:auto;font-size:12px}
</style></head><body>
<h1>corral bench: {{.R.Scenario}}</h1>
<div>{{.R.Target.WS}} · {{.R.Started.Format "2006-01-02 15:04:05 MST"}} · {{printf "%.0f" .R.Seconds}} s</div>
<h2>Result</h2>
<div class="head{{if .Violation}} bad{{end}}">{{.R.Headline}}{{if .Violation}}<br><b>Delivery check failed:</b> {{len .R.Delivery.Violations}} violations{{end}}</div>
<h2>Steps</h2>
<table><tr><th>step</th><th>achieved</th><th>deliveries/s</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>max ms</th><th>lost</th><th>dup</th><th>ok</th></tr>
{{range $i, $s := .R.Steps}}<tr><td>{{$s.Name}}{{if eq $i $.R.Best}} ★{{end}}</td><td>{{printf "%.1f" $s.Achieved}}</td><td>{{printf "%.0f" $s.DeliveriesPerSec}}</td><td>{{printf "%.1f" $s.Latency.P50}}</td><td>{{printf "%.1f" $s.Latency.P95}}</td><td>{{printf "%.1f" $s.Latency.P99}}</td><td>{{printf "%.1f" $s.Latency.Max}}</td><td>{{$s.Lost}}</td><td>{{$s.Duplicated}}</td><td>{{if $s.OK}}yes{{else}}no{{end}}</td></tr>
{{end}}</table>
<h2>Latency</h2>
{{.Hist}}
<h2>Timeline</h2>
{{range .Charts}}{{.}}{{end}}
{{if .Errors}}<h2>Errors by kind</h2><ul>{{range .Errors}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .R.Delivery.Violations}}<h2>Delivery violations</h2><ul>{{range .R.Delivery.Violations}}<li>{{.}}</li>{{end}}</ul>{{end}}
<h2>Summary</h2>
<pre>{{.Text}}</pre>
</body></html>
`))
