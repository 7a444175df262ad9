package server

import (
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
)

// debugMux serves the Go runtime's profiles (net/http/pprof) for
// Options.DebugAddr: CPU, heap, goroutines, mutex and block profiles of a
// running corral. It exposes internals (stacks, memory contents in heap
// profiles' labels), so the address must stay private. Its cmdline is
// cmdline (Options.DebugCmdline), never os.Args: flags may hold secrets.
func debugMux(cmdline []string) *http.ServeMux {
	if cmdline == nil && len(os.Args) > 0 {
		cmdline = os.Args[:1]
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", func(w http.ResponseWriter, _ *http.Request) {
		// As pprof.Cmdline, with the given arguments.
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte(strings.Join(cmdline, "\x00")))
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
