#!/bin/bash
# usage: scaleout-broadcast.sh CORES(1|2) RATE [OUT]: one edge, one or two cores on one Redis, ports 29xxx.
# Binaries: CORRAL, BENCH (default: built into a temp dir, bins.sh), REDIS_SERVER; records in OUT (default a temp dir).
set -u
N=$1; RATE=$2
. "$(dirname "$0")/bins.sh"
B=${3:-$(mktemp -d -t corral-scaleout.XXXXXX)}; mkdir -p "$B"
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
"$REDIS_SERVER" --port 29379 --bind 127.0.0.1 --save "" --appendonly no --daemonize no >/dev/null 2>&1 & RP=$!
sleep 0.5
"$CORRAL" core --addr 127.0.0.1:29090 --insecure-dev --log-level error --redis redis://127.0.0.1:29379 --redis-prefix b$N$RATE & C1=$!
CORES=http://127.0.0.1:29090
if [ "$N" = 2 ]; then
  "$CORRAL" core --addr 127.0.0.1:29091 --insecure-dev --log-level error --redis redis://127.0.0.1:29379 --redis-prefix b$N$RATE & C2=$!
  CORES=$CORES,http://127.0.0.1:29091
fi
sleep 1
"$CORRAL" edge --addr 127.0.0.1:29080 --core $CORES --insecure-dev --log-level error & E=$!
sleep 1
r0=$(cpu $RP); c0=$(cpu $C1); [ "$N" = 2 ] && c20=$(cpu $C2)
"$BENCH" broadcast --url ws://127.0.0.1:29080/ws --api http://127.0.0.1:29090 --pid $E \
   --sockets 6000 --rooms 60 --rate $RATE --duration 10s --slo 250ms --quiet --json $B/out-$N-$RATE.json 2>&1 | tail -25
echo "redis CPU ticks: $(( $(cpu $RP) - r0 ))  core1 ticks: $(( $(cpu $C1) - c0 ))"
[ "$N" = 2 ] && echo "core2 ticks: $(( $(cpu $C2) - c20 ))"
kill $E; sleep 0.5; kill $C1; [ "$N" = 2 ] && kill $C2; sleep 0.5; kill $RP; wait
