#!/bin/bash
# connect-100k.sh — W3's connection load at 100,000 (issue 34 item 5) on one
# machine whose processes may each hold only ~20,000 open files:
#
#   1. HELD connections (100,000) at RATE new connections/s (1,000), spread
#      over EDGES `corral edge` processes (one `corral-bench connect` each),
#      all on one `corral core` (in memory); each generator keeps its
#      clients alive with pings (the server's heartbeat);
#   2. held HOLD (60 s);
#   3. then W3's broadcast (BRATE=200 publishes/s x 150 members = 30,000
#      messages/s) to BSOCKETS (15,000) more clients on one more edge, while
#      the HELD connections stay open (they are held until the broadcast is
#      over, and then probed: every room of every generator gets messages).
#
# usage: connect-100k.sh [OUT]   (OUT: where records go; default a temp dir)
# env:   CORRAL, BENCH  binaries (default: built from this checkout into a
#                       temp dir, bins.sh); HELD RATE HOLD EDGES BSOCKETS
#                       BRATE BDUR; PORT_BASE (default 27100: below the
#                       ephemeral range, so no client socket takes a port)
# Run it under the load lock:  flock /tmp/corral-load.lock bench/scripts/connect-100k.sh
# A full run takes about 5 minutes; every wait below is bounded.
set -euo pipefail

HELD=${HELD:-100000}; RATE=${RATE:-1000}; HOLD=${HOLD:-60}
EDGES=${EDGES:-6}; BSOCKETS=${BSOCKETS:-15000}; BRATE=${BRATE:-200}; BDUR=${BDUR:-20}
PORT_BASE=${PORT_BASE:-27100}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$(mktemp -d -t corral-100k.XXXXXX)}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
. "$HERE/bins.sh"

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  bins_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
rss_kb() { awk '$1=="VmRSS:"{print $2}' "/proc/$1/status"; }
wait_port() { # bounded: 10 s
  for _ in $(seq 1 100); do
    curl -s -o /dev/null "http://127.0.0.1:$1/metrics" && return 0
    sleep 0.1
  done
  echo "port $1 did not open" >&2; return 1
}

CORE_PORT=$((PORT_BASE + 90))
"$CORRAL" core --addr 127.0.0.1:$CORE_PORT --insecure-dev --log-level error 2>"$OUT/core.log" &
CORE=$!; PIDS+=($CORE)
wait_port $CORE_PORT
API=http://127.0.0.1:$CORE_PORT

# Edge 0 takes the broadcast's clients; edges 1..EDGES the held ones.
EPIDS=()
for i in $(seq 0 "$EDGES"); do
  "$CORRAL" edge --addr 127.0.0.1:$((PORT_BASE + i)) --core $API --insecure-dev \
    --log-level error --admit-rate -1 2>"$OUT/edge-$i.log" &
  EPIDS+=($!); PIDS+=($!)
done
for i in $(seq 0 "$EDGES"); do wait_port $((PORT_BASE + i)); done

# Server CPU and RSS of the core and every edge, before the load.
snap() {
  local t=0 r=0 p
  for p in $CORE "${EPIDS[@]}"; do
    t=$((t + $(ticks "$p"))); r=$((r + $(rss_kb "$p")))
  done
  echo "$t $r"
}
read -r T0 R0 < <(snap)
HZ=$(getconf CLK_TCK)

