#!/usr/bin/env bash
# single.sh — one corral-bench scenario against a fresh `corral serve`,
# the way every corral-only row of docs/BENCHMARKS.md is taken.
#
#   bench/scripts/single.sh [-r] [-s "corral serve flags"] SCENARIO [corral-bench flags...]
#
# -r puts the server on a fresh private redis-server (port PORT_BASE+9).
# The server listens on 127.0.0.1:PORT_BASE (WebSocket) and PORT_BASE+1
# (internal API), PORT_BASE default 28700; corral-bench gets --url, --api
# and --pid, then the flags given. Binaries: CORRAL, BENCH (default: built
# from this checkout into a temp dir), REDIS_SERVER. Exits with
# corral-bench's status (1: something was lost). Hold the load lock:
#   flock /tmp/corral-load.lock bench/scripts/single.sh connect --rate 5000 --slo 50ms
set -euo pipefail
REDIS="" SFLAGS=""
while getopts "rs:h" opt; do
	case $opt in
	r) REDIS=1 ;;
	s) SFLAGS=$OPTARG ;;
	*) sed -n '2,14p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n '2,14p' "$0"; exit 2; }
. "$(dirname "$0")/bins.sh"
PORT_BASE=${PORT_BASE:-28700}
WS=127.0.0.1:$PORT_BASE API=127.0.0.1:$((PORT_BASE + 1)) RPORT=$((PORT_BASE + 9))

PIDS=()
stop() {
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
	bins_cleanup
}
trap stop EXIT

extra=()
if [ -n "$REDIS" ]; then
	"$REDIS_SERVER" --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >/dev/null &
	PIDS+=($!)
	wait_port "$RPORT"
	extra=(--redis "redis://127.0.0.1:$RPORT")
fi
# shellcheck disable=SC2086
"$CORRAL" serve --insecure-dev --log-level warn \
	--addr "$WS" --internal-addr "$API" "${extra[@]}" $SFLAGS &
SP=$!
PIDS+=($SP)
wait_port "$PORT_BASE"
scenario=$1
shift
"$BENCH" "$scenario" --url "ws://$WS/ws" --api "http://$API" --pid "$SP" "$@"
