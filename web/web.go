// Package web serves corral's demo page: a shared canvas where everyone in
// a room sees everyone's cursor live (signals), a chat in one order for
// everyone (messages), and who is here. The page, its styles and the
// browser SDK (assets/corral.js, built from clients/js and committed, so
// that `go build` needs no npm) are embedded in the binary; `corral serve`
// and `corral edge` serve them at /.
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed assets
var assets embed.FS

// Handler serves the demo page and its assets for GET and HEAD requests;
// other methods get 405. Unknown paths get 404.
func Handler() http.Handler {
	root, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	files := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		// Embedded files carry no modification time: revalidate every time,
		// so that a new binary's page is never mixed with an old cached SDK.
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})
}
