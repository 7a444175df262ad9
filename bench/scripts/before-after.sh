#!/bin/bash
# usage: before-after.sh OLD_DIR NEW_DIR BENCH ROUNDS OUT_DIR
#
# Runs busy, broadcast, cursors and storm against two corral binaries
# (OLD_DIR/corral, NEW_DIR/corral), ROUNDS rounds interleaved with the
# order swapped each round, a fresh `corral serve` per run, the same
# corral-bench (BENCH) as client for both. Writes OUT_DIR/<bin>-<workload>-<round>.json
# and prints one line per run; summarise with before-after-summary.py.
# Env: WORKLOADS (default "busy broadcast cursors storm") runs a subset;
# DURATION (default 10s) is the busy, broadcast and cursors runs' length;
# CLIENT (default standard: coder/websocket's reader, like most users') the
# clients' reader.
# Hold the load lock: flock /tmp/corral-load.lock before-after.sh ...
# Ports: 28680 (clients), 28691 (internal API).
set -u
OLD=$1; NEW=$2; BENCH=$3; ROUNDS=$4; OUT=$5
mkdir -p "$OUT"
ADDR=127.0.0.1:28680; API=127.0.0.1:28691
WORKLOADS=${WORKLOADS:-busy broadcast cursors storm}
DURATION=${DURATION:-10s}

run() { # run BINDIR NAME WORKLOAD ROUND
	local dir=$1 name=$2 w=$3 r=$4
	CORRAL_PUBLISH_RATE=-1 "$dir/corral" serve --insecure-dev --addr $ADDR \
		--internal-addr $API --log-level warn &
	local pid=$!
	sleep 1
	local T="--url ws://$ADDR/ws --api http://$API --pid $pid --client ${CLIENT:-standard} --quiet --json $OUT/$name-$w-$r.json"
	case $w in
	busy) "$BENCH" versus --server corral $T --workload busy-room --sockets 200 --rooms 1 \
		--senders 20 --rate 400 --duration $DURATION ;;
	broadcast) "$BENCH" broadcast $T --sockets 15000 --rooms 100 --rate 250 --duration $DURATION ;;
	cursors) "$BENCH" cursors $T --senders 20 --duration $DURATION ;;
	storm) "$BENCH" storm $T --clients 2000 --rooms 20 --after 2s ;;
	esac >"$OUT/$name-$w-$r.log" 2>&1
	echo "$name $w round $r: exit $?"
	kill $pid
	wait $pid 2>/dev/null
	sleep 1
}

for r in $(seq 1 "$ROUNDS"); do
	for w in $WORKLOADS; do
		if [ $((r % 2)) = 1 ]; then
			run "$OLD" old $w $r
			run "$NEW" new $w $r
		else
			run "$NEW" new $w $r
			run "$OLD" old $w $r
		fi
	done
done
