#!/usr/bin/env bash
# busy-ab.sh — issue 19's busy-room row against one corral binary with two
# sets of server flags, A and B, alternating which goes first each round.
#
#   bench/scripts/busy-ab.sh OUT ROUNDS "A flags" "B flags"
#
# Each run: a fresh `corral serve` with the flags, then corral-bench versus
# (standard client) 1 room x 200 members, 20 senders x 20 Hz, 20 s. Prints
# one line per run: server CPU-s, p99, missing, frames per write. Binaries:
# CORRAL, BENCH (default: built from this checkout into a temp dir); CORRAL_A and CORRAL_B (default: CORRAL)
# compare two builds (then pass "" as both flag sets). Ports 28600-28601 on 127.0.0.1. Hold
# the machine's load lock: flock /tmp/corral-load.lock bench/scripts/busy-ab.sh ...
set -u
OUT=$1; R=$2; A=$3; B=$4
. "$(dirname "$0")/bins.sh"
mkdir -p "$OUT"
CORRAL_A=${CORRAL_A:-$CORRAL}
CORRAL_B=${CORRAL_B:-$CORRAL}
run() {
	local tag=$1 bin=$CORRAL_A; shift
	[ "${tag:0:1}" = B ] && bin=$CORRAL_B
	# shellcheck disable=SC2068
	CORRAL_PUBLISH_RATE=-1 "$bin" serve --insecure-dev --log-level warn \
		--addr 127.0.0.1:28600 --internal-addr 127.0.0.1:28601 $@ >"$OUT/$tag.log" 2>&1 &
	local pid=$!
	sleep 1
	"$BENCH" versus --server corral --url ws://127.0.0.1:28600/ws --api http://127.0.0.1:28601 \
		--pid $pid --workload busy-room --sockets 200 --rooms 1 --senders 20 --rate 400 \
		--duration 20s --quiet --json "$OUT/$tag.json" >"$OUT/$tag.txt" 2>&1
	kill $pid
	wait $pid 2>/dev/null
	echo "$tag $(grep -h 'corral busy-room' "$OUT/$tag.txt") $(grep -ho '[0-9.]* frames per write' "$OUT/$tag.txt")"
}
for r in $(seq "$R"); do
	if [ $((r % 2)) -eq 1 ]; then
		run "A$r" "$A"; run "B$r" "$B"
	else
		run "B$r" "$B"; run "A$r" "$A"
	fi
done
