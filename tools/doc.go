// Package tools holds the repository's scripts for humans and CI, and
// their tests: install-deps.sh installs what the test suite needs (make
// test and .ci/run call it). tools/buf pins buf: the prebuilt binary from npm, in a lock file.
package tools
