#!/bin/bash
# usage: transports.sh ROUNDS OUT_DIR
#
# Issue 38's costs: the same corral over each client carrier — WebSocket
# (ws), Server-Sent Events with POSTs (sse) and HTTP streaming (stream),
# docs/TRANSPORTS.md — in one sitting, rounds interleaved with the carriers'
# order rotated each round, a fresh `corral serve` per run, the standard
# client. Two workloads:
#   broadcast  SOCKETS sockets over ROOMS rooms, RATE server-side publishes/s
#              for DURATION: server CPU per delivery and delivery p99;
#   idle       CONNS idle connections held HOLD: server RSS per connection.
# Writes OUT_DIR/<carrier>-<workload>-<round>.json and prints one line per
# run; summarise with transports-summary.py OUT_DIR.
# Env: CARRIERS (default "ws sse stream"), SOCKETS (2000), ROOMS (20),
# RATE (100), DURATION (10s), CONNS (5000), HOLD (5s); CORRAL and BENCH name
# the binaries (bins.sh builds them from this checkout otherwise).
# Hold the load lock: flock /tmp/corral-load.lock transports.sh ...
# Ports: 28780 (clients), 28791 (internal API).
set -u
ROUNDS=$1; OUT=$2
. "$(dirname "$0")/bins.sh"
mkdir -p "$OUT"
ADDR=127.0.0.1:28780; API=127.0.0.1:28791
CARRIERS=${CARRIERS:-ws sse stream}
SOCKETS=${SOCKETS:-2000}; ROOMS=${ROOMS:-20}; RATE=${RATE:-100}
DURATION=${DURATION:-10s}; CONNS=${CONNS:-5000}; HOLD=${HOLD:-5s}

run() { # run CARRIER WORKLOAD ROUND
	local c=$1 w=$2 r=$3
	CORRAL_PUBLISH_RATE=unlimited "$CORRAL" serve --insecure-dev --addr $ADDR \
		--internal-addr $API --log-level warn &
	local pid=$!
	for _ in $(seq 50); do curl -sf "http://$ADDR/readyz" >/dev/null && break; sleep 0.1; done
	local T="--url ws://$ADDR/ws --api http://$API --pid $pid --client standard --transport $c --quiet --json $OUT/$c-$w-$r.json"
	case $w in
	broadcast) "$BENCH" broadcast $T --sockets "$SOCKETS" --rooms "$ROOMS" --rate "$RATE" --duration "$DURATION" ;;
	idle) "$BENCH" connect $T --sockets "$CONNS" --hold "$HOLD" ;;
	esac >"$OUT/$c-$w-$r.log" 2>&1
	echo "$c $w round $r: exit $?"
	kill $pid
	wait $pid 2>/dev/null
}

for r in $(seq 1 "$ROUNDS"); do
	set -- $CARRIERS
	# rotate the carriers' order by the round
	for _ in $(seq 2 "$r"); do set -- "${@:2}" "$1"; done
	for w in broadcast idle; do
		for c in "$@"; do run "$c" $w "$r"; done
	done
done
