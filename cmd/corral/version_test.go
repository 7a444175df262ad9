package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestVersionCommand builds corral as make release does, with the version
// and commit set by the linker, and runs `corral version` and `corral
// --version`.
func TestVersionCommand(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "corral")
	const pkg = "github.com/corral-rt/corral/internal/buildinfo"
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X "+pkg+".version=9.8.7 -X "+pkg+".commit=0123abc", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	want := "corral 9.8.7 (commit 0123abc, " + runtime.Version() + ")\n"
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).Output()
		if err != nil || string(out) != want {
			t.Errorf("corral %s: %v, printed %q, want %q", arg, err, out, want)
		}
	}
	if out, _ := exec.Command(bin, "help").CombinedOutput(); !strings.Contains(string(out), "corral version") {
		t.Errorf("corral help does not list the version command:\n%s", out)
	}
}
