package integration_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/corral-rt/corral/apiclient"
	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/config"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
	"google.golang.org/protobuf/proto"
)

// FuzzConnection drives a whole client connection, not one decoder: the
// input is a sequence of frames a hostile or careless client sends over a
// real WebSocket to an in-process corral (one process, in memory, default
// limits), while an honest publisher and a bystander share the room
// "lobby". After each input it checks the server's promises:
//
//   - the process survives (a panic fails the fuzzer);
//   - the bystander receives every message of "lobby" in order, with no gap
//     and no duplicate, including the honest publisher's marker published
//     after the attacker's frames (so a flood cannot starve it);
//   - once the attacker's socket is gone its connection and session are
//     released (the edge's connection gauge and the core's attached
//     sessions return to the bystander and publisher alone): no work is
//     left queued behind a connection that left.
//
// Input layout: the first byte chooses the encoding (bit 0: protobuf
// instead of JSON) and whether the attacker reads what it is sent (bit 1
// set: it never reads, a slow consumer); then up to maxFuzzFrames frames,
// each a uvarint length and that many bytes, sent as one WebSocket
// message each.
func FuzzConnection(f *testing.F) {
	for _, seed := range connectionSeeds() {
		f.Add(seed)
	}
	fx := startFuzzServer(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		fx.run(t, data)
	})
}

// maxFuzzFrames bounds the frames of one input; maxFuzzFrame the bytes of
// one (the server's max-frame default is 64 KiB, so larger frames are
// also tried).
const (
	maxFuzzFrames = 64
	maxFuzzFrame  = 80 << 10
)

// fuzzServer is the deployment shared by every input of FuzzConnection:
// starting one per input would test start-up, not the connection, and
// sharing it also finds state an input leaves behind for the next.
type fuzzServer struct {
	node       *server.Node
	wsURL      string
	metricsURL string
	bystander  *client.Conn
	publisher  *client.Conn
	api        corralv1connect.RoomServiceClient
	lastSeq    uint64 // last seq of "lobby" the bystander saw
	marker     int
}

func startFuzzServer(f *testing.F) *fuzzServer {
	f.Helper()
	n, err := server.Start(server.Options{Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0"},
		Auth: auth.Dev{}, Logger: quietLogger(), APIKeys: []string{testAPIKey}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	// The honest marker goes through the internal API: a client publisher
	// would meet its own rate limit after a few hundred inputs.
	fx := &fuzzServer{node: n, wsURL: "ws://" + n.Addr() + "/ws",
		api: apiclient.New("http://"+n.InternalAddr(), testAPIKey, nil)}
	// /metrics is served on the internal listener when there is one, on
	// the public one otherwise.
	for _, addr := range []string{n.InternalAddr(), n.Addr()} {
		if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				fx.metricsURL = "http://" + addr + "/metrics"
				break
			}
		}
	}
	if fx.metricsURL == "" {
		f.Fatal("no /metrics on either listener")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []**client.Conn{&fx.bystander, &fx.publisher} {
		user := "bystander"
		if c == &fx.publisher {
			user = "publisher"
		}
		conn, err := client.Dial(ctx, fx.wsURL, client.Options{Token: user, Encoding: protocol.JSON})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { conn.CloseNow() })
		if _, err := conn.Join(ctx, "lobby", 0, ""); err != nil {
			f.Fatal(err)
		}
		*c = conn
	}
	// The publisher's connection is a second honest member of "lobby"
	// (the marker itself goes through the API): it reads what it is sent,
	// as a real client does. Left unread, its frames filled the client's
	// buffer after some thousand inputs, the server closed it as a slow
	// consumer, and checkReleased blamed the attacker.
	go func() {
		for range fx.publisher.Frames() {
		}
	}()
	// A client.Conn does not ping by itself, and the server closes a
	// silent connection after two heartbeats (4003): a campaign outlives
	// that, so the harness pings for its two clients.
	stopPings := make(chan struct{})
	f.Cleanup(func() { close(stopPings) })
	go func() {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for id := uint64(1); ; id++ {
			select {
			case <-stopPings:
				return
			case <-tick.C:
			}
			ping := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Id: id}}}
			for _, c := range []*client.Conn{fx.bystander, fx.publisher} {
				pctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_ = c.Send(pctx, ping)
				cancel()
			}
		}
	}()
	return fx
}

