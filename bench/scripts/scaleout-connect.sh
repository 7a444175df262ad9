#!/bin/bash
# usage: scaleout-connect.sh [OUT]: three edges, one core, three generators of 15,000 sockets; ports 29xxx.
# Binaries: CORRAL, BENCH (default: built into a temp dir, bins.sh); records in OUT (default a temp dir).
set -u
. "$(dirname "$0")/bins.sh"
B=${1:-$(mktemp -d -t corral-scaleout.XXXXXX)}; mkdir -p "$B"
"$CORRAL" core --addr 127.0.0.1:29190 --insecure-dev --log-level error & C=$!
sleep 1
EP=()
for i in 1 2 3; do
  "$CORRAL" edge --addr 127.0.0.1:2918$i --core http://127.0.0.1:29190 --insecure-dev --log-level error --admit-rate -1 & EP+=($!)
done
sleep 1
for i in 1 2 3; do
  "$BENCH" connect --url ws://127.0.0.1:2918$i/ws --api http://127.0.0.1:29190 --pid ${EP[$((i-1))]} \
     --sockets 15000 --rooms 100 --rate 800 --hold 30s --slo 250ms --quiet --json $B/conn-$i.json > $B/conn-$i.txt 2>&1 &
done
peak=0
for s in $(seq 1 70); do
  sleep 1
  tot=0
  for i in 1 2 3; do
    v=$(curl -s http://127.0.0.1:2918$i/metrics | awk '$1=="corral_edge_connections"{print $2}')
    tot=$((tot + ${v:-0}))
  done
  [ $tot -gt $peak ] && peak=$tot
  echo "t=$s open=$tot"
done > $B/conn-peak.txt
echo "peak concurrent connections over 3 edges: $peak"
wait $(jobs -p | tail -3) 2>/dev/null
kill ${EP[@]} $C; wait
echo "records in $B"
