package server

import (
	"net/http"
	"net/http/pprof"
)

// debugMux serves the Go runtime's profiles (net/http/pprof) for
// Options.DebugAddr: CPU, heap, goroutines, mutex and block profiles of a
// running corral. It exposes internals (stacks, memory contents in heap
// profiles' labels), so the address must stay private.
func debugMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
