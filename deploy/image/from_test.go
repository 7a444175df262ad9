package image_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBaseImagesFullyQualified fails for a FROM naming an image without its
// registry ("golang:1.26"): docker takes docker.io for granted, but podman
// and buildah refuse a short name unless the machine's registries.conf says
// where to look, so a copied build command would fail there.
func TestBaseImagesFullyQualified(t *testing.T) {
	files := []string{"../../Dockerfile"}
	more, _ := filepath.Glob("Dockerfile*")
	files = append(files, more...)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		stages := map[string]bool{}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for n := 1; sc.Scan(); n++ {
			fields := strings.Fields(sc.Text())
			if len(fields) < 2 || !strings.EqualFold(fields[0], "FROM") {
				continue
			}
			img := fields[1]
			for _, fl := range fields[1:] { // skip --platform=... and the like
				if !strings.HasPrefix(fl, "--") {
					img = fl
					break
				}
			}
			known := img == "scratch" || stages[strings.ToLower(img)]
			if len(fields) >= 4 && strings.EqualFold(fields[len(fields)-2], "AS") {
				stages[strings.ToLower(fields[len(fields)-1])] = true
			}
			if known {
				continue
			}
			// A registry host has a dot or a port, or is localhost.
			host, _, ok := strings.Cut(img, "/")
			if !ok || !(strings.ContainsAny(host, ".:") || host == "localhost") {
				t.Errorf("%s:%d: FROM %s is a short name; podman and buildah need the registry (docker.io/library/...)", f, n, img)
			}
		}
	}
}
