package integration_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/config"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/faultproxy"
	"github.com/corral-rt/corral/internal/readytest"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/internal/retry"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// TestCoreLostAnswersInFlight: in split mode, publishes the core took (one
// being stored, its Redis slowed down, the rest waiting behind it) when the edge's link to it is
// cut are each answered 4103 by the edge at once, exactly once, not left
// to the SDK's resend timeout; a publish the core answered before the cut
// gets no second answer.
func TestCoreLostAnswersInFlight(t *testing.T) {
	tox, err := faultproxy.StartToxic(redistest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tox.Close)
	coreOpts := server.Options{Mode: server.CoreOnly, Node: config.Node{Addr: "127.0.0.1:0", RedisURL: "redis://" + tox.Addr(), RedisPrefix: redistest.Prefix(t)}, Logger: quietLogger(), APIInsecure: true}
	core := startNode(t, coreOpts)
	link, err := faultproxy.Start(core.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	edgeOpts := server.Options{Mode: server.EdgeOnly, Node: config.Node{Addr: "127.0.0.1:0", CoreURL: "http://" + link.Addr()}, Auth: auth.Dev{}, Logger: quietLogger()}
	edge := startNode(t, edgeOpts)
	readytest.Wait(t, "http://"+edge.Addr()+"/readyz")
	c := dial(t, &deployment{wsURL: "ws://" + edge.Addr() + "/ws"}, "pub", protocol.JSON)
	ctx := testCtx(t)
	const room = "lost"
	if _, err := c.Join(ctx, room, 0, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, room, "before", []byte(`1`)); err != nil {
		t.Fatal(err)
	}

	// The core's store slows down: what it takes now stays in flight.
	if err := tox.Add("slow", "latency", "downstream", map[string]any{"latency": 1500}); err != nil {
		t.Fatal(err)
	}
	const inFlight = 5
	for i := range inFlight {
		f := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: room, Id: fmt.Sprint("p", i), Payload: []byte(`1`)}}}
		if err := c.Send(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	eventually.True(t, 10*time.Second, func() bool {
		// One connection's frames run in order: the first is being
		// stored, the others wait behind it at the core.
		return metricAtLeast("http://"+core.Addr()+"/metrics", "corral_core_store_in_flight", 1)
	}, "the core is storing the first publish")
	cut := time.Now()
	link.ResetAll() // the link dies under them

	answers := map[string][]corralv1.Code{}
	got := 0
	deadline := time.After(4 * time.Second) // under the SDKs' 5 s resend
	for got < inFlight {
		select {
		case f, ok := <-c.Frames():
			if !ok {
				t.Fatalf("the connection closed: %v", c.Err())
			}
			// Frames carries every frame, "before"'s Published too.
			if e := f.GetError(); e != nil && e.GetRef() != "" {
				answers[e.GetRef()] = append(answers[e.GetRef()], e.GetCode())
				got++
			} else if p := f.GetPublished(); p != nil && p.GetId() != "before" {
				answers[p.GetId()] = append(answers[p.GetId()], corralv1.Code_CODE_UNSPECIFIED)
				got++
			}
		case <-deadline:
			t.Fatalf("%v after the cut, answers %v, want %d", time.Since(cut), answers, inFlight)
		}
	}
	for i := range inFlight {
		id := fmt.Sprint("p", i)
		if a := answers[id]; len(a) != 1 || a[0] != corralv1.Code_CODE_UNAVAILABLE {
			t.Errorf("%s answered %v, want one 4103", id, a)
		}
	}
	if a := answers["before"]; len(a) != 0 {
		t.Errorf("the publish answered before the cut was answered again: %v", a)
	}
	// A retry is what answers them now, once the core is back.
	if err := tox.Remove("slow"); err != nil {
		t.Fatal(err)
	}
	for i := range inFlight {
		for {
			_, err := c.Publish(ctx, room, fmt.Sprint("p", i), []byte(`1`))
			var se *client.ServerError
			if errors.As(err, &se) && se.Err.GetCode() == corralv1.Code_CODE_UNAVAILABLE {
				retry.Sleep(ctx, time.Duration(se.Err.GetRetryAfterMs())*time.Millisecond)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	// No second link-lost answer came for any of them (the retries'
	// own answers, refusals while the edge waited for the core included,
	// are on Frames too).
	for {
		select {
		case f := <-c.Frames():
			if e := f.GetError(); strings.Contains(e.GetMessage(), "lost the link") {
				t.Fatalf("a second link-lost answer: %v", e)
			}
			continue
		default:
		}
		break
	}
}

// metricAtLeast reports whether the gauge name at url reads at least n.
func metricAtLeast(url, name string, n float64) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		var v float64
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			if _, err := fmt.Sscan(rest, &v); err == nil && v >= n {
				return true
			}
		}
	}
	return false
}