// run plays one input and checks the invariants.
func (fx *fuzzServer) run(t *testing.T, data []byte) {
	mode, rest := data[0], data[1:]
	sub, typ := protocol.SubprotocolJSON, websocket.MessageText
	if mode&1 != 0 {
		sub, typ = protocol.SubprotocolProto, websocket.MessageBinary
	}
	ph := newPhases(t)
	defer ph.report()
	ctx, cancel := context.WithTimeout(context.Background(), inputBudget)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, fx.wsURL, &websocket.DialOptions{Subprotocols: []string{sub}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	ws.SetReadLimit(1 << 20)
	readDone := make(chan struct{})
	if mode&2 == 0 {
		go func() {
			defer close(readDone)
			for {
				if _, _, err := ws.Read(ctx); err != nil {
					return
				}
			}
		}()
	} else {
		close(readDone)
	}
	ph.mark("dial")
	// All the frames share one deadline: the fuzzer aborts an input that
	// runs 10 s, so per-frame timeouts (64 of them) must not add up.
	wctx, wcancel := context.WithTimeout(ctx, writeBudget)
	defer wcancel()
	for i := 0; i < maxFuzzFrames && len(rest) > 0; i++ {
		n, k := binary.Uvarint(rest)
		if k <= 0 {
			break
		}
		rest = rest[k:]
		n = min(n, uint64(len(rest)), maxFuzzFrame)
		frame := rest[:n]
		rest = rest[n:]
		if err := ws.Write(wctx, typ, frame); err != nil {
			break // closed by the server, or it stopped reading: both allowed
		}
	}
	ph.mark("write")
	ws.CloseNow()
	<-readDone
	ph.mark("close")

	fx.checkBystander(t, ctx)
	ph.mark("bystander")
	fx.checkReleased(t, ctx)
	ph.mark("release")
}

// inputBudget bounds one input from dial to release; writeBudget the
// frames' writes within it. Go's fuzzer treats an input that runs over
// 10 s as a hung worker and stops the whole campaign, so a slow input must
// fail here, saying which phase was slow, before that.
const (
	inputBudget = 8 * time.Second
	writeBudget = 3 * time.Second
	slowInput   = 2 * time.Second // past it, the phases are logged
)

// phases times the steps of one input, to say which one was slow.
type phases struct {
	t     *testing.T
	start time.Time
	last  time.Time
	steps []string
}

func newPhases(t *testing.T) *phases {
	now := time.Now()
	return &phases{t: t, start: now, last: now}
}

func (p *phases) mark(name string) {
	now := time.Now()
	p.steps = append(p.steps, fmt.Sprintf("%s %v", name, now.Sub(p.last).Round(time.Millisecond)))
	p.last = now
}

// report logs the phases when the input was slow or failed.
func (p *phases) report() {
	if d := time.Since(p.start); d > slowInput || p.t.Failed() {
		p.t.Logf("input took %v: %s", d.Round(time.Millisecond), strings.Join(p.steps, ", "))
	}
}

// checkBystander publishes a marker as the honest publisher and waits for
// the bystander to receive it, checking that every message of "lobby" on
// the way came in order with no gap.
func (fx *fuzzServer) checkBystander(t *testing.T, ctx context.Context) {
	t.Helper()
	fx.marker++
	id := "marker-" + strconv.Itoa(fx.marker)
	pub, err := fx.api.Publish(ctx, &corralv1.PublishRequest{Room: "lobby", IdempotencyKey: id, Payload: payload(fx.marker), Sender: "publisher"})
	if err != nil {
		t.Fatalf("the honest publisher was refused after the input: %v", err)
	}
	for {
		select {
		case f, ok := <-fx.bystander.Frames():
			if !ok {
				t.Fatalf("the bystander's connection ended: %v", fx.bystander.Err())
			}
			m := f.GetMessage()
			if m == nil || m.GetRoom() != "lobby" {
				if r := f.GetReset_(); r != nil {
					t.Fatalf("the bystander got a reset of %q in memory mode: %v", r.GetRoom(), r)
				}
				continue
			}
			if m.GetSeq() != fx.lastSeq+1 {
				t.Fatalf("the bystander got seq %d after %d", m.GetSeq(), fx.lastSeq)
			}
			fx.lastSeq = m.GetSeq()
			if m.GetSeq() == pub.GetSeq() {
				return
			}
		case <-ctx.Done():
			t.Fatalf("the bystander never got the marker (seq %d; last seen %d)", pub.GetSeq(), fx.lastSeq)
		}
	}
}

// checkReleased waits until the attacker's connection and session are
// gone from the edge and the core.
func (fx *fuzzServer) checkReleased(t *testing.T, ctx context.Context) {
	t.Helper()
	want := map[string]float64{"corral_edge_connections": 2, "corral_core_sessions_attached": 2}
	var got map[string]float64
	for {
		got = scrapeGauges(t, ctx, fx.metricsURL, want)
		same := true
		for k, v := range want {
			if got[k] != v {
				same = false
			}
		}
		if same {
			return
		}
		for _, c := range []*client.Conn{fx.bystander, fx.publisher} {
			select {
			case <-c.Done():
				t.Fatalf("an honest connection was closed: %v", c.Err())
			default:
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the attacker's connection was not released: %v, want %v", got, want)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// scrapeGauges reads the named unlabelled gauges from a /metrics page.
func scrapeGauges(t *testing.T, ctx context.Context, url string, names map[string]float64) map[string]float64 {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	got := make(map[string]float64)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if _, want := names[name]; !ok || !want {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			got[name] = v
		}
	}
	return got
}

// connectionSeeds are realistic and hostile frame sequences, in both
// encodings: what a careless client or an attacker sends first.
func connectionSeeds() [][]byte {
	pack := func(mode byte, frames ...[]byte) []byte {
		out := []byte{mode}
		for _, fr := range frames {
			out = binary.AppendUvarint(out, uint64(len(fr)))
			out = append(out, fr...)
		}
		return out
	}
	js := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i, x := range s {
			out[i] = []byte(x)
		}
		return out
	}
	repeat := func(n int, s string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = strings.ReplaceAll(s, "$i", strconv.Itoa(i))
		}
		return out
	}
	hello := `{"hello":{"token":"mallory"}}`
	var seeds [][]byte
	add := func(mode byte, frames ...string) { seeds = append(seeds, pack(mode, js(frames...)...)) }

	add(0, hello, `{"join":{"room":"lobby"}}`, `{"publish":{"room":"lobby","id":"a","payload":{"x":1}}}`, `{"leave":{"room":"lobby"}}`)
	add(0, append([]string{hello, `{"join":{"room":"lobby","presence":true}}`}, repeat(60, `{"setPresence":{"room":"lobby","state":{"n":$i}}}`)...)...)
	add(0, append([]string{hello}, repeat(62, `{"presenceQuery":{"room":"lobby","limit":100}}`)...)...)
	add(0, append([]string{hello, `{"join":{"room":"lobby"}}`}, repeat(62, `{"ack":{"room":"lobby","seq":$i}}`)...)...)
	add(0, append([]string{hello}, repeat(62, `{"ping":{"id":$i}}`)...)...)
	add(0, append([]string{hello}, repeat(62, `{"join":{"room":"r$i"}}`)...)...)
	add(0, append([]string{hello, `{"join":{"room":"lobby"}}`}, repeat(62, `{"signal":{"room":"lobby","key":"k$i","payload":1}}`)...)...)
	add(0, append([]string{hello, `{"join":{"room":"lobby"}}`}, repeat(62, `{"publish":{"room":"lobby","id":"$i","payload":$i}}`)...)...)
	add(2, append([]string{hello, `{"join":{"room":"lobby"}}`}, repeat(62, `{"publish":{"room":"lobby","id":"$i","payload":"`+strings.Repeat("x", 4000)+`"}}`)...)...)
	add(0, `{"hello":{"token":"mallory","resume":{"sessionId":"s","resumeToken":"t","rooms":[{"room":"lobby","seq":1,"epoch":"e"}]}}}`)
	add(0, hello, hello, `{"join":{"room":"lobby","sinceSeq":"`+strings.Repeat("é", 80)+`"}}`)
	add(0, hello, `{"join":{"room":"lobby\u202e"}}`, `{"join":{"room":"`+strings.Repeat("a", 5000)+`"}}`)
	add(0, `{"ping":{"id":1}}`, hello)
	add(0, hello, `{"join":{"room":"lobby","sinceSeq":"0","epoch":"nope"}}`, `{"bogus":{}}`, `not json`)
	add(0, hello, `{"join":{"room":"lobby"}}`, `{"publish":{"room":"lobby","id":"x","payload":`+strings.Repeat("[", 3000)+`}}`)
	rooms := make([]string, 300)
	for i := range rooms {
		rooms[i] = fmt.Sprintf(`{"room":"x%d","seq":0}`, i)
	}
	add(0, `{"hello":{"token":"mallory","resume":{"sessionId":"s","resumeToken":"t","rooms":[`+strings.Join(rooms, ",")+`]}}}`)

	mp := func(f *corralv1.ClientFrame) []byte {
		b, err := proto.Marshal(f)
		if err != nil {
			panic(err)
		}
		return b
	}
	phello := mp(&corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{Token: "mallory"}}})
	pjoin := mp(&corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: "lobby", Presence: true}}})
	frames := [][]byte{phello, pjoin}
	for i := range 60 {
		frames = append(frames, mp(&corralv1.ClientFrame{Kind: &corralv1.ClientFrame_SetPresence{SetPresence: &corralv1.SetPresence{Room: "lobby", State: []byte(fmt.Sprintf(`{"n":%d}`, i))}}}))
	}
	seeds = append(seeds, pack(1, frames...))
	seeds = append(seeds, pack(3, phello, pjoin, mp(&corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "lobby", Id: "p", Payload: []byte(`1`)}}}), []byte{0xff, 0xff}))
	return seeds
}
