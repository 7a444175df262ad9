//go:build race

// Package israce says whether the race detector is on: under it sync.Pool
// drops a quarter of what is put back, so tests that count a pool's
// allocations bound them only without it.
package israce

// Enabled: built with -race.
const Enabled = true
