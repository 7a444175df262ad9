#!/bin/bash
# usage: BIN=dir hooks.sh storm|window|chat — issue 20: corral's hooks under load.
#   storm:  storm (CLIENTS sessions, ROOMS rooms) without hooks, with the Join
#           hook at backend latency 0 and LAT, ROUNDS rounds interleaved
#   window: storm with the Join hook at hooks-join-window WINDOWS
#   chat:   chat-burst (SOCKETS, SENDERS, RATE) without hooks, with the
#           Publish hook at latency 0 and LAT, ROUNDS rounds interleaved
# A fresh `corral serve` per run, the backend served by corral-bench
# (--hooks-listen); each run holds the load lock. Prints one table row per run;
# JSON records go to $OUT. Ports 284xx.
set -u
MODE=${1:?usage: hooks.sh storm|window|chat}
. "$(dirname "$0")/bins.sh"    # CORRAL, BENCH: given, or built into a temp dir
OUT=${OUT:-$(mktemp -d -t corral-hooks.XXXXXX)}
ROUNDS=${ROUNDS:-3}
LAT=${LAT:-5ms}
CLIENTS=${CLIENTS:-10000} ROOMS=${ROOMS:-100}
WINDOWS=${WINDOWS:-2ms 10ms 20ms 50ms}
SOCKETS=${SOCKETS:-900} SENDERS=${SENDERS:-900} RATE=${RATE:-200} DURATION=${DURATION:-10s}
LOCK=${LOCK:-/tmp/corral-load.lock}
WS=127.0.0.1:28420 API=127.0.0.1:28421 HK=127.0.0.1:28430
mkdir -p $OUT
# Which rooms go to the hooks is the room classes' (hooks.join, .publish).
printf 'rooms:\n  - name: all\n    match: "*"\n    hooks: {join: true}\n' > $OUT/join-all.yaml
printf 'rooms:\n  - name: all\n    match: "*"\n    hooks: {publish: true}\n' > $OUT/publish-all.yaml

# run NAME "corral flags" "bench flags" ["CORRAL_KEY=value ..."]: one
# server, one workload.
run() {
  local name=$1 sflags=$2 bflags=$3 senv=${4:-}
  flock $LOCK bash -c "set -f
    $senv CORRAL_PUBLISH_RATE=-1 $CORRAL serve --insecure-dev --addr $WS --internal-addr $API --admit-rate -1 \
      --log-level error $sflags & S=\$!
    for i in \$(seq 50); do curl -sf http://$WS/readyz >/dev/null 2>&1 && break; sleep 0.1; done
    $BENCH $bflags --url ws://$WS/ws --api http://$API --pid \$S --quiet --json $OUT/$name.json > $OUT/$name.txt 2>&1
    kill \$S; wait \$S 2>/dev/null"
  python3 - "$OUT/$name.json" "$name" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"{sys.argv[2]:28s} no record: {e}"); sys.exit()
h, d, s = r.get("hooks") or {}, r["delivery"], r.get("server") or {}
if r["scenario"] == "storm":
    st = r["storm"]; w = h.get("window", {})
    print(f"{sys.argv[2]:28s} resumed {st['resumed']:6d}  to-resumed p99 {st['recovery']['p99Ms']:7.0f} ms  "
          f"delivery p99 {r['latency']['p99Ms']:7.0f} ms  server {s.get('cpuSeconds', 0):5.2f} CPU-s  "
          f"join calls {w.get('joinCalls', 0):4d} pairs {w.get('joinPairs', 0):6d} per room {h.get('joinCallsPerResumedRoom', 0):.4f}  "
          f"lost/dup {d['lost']}/{d['duplicated']}")
else:
    a = r.get("acks") or {}
    print(f"{sys.argv[2]:28s} posts {d['published']:6d}  ack p50/p99 {a.get('p50Ms', 0):6.1f}/{a.get('p99Ms', 0):6.1f} ms  "
          f"delivery p50/p99 {r['latency']['p50Ms']:6.1f}/{r['latency']['p99Ms']:6.1f} ms  server {s.get('cpuSeconds', 0):5.2f} CPU-s  "
          f"publish calls/post {h.get('publishPerPost', 0):.3f}  errors {sum(r['errors'].values())}  lost/dup {d['lost']}/{d['duplicated']}")
PY
}

STORM="storm --clients $CLIENTS --rooms $ROOMS --steady 3s --after 3s --drain 5s"
CHAT="chat-burst --sockets $SOCKETS --senders $SENDERS --rate $RATE --ramp-up 0 --duration $DURATION --drain 5s"
case $MODE in
storm)
  for i in $(seq $ROUNDS); do
    run storm-none-$i "" "$STORM"
    run storm-join-0-$i "--hooks-url http://$HK --config $OUT/join-all.yaml" "$STORM --hooks-listen $HK"
    run storm-join-$LAT-$i "--hooks-url http://$HK --config $OUT/join-all.yaml" "$STORM --hooks-listen $HK --hooks-latency $LAT"
  done ;;
window)
  for i in $(seq $ROUNDS); do
    for w in $WINDOWS; do
      run storm-window-$w-$i "--hooks-url http://$HK --config $OUT/join-all.yaml" "$STORM --hooks-listen $HK --hooks-latency ${WLAT:-0s}" "CORRAL_HOOKS_JOIN_WINDOW=$w"
    done
  done ;;
chat)
  for i in $(seq $ROUNDS); do
    run chat-none-$i "" "$CHAT"
    run chat-publish-0-$i "--hooks-url http://$HK --config $OUT/publish-all.yaml" "$CHAT --hooks-listen $HK"
    run chat-publish-$LAT-$i "--hooks-url http://$HK --config $OUT/publish-all.yaml" "$CHAT --hooks-listen $HK --hooks-latency $LAT"
  done ;;
*) echo "usage: hooks.sh storm|window|chat" >&2; exit 2 ;;
esac
