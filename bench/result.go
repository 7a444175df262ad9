package bench

import (
	"encoding/json"
	"errors"
	"io"
	"time"
)

// ErrViolation is wrapped by the error a scenario returns when the delivery
// check found a message lost, duplicated or out of order. The Result is
// still returned, complete, so that it can be written out.
var ErrViolation = errors.New("bench: delivery check failed")

// Result is everything one run measured. It marshals as the JSON record.
type Result struct {
	Scenario string    `json:"scenario"`
	Started  time.Time `json:"started"`
	// Seconds is the whole run's wall time, set-up and drain included.
	Seconds float64 `json:"seconds"`
	Target  Target  `json:"target"`
	// Params are the scenario's parameters as run (flag names and values).
	Params map[string]any `json:"params"`
	// Headline is one line that answers the scenario's question.
	Headline string `json:"headline"`
	// Steps are the measured windows: one per rate of a ramp, or one.
	Steps []Step `json:"steps"`
	// Best is the index in Steps of the highest step that met the SLO
	// (p99 within SLOMs, nothing lost, no errors), or -1.
	Best  int     `json:"best"`
	SLOMs float64 `json:"sloMs,omitempty"`
	// Latency covers every delivery (or, for connect, every connection).
	Latency   Latency  `json:"latency"`
	Histogram []Bucket `json:"histogram"`
	// Connect is set by scenarios that measure connection set-up.
	Connect *ConnectStats `json:"connect,omitempty"`
	// Acks is set by scenarios whose clients wait for Published.
	Acks     *Latency `json:"acks,omitempty"`
	Delivery Delivery `json:"delivery"`
	// Presence is set when members joined with presence (--presence).
	Presence *PresenceStats `json:"presence,omitempty"`
	// Freshness is set by cursors: how fresh the signal values were.
	Freshness *Freshness `json:"freshness,omitempty"`
	// Storm is set by storm: how the clients came back after the reset.
	// Server and Generator then cover the RST until all had come back.
	Storm *StormStats `json:"storm,omitempty"`
	// Versus is set by versus: the row of issue 19's table it measured.
	Versus *VersusStats `json:"versus,omitempty"`
	// Hooks is set when the run served its own hooks backend
	// (--hooks-listen): what corral asked it.
	Hooks *HooksStats `json:"hooks,omitempty"`
	// DocEdit is set by docedit.
	DocEdit *DocEditStats `json:"docEdit,omitempty"`
	// Outbox is set by outbox-burst.
	Outbox *OutboxStats `json:"outbox,omitempty"`
	Errors ErrorCounts  `json:"errors"`
	Server *Cost        `json:"server,omitempty"`
	// Generator is what this load generator spent in the same window: on
	// a shared machine, CPU it used is CPU the server did not get.
	Generator *Cost `json:"generator,omitempty"`
	// MachineCPU is the whole machine's busy CPU over the same window, in
	// percent of one core (200 = both cores of a 2-core machine): what
	// the server and the generator do not account for ran beside them.
	MachineCPU float64  `json:"machineCpu,omitempty"`
	Timeline   []Second `json:"timeline"`
}

// Step is one measured window at one target rate.
type Step struct {
	Name string `json:"name"`
	// Rate is the target rate in the step's unit: publishes/s (broadcast,
	// chat-burst) or connections/s (connect).
	Rate     float64 `json:"rate"`
	Unit     string  `json:"unit"`
	Seconds  float64 `json:"seconds"`
	Achieved float64 `json:"achieved"`
	// DeliveriesPerSec is messages received by members per second, for
	// messages scheduled within the step.
	DeliveriesPerSec float64     `json:"deliveriesPerSec"`
	Latency          Latency     `json:"latency"`
	Acks             *Latency    `json:"acks,omitempty"`
	Lost             uint64      `json:"lost"`
	Duplicated       uint64      `json:"duplicated"`
	Errors           ErrorCounts `json:"errors"`
	OK               bool        `json:"ok"`
}

