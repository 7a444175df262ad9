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
initdb="$(command -v initdb 2>/dev/null || ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)"
required=(
  make=make
  redis-server=redis-server         # tests start private redis-servers
  "${initdb:-initdb}=postgresql"    # outbox tests start private PostgreSQL servers
  node=nodejs                       # clients/js and e2e: Node.js 20 or newer
  npm=npm
  "$chromium=chromium"              # e2e: Debian's Chromium for playwright-core
  "$@"
)
min_node=20

say() { echo "install-deps: $*" >&2; }

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
  if [ "$(id -u)" = 0 ]; then
    sudo=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
    sudo=(sudo -n)
  else
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

# Debian 12 packages Node.js 18: too old for the SDK's tools.
if major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null)" && [ "$major" -ge "$min_node" ] 2>/dev/null; then
  :
else
  say "Node.js $min_node or newer is needed for clients/js and e2e; found $(node --version 2>/dev/null || echo none)."
  say "Debian 13 and Ubuntu 24.04 package it (apt-get install nodejs npm); on Debian 12 install it from nodejs.org."
  exit 1
fi
