// Package console serves the admin console: a page at /console on the
// internal listener from which an operator sees and steers a running
// corral (nodes, rooms and their live tail, connections, the config and
// its reload). It is static files only, embedded in the binary: the page
// calls the internal API (corral.v1.RoomService, Connect's JSON over
// fetch) with the API key the operator types, which the page keeps in
// memory, never in a cookie or in storage. No cookie means no ambient
// authority, so a page of another site cannot act through the browser
// (no CSRF): every call carries the key in its Authorization header,
// which only the console's own script sets.
//
// The handler may be used by any number of requests at once.
package console

import (
	"embed"
	"io/fs"
	"net/http"
)

// Path is where the console is served; the page's script calls the API
// at the listener's root (/corral.v1.RoomService/...).
const Path = "/console/"

//go:embed assets
var assets embed.FS

// Handler serves the console's files under Path (and redirects /console
// to it). Its answers forbid framing (clickjacking) and any script,
// style or connection but the listener's own.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix(Path, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/console" {
			http.Redirect(w, r, Path, http.StatusMovedPermanently)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