// Latency is a distribution in milliseconds.
type Latency struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"meanMs"`
	P50   float64 `json:"p50Ms"`
	P95   float64 `json:"p95Ms"`
	P99   float64 `json:"p99Ms"`
	P999  float64 `json:"p999Ms"`
	Max   float64 `json:"maxMs"`
}

// Bucket is one histogram bucket: Count values in [LoMs, HiMs).
type Bucket struct {
	LoMs  float64 `json:"loMs"`
	HiMs  float64 `json:"hiMs"`
	Count uint64  `json:"count"`
}

// ConnectStats describes connection set-up.
type ConnectStats struct {
	Target   int     `json:"target"`
	Joined   int     `json:"joined"`
	Failed   int     `json:"failed"`
	Rate     float64 `json:"rate"`
	Achieved float64 `json:"achieved"`
	// Latency is from the start of the dial to Joined.
	Latency Latency `json:"latency"`
}

// Delivery is the outcome of the delivery check.
type Delivery struct {
	Published  uint64 `json:"published"`
	Expected   uint64 `json:"expected"`
	Received   uint64 `json:"received"`
	Lost       uint64 `json:"lost"`
	Duplicated uint64 `json:"duplicated"`
	// Late counts messages that arrived after the drain (Options.Drain)
	// ended: received, so not lost, but later than the run allowed.
	Late uint64 `json:"late"`
	// ServerQueued is what the server still held for its clients when
	// the check was made (its queue gauges), when the drain ended with
	// members behind; -1: the server does not say; 0 and no one behind:
	// not needed.
	ServerQueued float64  `json:"serverQueued"`
	Violations   []string `json:"violations,omitempty"`
}

// ErrorCounts counts failures by kind ("publish:unavailable",
// "close:4001", "ack-timeout", ...).
type ErrorCounts map[string]uint64

func (e ErrorCounts) total() uint64 {
	var n uint64
	for _, v := range e {
		n += v
	}
	return n
}

// Cost is what the server spent, sampled from /proc (with a pid) or its
// /metrics endpoint.
type Cost struct {
	Source string `json:"source"`
	// CPUSeconds and CPUPercent cover the measured window (100% = one
	// core).
	CPUSeconds float64 `json:"cpuSeconds"`
	CPUPercent float64 `json:"cpuPercent"`
	RSSStart   uint64  `json:"rssStartBytes"`
	RSSEnd     uint64  `json:"rssEndBytes"`
	RSSPeak    uint64  `json:"rssPeakBytes"`
	// PerConn is (RSSEnd - RSSStart) / connections, for connect.
	PerConn uint64 `json:"perConnBytes,omitempty"`
	// HeapPerConn is the same from the Go heap in use (metrics only).
	HeapPerConn uint64 `json:"heapPerConnBytes,omitempty"`
	Goroutines  uint64 `json:"goroutines,omitempty"`
	// FramesPerWrite is how many frames the edge wrote per WebSocket
	// write in the window (corral_edge_frames_per_flush; metrics only):
	// near 1, every delivery costs its own write system call.
	FramesPerWrite float64 `json:"framesPerWrite,omitempty"`
}

// Second is one second of the timeline, counted from the run's start.
type Second struct {
	T          int     `json:"t"`
	Conns      int64   `json:"conns"`
	Sent       uint64  `json:"sent"`
	Deliveries uint64  `json:"deliveries"`
	P99        float64 `json:"p99Ms"`
	Errors     uint64  `json:"errors"`
	// ServerCPU is the server's CPU in the second (100 = one core); RSS in
	// bytes. Zero when not sampled.
	ServerCPU float64 `json:"serverCpu,omitempty"`
	ServerRSS uint64  `json:"serverRss,omitempty"`
	// GeneratorCPU is this generator's CPU in the second.
	GeneratorCPU float64 `json:"generatorCpu,omitempty"`
	// MachineCPU is the whole machine's busy CPU in the second.
	MachineCPU float64 `json:"machineCpu,omitempty"`
}

// WriteJSON writes r as an indented JSON record.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Freshness is the cursors scenario's measure of signals: for each receiver
// and each sender key, the time from a send to the moment the receiver
// holds that value or a newer one.
type Freshness struct {
	SLOMs float64 `json:"sloMs"`
	// Sent is the signals the senders sent; Deliveries the SignalEvents
	// receivers read (their own keys excluded), DeliveriesPerSec over the
	// sending window.
	Sent             uint64  `json:"sent"`
	Deliveries       uint64  `json:"deliveries"`
	DeliveriesPerSec float64 `json:"deliveriesPerSec"`
	// Samples is one per receiver and send; Within those fresh within
	// SLOMs; Never those whose value (or a newer one) never arrived.
	Samples uint64  `json:"samples"`
	Within  uint64  `json:"within"`
	Never   uint64  `json:"never"`
	Share   float64 `json:"share"`
	Latency Latency `json:"latency"`
}

// PostHerdStats is delivery once the herd is over (issue 34): every read
// of a message published after the last member of the herd came back,
// from its publish (the payload's scheduled time) to the read.
type PostHerdStats struct {
	Latency Latency `json:"latency"`
	// Acks is the same publishes' schedule to acknowledgement (the
	// internal API's answer): as late as Latency, the time went before
	// the fan-out (the publisher's queue, the API).
	Acks Latency `json:"acks"`
	// Late counts the reads later than LateMs (250), LateMembers the
	// members that made them; Worst names the latest read: its member,
	// room, offset, lateness, and when after the herd it was published.
	LateMs      float64 `json:"lateMs"`
	Late        uint64  `json:"late"`
	LateMembers int     `json:"lateMembers,omitempty"`
	// LateBySecond counts the late reads by the whole seconds from the
	// herd's end to their message's publish ("0": within the first).
	LateBySecond map[string]int `json:"lateBySecond,omitempty"`
	Worst        string         `json:"worst,omitempty"`
}

// StormStats is how a reconnect storm's clients came back.
type StormStats struct {
	Clients int `json:"clients"`
	// Cut is the client connections reset (by the generator or its proxy).
	Cut int `json:"cut"`
	// Resumed came back with the session continued; Failed came back
	// with a new session or ended; NotBack had not come back at all
	// within the recovery timeout.
	Resumed        int     `json:"resumed"`
	Failed         int     `json:"failed"`
	NotBack        int     `json:"notBack"`
	AllBackSeconds float64 `json:"allBackSeconds"`
	// Recovery is from the RST to EventConnected{Resumed: true}.
	Recovery Latency `json:"recovery"`
	// Attempts counts clients by the dials their reconnect took.
	Attempts map[string]int `json:"attempts"`
	// Disconnects counts how the connections were seen to end.
	Disconnects map[string]int `json:"disconnects"`
	// Cause is "rst" or "drain".
	Cause string `json:"cause"`
	// PeakPerSecond is the most resumes within one second (by whole
	// seconds since the cut).
	PeakPerSecond int `json:"peakPerSecond"`
	// Schedule is the clients' reconnect schedule: "w1" or "sdk".
	Schedule string `json:"schedule"`
	// FirstFailures counts, with --rejoin, the first reconnect dials that
	// failed, by kind (connect:refused, join:timeout, ...).
	FirstFailures map[string]int `json:"firstFailures,omitempty"`
}
