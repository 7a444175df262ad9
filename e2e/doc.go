// Package e2e holds corral's end-to-end tests of the browser SDK
// (clients/js), the demo page (web) and the admin console (console): the
// Node tests in this folder drive headless Chromium against a real
// `corral serve` (npm test, or make test-js), and golden_test.go holds the SDK's golden JSON frames against
// the Go codec, so that the two sides of corral.v1.json cannot drift apart.
package e2e
