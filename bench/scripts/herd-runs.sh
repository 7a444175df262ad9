#!/usr/bin/env bash
# herd-runs.sh — issue 34 item 2: N consecutive herd runs, each must recover
# every client and deliver nothing late once the herd is over.
#
#   bench/scripts/herd-runs.sh N [--redis] [OUT]
#
# Each run: a fresh `corral serve` (with --redis on a fresh private
# redis-server, on a free port), then corral-bench versus (standard client)
# --workload storm --storm-mode herd: 10,000 sockets in 100 rooms, 100
# publishes/s, 20 s, every socket reset (RST) at a third and each client
# back on W1's own timer, rejoining from its last offset; publishing goes
# on AFTER (default 10s) once the last is back (--after: on a loaded
# machine the herd can outlast the 20 s, and leave no post-herd message
# to measure). Prints one line
# per run: recovered of joined, lost, duplicated, the post-herd delivery
# (every read of a message published after the last client came back,
# publish to read) p99.9 and max, and the reads later than 250 ms; then a
# verdict: N of N recovered 10,000 with nothing late, or which runs failed
# and how. A failed run's OUT/run-K.metrics holds the server's corral_edge_*
# metrics (queued bytes and frames, frames per flush, slow consumers),
# read every 0.5 s with a timestamp, to tell when and where it was late.
#
# Binaries: CORRAL and BENCH (default: built from this checkout, bins.sh),
# REDIS_SERVER. SOCKETS (default 10000) scales a run down for a smoke test;
# PUBLISHERS (default 32) is the server-API publishes in flight at most: a
# publish that waits for one counts its wait as lateness.
# Ports: free ones on 127.0.0.1. OUT defaults to a temp dir. It holds no
# lock itself: run it under the machine's load lock,
#   flock /tmp/corral-load.lock bench/scripts/herd-runs.sh 20
set -u
N=${1:?usage: herd-runs.sh N [--redis] [OUT]}
shift
REDIS=""
if [ "${1:-}" = --redis ]; then
	REDIS=1
	shift
fi
OUT=${1:-$(mktemp -d -t herd-runs.XXXXXX)}
SOCKETS=${SOCKETS:-10000}
AFTER=${AFTER:-10s}
PUBLISHERS=${PUBLISHERS:-32}
mkdir -p "$OUT"
. "$(dirname "$0")/bins.sh"

PIDS=()
cleanup() {
	for p in "${PIDS[@]:-}"; do
		[ -n "$p" ] && kill "$p" 2>/dev/null
	done
	for p in "${PIDS[@]:-}"; do
		[ -n "$p" ] && wait "$p" 2>/dev/null
	done
	PIDS=()
}
trap 'cleanup; bins_cleanup' EXIT


run() { # k
	local k=$1 extra=() ws api
	cleanup
	if [ -n "$REDIS" ]; then
		local rp
		rp=$(free_port)
		"$REDIS_SERVER" --port "$rp" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >"$OUT/redis-$k.log" 2>&1 &
		PIDS+=($!)
		wait_port "$rp" || return 1
		extra=(--redis "redis://127.0.0.1:$rp")
	fi
	ws=$(free_port)
	api=$(free_port)
	CORRAL_PUBLISH_RATE=-1 "$CORRAL" serve --insecure-dev --log-level warn \
		--addr "127.0.0.1:$ws" --internal-addr "127.0.0.1:$api" "${extra[@]}" >"$OUT/corral-$k.log" 2>&1 &
	local sp=$!
	PIDS+=("$sp")
	wait_port "$ws" || return 1
	wait_port "$api" || return 1
	(while kill -0 "$sp" 2>/dev/null; do
		curl -s "http://127.0.0.1:$api/metrics" | awk -v t="$(date +%s.%N)" '/^corral_edge_/ { print t, $0 }'
		sleep 0.5
	done >"$OUT/run-$k.metrics") &
	PIDS+=($!)
	"$BENCH" versus --server corral --url "ws://127.0.0.1:$ws/ws" --api "http://127.0.0.1:$api" --pid "$sp" --quiet \
		--workload storm --storm-mode herd --sockets "$SOCKETS" --rooms 100 --rate 100 --duration 20s --after "$AFTER" --publishers "$PUBLISHERS" \
		--json "$OUT/run-$k.json" >"$OUT/run-$k.txt" 2>&1
	cleanup
}

for k in $(seq "$N"); do
	run "$k"
	python3 - "$OUT" "$k" "$SOCKETS" <<'PY'
import json, os, sys
out, k, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    v = json.load(open(os.path.join(out, f"run-{k}.json")))["versus"]
except Exception as e:
    print(f"run {k}: no result ({e}); see run-{k}.txt")
    sys.exit(0)
p = v.get("postHerd") or {}
l = p.get("latency") or {}
line = (f"run {k}: recovered {v.get('recovered', 0)} of {want} (joined {v['joined']}, reset {v.get('cut', 0)}), "
        f"lost {v['gaps']}, dup {v.get('duplicated', 0)}; post-herd n={l.get('count', 0)} "
        f"p99.9 {l.get('p999Ms', 0):.1f} ms max {l.get('maxMs', 0):.1f} ms, late {p.get('late', 0)}")
if p.get("worst"):
    line += f" ({p.get('lateMembers', 0)} members; worst: {p['worst']})"
print(line)
PY
done

python3 - "$OUT" "$N" "$SOCKETS" <<'PY'
import json, os, sys
out, n, want = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
bad = []
for k in range(1, n + 1):
    try:
        v = json.load(open(os.path.join(out, f"run-{k}.json")))["versus"]
    except Exception:
        bad.append(f"run {k}: no result")
        continue
    p = v.get("postHerd") or {}
    why = []
    if v.get("recovered", 0) != want:
        why.append(f"recovered {v.get('recovered', 0)} of {want}")
    if v["gaps"] or v.get("duplicated", 0):
        why.append(f"lost {v['gaps']}, dup {v.get('duplicated', 0)}")
    if not p:
        why.append("no post-herd figures (the herd never ended)")
    elif p.get("late", 0):
        why.append(f"{p['late']} reads later than {p.get('lateMs', 250):.0f} ms")
    if why:
        bad.append(f"run {k}: " + "; ".join(why))
if not bad:
    print(f"verdict: {n} of {n} runs recovered {want} of {want} with nothing lost, duplicated or late (results in {out})")
else:
    print(f"verdict: {n - len(bad)} of {n} runs passed; failed: " + " | ".join(bad) + f" (results in {out})")
    sys.exit(1)
PY