# 1-2: the held connections, one generator per edge, one after the other,
# each at the full RATE for its PER connections: the edges see RATE new
# connections/s for HELD/RATE seconds. In turn rather than all at once
# because corral-bench connect starts its clients' pings only when its
# last dial is done, and a client silent for two heartbeats (50 s) is
# closed (CODE_HEARTBEAT_TIMEOUT): all six at RATE/6 would dial for 100 s
# and lose their first 50 s of connections. Each generator holds until
# the broadcast is over (its connect at 2,000/s, its run, its drain of up
# to 10 s, and a margin for a slow start).
PER=$(( (HELD + EDGES - 1) / EDGES ))
DIAL=$(( (HELD + RATE - 1) / RATE ))
END=$((DIAL + HOLD + BSOCKETS / 2000 + BDUR + 60))  # seconds after START
count() {
  local tot=0 v i
  for i in $(seq 1 "$EDGES"); do
    v=$(curl -s --max-time 2 http://127.0.0.1:$((PORT_BASE + i))/metrics | awk '$1=="corral_edge_connections"{print $2}' || true)
    tot=$((tot + ${v:-0}))
  done
  echo $tot
}
GPIDS=()
START=$SECONDS
# Open connections over the held edges every ~2 s (reading six /metrics
# at 16,000 connections each takes a while), until the end (bounded).
( for _ in $(seq 1 $((END / 2 + 5))); do
    [ $((SECONDS - START)) -ge $END ] && break
    echo "t=$((SECONDS - START)) open=$(count)"; sleep 2
  done >"$OUT/open.txt" ) &
PIDS+=($!)
for i in $(seq 1 "$EDGES"); do
  at=$(awk -v i="$i" -v p="$PER" -v r="$RATE" 'BEGIN{printf "%d", (i-1)*p/r}')
  left=$((START + at - SECONDS)); [ $left -gt 0 ] && sleep $left
  hold=$((END - at - PER / RATE))
  "$BENCH" connect --url ws://127.0.0.1:$((PORT_BASE + i))/ws --api $API --pid "${EPIDS[$i]}" \
    --sockets $PER --rate "$RATE" --hold ${hold}s --slo 100ms --quiet \
    --json "$OUT/connect-$i.json" >"$OUT/connect-$i.txt" 2>&1 &
  GPIDS+=($!); PIDS+=($!)
done
left=$((START + DIAL + 3 - SECONDS)); [ $left -gt 0 ] && sleep $left
read -r T1 R1 < <(snap)
OPEN1=$(count)
echo "after dialing: $OPEN1 open" | tee "$OUT/summary.txt"
left=$((START + DIAL + HOLD - SECONDS)); [ $left -gt 0 ] && sleep $left
read -r T2 R2 < <(snap)
OPEN2=$(count)

# 3: W3's broadcast on edge 0 while the held connections stay open.
"$BENCH" broadcast --url ws://127.0.0.1:$PORT_BASE/ws --api $API --pid "${EPIDS[0]}" \
  --sockets "$BSOCKETS" --rooms 100 --rate "$BRATE" --duration ${BDUR}s --slo 250ms --quiet \
  --json "$OUT/broadcast.json" >"$OUT/broadcast.txt" 2>&1 || echo "broadcast: exit $?" >>"$OUT/summary.txt"
OPEN3=$(count)

# The connect generators probe and exit; bounded by their own horizon.
status=0
for p in "${GPIDS[@]}"; do wait "$p" || status=1; done

{
  echo "held $HELD over $EDGES edges at $RATE/s, hold ${HOLD}s; broadcast $BSOCKETS sockets at $BRATE publishes/s for ${BDUR}s"
  echo "open after dialing: $OPEN1; after the hold: $OPEN2; after the broadcast: $OPEN3 (held edges only)"
  awk -v a="$T0" -v b="$T1" -v c="$T2" -v hz="$HZ" -v r0="$R0" -v r2="$R2" -v n="$OPEN2" 'BEGIN{
    printf "server CPU (core + edges): %.1f CPU-s dialing, %.1f CPU-s holding\n", (b-a)/hz, (c-b)/hz;
    printf "server RSS (core + edges): %.0f MiB more after the hold: %.1f KiB per held connection\n", (r2-r0)/1024, (r2-r0)/n }'
  echo "generators exit: $status (1: a generator reported a failure; see connect-*.txt)"
} | tee -a "$OUT/summary.txt"
python3 "$HERE/connect-100k-summary.py" "$OUT" | tee -a "$OUT/summary.txt"
echo "records in $OUT; $((SECONDS - START)) s from the first dial"
