package faultproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Toxic is Shopify's toxiproxy, in process, between loopback clients and
// a target: toxics added to it (latency, timeout, reset_peer, bandwidth...)
// act on every connection through it, current and new, until removed. All
// methods are safe for concurrent use.
type Toxic struct {
	proxy *toxiproxy.Proxy
}

// StartToxic listens on 127.0.0.1 (a free port) and forwards to target.
// Some toxics (bandwidth) log through zerolog's global logger: StartToxic
// raises zerolog's global level to warnings, for the whole process.
func StartToxic(target string) (*Toxic, error) {
	if zerolog.GlobalLevel() < zerolog.WarnLevel {
		zerolog.SetGlobalLevel(zerolog.WarnLevel)
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "faultproxy", "127.0.0.1:0", target)
	if err := p.Start(); err != nil {
		return nil, err
	}
	return &Toxic{proxy: p}, nil
}

// Addr is the proxy's listening address.
func (t *Toxic) Addr() string { return t.proxy.Listen }

// Add adds a toxic named name of type kind (see toxiproxy's README) on the
// stream "upstream" (client to target) or "downstream" (target to
// client), with the toxic's attributes, e.g. {"latency": 500} or
// {"timeout": 0}.
func (t *Toxic) Add(name, kind, stream string, attrs map[string]any) error {
	b, err := json.Marshal(map[string]any{
		"name": name, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attrs,
	})
	if err != nil {
		return err
	}
	if _, err := t.proxy.Toxics.AddToxicJson(bytes.NewReader(b)); err != nil {
		return fmt.Errorf("faultproxy: add %s toxic %q: %w", kind, name, err)
	}
	return nil
}

// Remove removes the toxic named name. Removing a timeout toxic closes the
// connections it held, as toxiproxy does.
func (t *Toxic) Remove(name string) error {
	if err := t.proxy.Toxics.RemoveToxic(context.Background(), name); err != nil {
		return fmt.Errorf("faultproxy: remove toxic %q: %w", name, err)
	}
	return nil
}

// Close stops the proxy and closes its connections.
func (t *Toxic) Close() { t.proxy.Stop() }
