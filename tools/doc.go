// Package tools holds the repository's scripts for humans and CI, and
// their tests: install-deps.sh installs what the test suite needs (make
// test and .ci/run call it). tools/buf pins buf in a modfile of its own;
// tools/helm pins helm and tests the chart and DEPLOYMENT.md's Helm
// walkthrough; tools/grpcurl pins grpcurl and tests that it lists a core's
// API by reflection (make helm-check, make grpcurl-check).
package tools
