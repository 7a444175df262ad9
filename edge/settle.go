package edge

import (
	"runtime/debug"
	"sync/atomic"
	"time"
)

// Settling the heap after a connect burst. Connections that go idle
// allocate nothing, so after a burst of handshakes no GC runs: the heap
// stays where the burst left it, near the GC's goal (twice the heap live
// at the previous GC with GOGC=100), and the process keeps that memory
// though most of it is garbage: RSS was 1.9× the live heap per idle
// connection (docs/benchmarks/2026-12-06-0510-idle-memory.md).
//
// The policy: once at least settleBurst connections were accepted since
// the last settle, and none for settleQuiet, the sweeper runs one GC and
// returns the freed memory to the OS (debug.FreeOSMemory). It is bounded:
// one settle per burst of settleBurst accepts, never while connections
// keep arriving (then allocations keep the GC running anyway), and a
// process that never sees a burst never settles. Each settle is counted
// and timed (corral_edge_heap_settles_total,
// corral_edge_heap_settle_seconds_total): a full GC of the heap, on the
// sweeper's goroutine and the GC's workers, once per burst.
const (
	settleBurst = 1000
	settleQuiet = 2 * time.Second
)

// settler counts accepts for the settle policy. Safe for concurrent use:
// accepts come from every handshake, due from the sweeper alone.
type settler struct {
	accepts atomic.Int64 // since the last settle
	last    atomic.Int64 // mono.Now of the last accept
	// free runs the settle (debug.FreeOSMemory; tests count instead).
	free func()
}

func newSettler() *settler { return &settler{free: debug.FreeOSMemory} }

// accepted records a connection accepted at now (mono.Now). A nil
// settler (an Edge built by hand in a test) records nothing.
func (s *settler) accepted(now int64) {
	if s == nil {
		return
	}
	s.accepts.Add(1)
	s.last.Store(now)
}

// due reports whether a settle is due at now, and if so starts the next
// burst's count: a burst of at least settleBurst accepts, then none for
// settleQuiet.
func (s *settler) due(now int64) bool {
	if s == nil || s.accepts.Load() < settleBurst || now-s.last.Load() < int64(settleQuiet) {
		return false
	}
	s.accepts.Store(0)
	return true
}

// settle runs a due settle at now, on the sweeper, and reports how long
// it took (0: none was due).
func (s *settler) settle(now int64) time.Duration {
	if !s.due(now) {
		return 0
	}
	start := time.Now()
	s.free()
	return time.Since(start)
}
