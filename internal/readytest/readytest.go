// Package readytest waits, in tests, for a node's HTTP endpoint (usually
// /readyz) to answer 200: the one poll every test that starts a corral
// in-process needs before it connects.
package readytest

import (
	"net/http"
	"testing"
	"time"
)

// Wait polls url until it answers 200 OK, failing tb after 10 s.
func Wait(tb testing.TB, url string) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatalf("%s never answered 200", url)
}
