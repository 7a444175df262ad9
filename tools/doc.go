// Package tools holds the repository's scripts for humans and CI, and
// their tests: install-deps.sh installs what the test suite needs (make
// test and .ci/run call it); tools/buf pins buf, the prebuilt binary from
// npm, in a lock file; gotool.sh builds the Go tools pinned in modfiles of
// their own (tools/helm, tools/sbom) once, printing progress while it
// does; tools/helm tests the chart and DEPLOYMENT.md's Helm walkthrough;
// tools/grpcurl pins grpcurl and tests that it lists a core's API by
// reflection (make helm-check, make grpcurl-check); progress.sh prints a
// line every 20 s while a long step of make test or make ci runs; release/
// builds a release (make release) and checks one (make release-check).
package tools
