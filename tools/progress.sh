#!/usr/bin/env bash
# progress.sh runs a command with its output passed through, and prints a
# line to stderr every 20 s while it runs: go test prints a package's
# result only when the package ends, and a first compile of the test
# binaries or a long integration package sat silent for minutes. It exits
# with the command's status.
#
# Usage: tools/progress.sh LABEL COMMAND [ARGS...]
set -uo pipefail

label="${1:?usage: tools/progress.sh LABEL COMMAND [ARGS...]}"
shift
start=$SECONDS
"$@" &
pid=$!
(
  while sleep 20; do
    kill -0 "$pid" 2>/dev/null || exit 0
    echo "... $label: still running ($((SECONDS - start))s)" >&2
  done
) &
ticker=$!
wait "$pid"
rc=$?
kill "$ticker" 2>/dev/null
wait "$ticker" 2>/dev/null
exit "$rc"
