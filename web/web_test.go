package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/corral-rt/corral/web"
)

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(web.Handler())
	defer srv.Close()
	tests := []struct {
		name, method, path string
		status             int
		contentType, body  string
	}{
		{"page", "GET", "/", 200, "text/html", `<script type="module" src="app.js">`},
		{"index by name", "GET", "/index.html", 301, "", ""},
		{"app", "GET", "/app.js", 200, "text/javascript", `from "./corral.js"`},
		{"sdk", "GET", "/corral.js", 200, "text/javascript", "corral.v1.json"},
		{"styles", "GET", "/style.css", 200, "text/css", ".board"},
		{"head", "HEAD", "/", 200, "text/html", ""},
		{"unknown", "GET", "/nope", 404, "", ""},
		{"post", "POST", "/", 405, "", ""},
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.contentType) {
				t.Errorf("Content-Type %q, want %q", ct, tc.contentType)
			}
			if !strings.Contains(string(body), tc.body) {
				t.Errorf("body does not contain %q", tc.body)
			}
		})
	}
}

func ExampleHandler() {
	mux := http.NewServeMux()
	mux.Handle("/", web.Handler()) // the demo at /, next to /ws
	_ = mux
}
