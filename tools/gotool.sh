#!/usr/bin/env bash
# gotool.sh runs a Go tool pinned in a modfile of its own, tools/NAME/go.mod
# (helm, the SBOM generator), built once from source into a cache shared by
# every clone on the machine (CORRAL_TOOLS_CACHE, else
# ~/.cache/corral-tools: CI's fresh clone reuses it) and reused until the
# modfile changes. The first build of helm took 8.4 min with an empty Go
# build cache on a shared 2-core machine: a line every 20 s meanwhile keeps
# a first `make ci` from sitting silent. Progress goes to stderr; stdout is
# the tool's alone.
#
# Usage: tools/gotool.sh NAME [ARGS...]
set -euo pipefail

name="${1:?usage: tools/gotool.sh NAME [ARGS...]}"
shift
root="$(cd "$(dirname "$0")/.." && pwd)"
mod="$root/tools/$name/go.mod"
[ -f "$mod" ] || { echo "gotool: no $mod" >&2; exit 2; }
# The binary's name carries a hash of the pins: a changed pin builds anew.
key="$(cat "$mod" "${mod%.mod}.sum" | sha256sum | cut -c1-12)"
cache="${CORRAL_TOOLS_CACHE:-${XDG_CACHE_HOME:-${HOME:-$root/bin}/.cache}/corral-tools}"
bin="$cache/$name-$key"

if [ ! -x "$bin" ]; then
  pkg="$(sed -n 's/^tool[[:space:]]\{1,\}\([^(][^[:space:]]*\)$/\1/p' "$mod" | head -n1)"
  [ -n "$pkg" ] || { echo "gotool: $mod names no tool" >&2; exit 2; }
  mkdir -p "$cache"
  echo "gotool: building $name ($pkg) from source, once; later runs reuse $bin" >&2
  log="$(mktemp)"
  start=$SECONDS
  (cd "$root" && exec "${GO:-go}" build -trimpath -modfile="$mod" -o "$bin.$$" "$pkg") >"$log" 2>&1 &
  pid=$!
  next=20
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ $((SECONDS - start)) -ge "$next" ] && kill -0 "$pid" 2>/dev/null; then
      echo "gotool: still building $name: $((SECONDS - start))s" >&2
      next=$((next + 20))
    fi
  done
  if ! wait "$pid"; then
    cat "$log" >&2
    rm -f "$log" "$bin.$$"
    echo "gotool: building $name failed (above)" >&2
    exit 1
  fi
  rm -f "$log"
  mv -f "$bin.$$" "$bin"
  echo "gotool: built $name in $((SECONDS - start))s" >&2
fi
exec "$bin" "$@"
