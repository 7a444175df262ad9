package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"github.com/corral-rt/corral/apiclient"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
)

// prepare checks the target and the open-file limit and spreads the
// clients' source addresses; call restore once every client has closed.
func prepare(ctx context.Context, o Options, conns int, needAPI bool) (restore func(), err error) {
	if err := o.Target.check(ctx, needAPI); err != nil {
		return nil, err
	}
	limit, err := raiseFileLimit()
	if err != nil {
		return nil, fmt.Errorf("bench: raise the open-file limit: %w", err)
	}
	need := conns + 256
	if o.InProcess {
		need += conns
	}
	if limit > 0 && uint64(need) > limit {
		return nil, fmt.Errorf("bench: %d connections need about %d open files but this process may hold %d (its hard limit): use fewer connections, run the server as its own process, or run several generators", conns, need, limit)
	}
	return useSources(o.Target, o.sources(conns))
}

// runID names a run's rooms so that runs against one server never share a
// room.
func runID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func roomNamer(id string, rooms int) func(int) string {
	names := make([]string, max(rooms, 1))
	for i := range names {
		names[i] = "bench-" + id + "-" + strconv.Itoa(i)
	}
	return func(i int) string { return names[i%len(names)] }
}

// apiClient is a RoomService client for the target's internal API: h2c for
// http URLs, so that every publish shares one connection; TLS with HTTP/2
// for https. It presents the target's API key, if any.
func apiClient(t Target) corralv1connect.RoomServiceClient {
	var rt http.RoundTripper
	if strings.HasPrefix(t.API, "https://") {
		rt = http.DefaultTransport.(*http.Transport).Clone()
	} else {
		rt = apiclient.H2CClient().Transport
	}
	if t.APIKey != "" {
		rt = bearer{key: t.APIKey, next: rt}
	}
	return corralv1connect.NewRoomServiceClient(connect.NewClient(
		connecthttp.NewTransport(&http.Client{Transport: rt}, strings.TrimSuffix(t.API, "/"), connecthttp.WithCompressors())))
}

// bearer adds "Authorization: Bearer <key>" to every request.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

// rateList is a flag holding comma-separated rates.
type rateList []float64

func (l *rateList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, r := range *l {
		s[i] = strconv.FormatFloat(r, 'f', -1, 64)
	}
	return strings.Join(s, ",")
}

func (l *rateList) Set(v string) error {
	*l = (*l)[:0]
	for f := range strings.SplitSeq(v, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || r <= 0 {
			return fmt.Errorf("rates are positive numbers, comma-separated: %q", f)
		}
		*l = append(*l, r)
	}
	return nil
}
