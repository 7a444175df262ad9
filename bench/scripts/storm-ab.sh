#!/usr/bin/env bash
# storm-ab.sh — issue 19's storm rows against two corral builds, A and B,
# alternating which goes first each round.
#
#   env CORRAL_A=... CORRAL_B=... bench/scripts/storm-ab.sh OUT ROUNDS storm-redis|storm-memory
#
# Each run: a fresh `corral serve` (for storm-redis on a fresh private
# redis-server, port 28619), then corral-bench versus (standard client)
# --workload storm: 10,000 sockets in 100 rooms, 100 publishes/s, 20 s,
# every socket reset (RST) at a third and back with a new session and a
# positioned join, each client on W1's own timer (--storm-mode herd; env
# STORM_MODE=bounded for the old storm). Prints one line per run, then per
# build the median server CPU-s (herd: from the reset until all are back;
# bounded: to the end of publishing) and p99 (reset to recovered). BENCH: corral-bench (default: built into a temp dir). Ports 28610-28611 and
# 28619 on 127.0.0.1. ALLOCS=1: the server's /metrics is read every 0.5 s
# (bytes and objects allocated, GC cycles, upgrades accepted) into
# OUT/*.allocs; the summary adds, per build, what the server allocated in
# the herd's reconnect window and in the whole run (storm-allocs.py OUT
# says how, and prints it again). Each run's line ends with the
# connections the kernel dropped from a full accept queue meanwhile (Linux's
# ListenOverflows, every socket of the machine). Hold the machine's load lock:
#   flock /tmp/corral-load.lock env CORRAL_A=... CORRAL_B=... bench/scripts/storm-ab.sh ...
set -u
OUT=$1; R=$2; ROW=$3
. "$(dirname "$0")/bins.sh"
mkdir -p "$OUT"
# listen_overflows: the kernel's count of connections dropped from a full
# accept queue (Linux, all sockets; 0 elsewhere), read around each run.
listen_overflows() {
	awk '/^TcpExt:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "ListenOverflows") c = i; h = 1 } else print $c + 0 }' \
		/proc/net/netstat 2>/dev/null || echo 0
}
run() { # binary label round
	local extra=() RP=""
	if [ "$ROW" = storm-redis ]; then
		redis-server --port 28619 --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >/dev/null 2>&1 &
		RP=$!
		sleep 0.4
		extra=(--redis redis://127.0.0.1:28619)
	fi
	CORRAL_PUBLISH_RATE=-1 "$1" serve --insecure-dev --log-level warn \
		--addr 127.0.0.1:28610 --internal-addr 127.0.0.1:28611 "${extra[@]}" >"$OUT/$2-$3.log" 2>&1 &
	local SP=$! AP=""
	sleep 0.8
	if [ "${ALLOCS:-}" = 1 ]; then
		(while kill -0 $SP 2>/dev/null; do
			echo "$(date +%s.%N) $(curl -s http://127.0.0.1:28611/metrics | awk '
				/^go_memstats_alloc_bytes_total /{a=$2} /^go_memstats_mallocs_total /{m=$2}
				/^go_gc_duration_seconds_count /{g=$2} /^corral_edge_connections_accepted_total /{c=$2}
				END{print a, m, g, c}')"
			sleep 0.5
		done >"$OUT/$2-$3.allocs") &
		AP=$!
	fi
	local lo0; lo0=$(listen_overflows)
	"$BENCH" versus --server corral --url ws://127.0.0.1:28610/ws --api http://127.0.0.1:28611 --pid $SP --quiet \
		--workload storm --storm-mode "${STORM_MODE:-herd}" --sockets 10000 --rooms 100 --rate 100 --duration 20s --json "$OUT/$2-$3.json" >"$OUT/$2-$3.txt" 2>&1
	[ -n "$AP" ] && kill $AP 2>/dev/null
	echo "$2 $3: $(grep -h 'corral storm' "$OUT/$2-$3.txt"); listen-queue overflows $(($(listen_overflows) - lo0))"
	kill $SP $RP 2>/dev/null
	wait $SP $RP 2>/dev/null
}
for r in $(seq "$R"); do
	if [ $((r % 2)) -eq 1 ]; then
		run "$CORRAL_A" A "$r"; run "$CORRAL_B" B "$r"
	else
		run "$CORRAL_B" B "$r"; run "$CORRAL_A" A "$r"
	fi
done
python3 - "$OUT" <<'PY'
import json, os, statistics, sys
d = sys.argv[1]
for k in "AB":
    v = [json.load(open(os.path.join(d, f)))["versus"] for f in sorted(os.listdir(d)) if f.startswith(k + "-") and f.endswith(".json")]
    c = [x["serverCpuSeconds"] for x in v]; p = [x["p99Ms"] for x in v]
    print(k, "CPU-s median %.2f %s  p99 median %.0f ms  missing %d" % (statistics.median(c), [round(x, 2) for x in c], statistics.median(p), sum(x["gaps"] for x in v)))
    if any("recoverP50Ms" in x for x in v):
        print(k, "recover p50 median %.0f ms %s  p99 %s  recovered %d of %d  duplicated %d" % (
            statistics.median(x.get("recoverP50Ms", 0) for x in v), [round(x.get("recoverP50Ms", 0)) for x in v],
            [round(x) for x in p], sum(x.get("recovered", 0) for x in v), sum(x.get("cut", 0) for x in v),
            sum(x.get("duplicated", 0) for x in v)))
PY
if [ "${ALLOCS:-}" = 1 ]; then python3 "$(dirname "$0")/storm-allocs.py" "$OUT"; fi
