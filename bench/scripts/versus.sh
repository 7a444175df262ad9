#!/usr/bin/env bash
# versus.sh — issue 19's table: corral against Centrifugo, one sitting.
#
#   bench/scripts/versus.sh [-r ROUNDS] [-d DURATION] [-s SCALE] [-o OUTDIR]
#
# Every row (busy room, broadcast, storm in memory, storm with Redis, idle
# memory per connection) runs ROUNDS times per server, the two servers
# alternating which goes first, each run against a fresh server process
# (and a fresh private redis-server for the Redis row). The load is
# corral-bench versus with the standard client for both; the figure is
# the server's CPU seconds over the measured window, read from
# /proc/<pid>/stat (corral-bench --pid), and the row's p99. It prints the
# medians and the corral/centrifugo ratios (below 1: corral ahead).
#
# Binaries: CORRAL and BENCH (corral-bench; default: built from this
# checkout into a temp dir), CENTRIFUGO (v6.9.1, not part of this
# repository: go install github.com/centrifugal/centrifugo/v6@v6.9.1 puts
# it in $(go env GOPATH)/bin; default: on PATH), REDIS_SERVER. Ports: PORT_BASE (default 28510) to
# PORT_BASE+29 on 127.0.0.1. ROWS (env) runs a subset of the rows; STORM_MODE
# (env) is the storm rows' --storm-mode: herd (the default, W1's real herd:
# every socket reset, each client back on its own timer) or bounded (the old
# storm). Hold the machine's load lock around it:
#   flock /tmp/corral-load.lock bench/scripts/versus.sh -r 3
set -euo pipefail

ROUNDS=3
DURATION=20s
SCALE=1
OUT=""
while getopts "r:d:s:o:h" opt; do
	case $opt in
	r) ROUNDS=$OPTARG ;;
	d) DURATION=$OPTARG ;;
	s) SCALE=$OPTARG ;;
	o) OUT=$OPTARG ;;
	*) sed -n '2,20p' "$0"; exit 2 ;;
	esac
done
OUT=${OUT:-$(mktemp -d -t versus.XXXXXX)}
mkdir -p "$OUT"
. "$(dirname "$0")/bins.sh"
CENTRIFUGO=${CENTRIFUGO:-centrifugo}
PORT_BASE=${PORT_BASE:-28510}
STORM_MODE=${STORM_MODE:-herd}
WS_PORT=$PORT_BASE
API_PORT=$((PORT_BASE + 1))
REDIS_PORT=$((PORT_BASE + 9))
APIKEY=versus-bench-api-key

scale() { python3 -c "import sys; print(max(int(round($1 * $SCALE)), $2))"; }

# row -> corral-bench versus flags (the engine is the row's business too).
row_flags() {
	case $1 in
	busy-room)
		local senders
		senders=$(scale 20 1)
		echo "--workload busy-room --sockets $(scale 200 10) --rooms 1 --senders $senders --rate $((senders * 20)) --duration $DURATION" ;;
	broadcast) echo "--workload broadcast --sockets $(scale 15000 50) --rooms $(scale 100 1) --rate 250 --duration $DURATION" ;;
	storm-memory | storm-redis) echo "--workload storm --storm-mode $STORM_MODE --sockets $(scale 10000 50) --rooms $(scale 100 1) --rate 100 --duration $DURATION" ;;
	idle) echo "--workload idle --sockets $(scale 10000 100) --rooms $(scale 100 1) --settle 10s" ;;
	esac
}

PIDS=()
cleanup() {
	for p in "${PIDS[@]:-}"; do
		[ -n "$p" ] && kill "$p" 2>/dev/null || true
	done
	for p in "${PIDS[@]:-}"; do
		[ -n "$p" ] && wait "$p" 2>/dev/null || true
	done
	PIDS=()
}
trap 'cleanup; bins_cleanup' EXIT


start_redis() {
	"$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >"$OUT/redis.log" 2>&1 &
	PIDS+=($!)
	wait_port "$REDIS_PORT"
}

# start_server SERVER ROW: starts it fresh and sets SERVER_PID and TARGET
# (corral-bench's target flags).
start_server() {
	local redis=""
	if [ "$2" = storm-redis ]; then
		start_redis
		redis=1
	fi
	case $1 in
	corral)
		local extra=()
		[ -n "$redis" ] && extra=(--redis "redis://127.0.0.1:$REDIS_PORT")
		CORRAL_PUBLISH_RATE=-1 "$CORRAL" serve --insecure-dev --log-level warn \
			--addr "127.0.0.1:$WS_PORT" --internal-addr "127.0.0.1:$API_PORT" "${extra[@]}" >>"$OUT/corral.log" 2>&1 &
		SERVER_PID=$!
		TARGET="--url ws://127.0.0.1:$WS_PORT/ws --api http://127.0.0.1:$API_PORT"
		;;
	centrifugo)
		local engine='{"type": "memory"}'
		[ -n "$redis" ] && engine="{\"type\": \"redis\", \"redis\": {\"address\": [\"redis://127.0.0.1:$REDIS_PORT\"]}}"
		cat >"$OUT/centrifugo.json" <<-EOF
			{
			  "log": {"level": "error"},
			  "http_server": {"address": "127.0.0.1", "port": $WS_PORT},
			  "client": {"insecure": true, "allowed_origins": ["*"]},
			  "http_api": {"key": "$APIKEY"},
			  "channel": {"without_namespace": {
			    "allow_subscribe_for_client": true, "allow_publish_for_client": true,
			    "allow_publish_for_subscriber": true,
			    "history_size": 1000, "history_ttl": "300s",
			    "allow_recovery": true, "force_recovery": true
			  }},
			  "engine": $engine
			}
		EOF
		"$CENTRIFUGO" -c "$OUT/centrifugo.json" >>"$OUT/centrifugo.log" 2>&1 &
		SERVER_PID=$!
		TARGET="--url ws://127.0.0.1:$WS_PORT/connection/websocket --api http://127.0.0.1:$WS_PORT --api-key $APIKEY"
		;;
	esac
	PIDS+=("$SERVER_PID")
	wait_port "$WS_PORT"
}

ROWS=${ROWS:-"busy-room broadcast storm-memory storm-redis idle"} # env ROWS: a subset of the rows
for round in $(seq "$ROUNDS"); do
	for row in $ROWS; do
		order="corral centrifugo"
		[ $((round % 2)) -eq 0 ] && order="centrifugo corral"
		for srv in $order; do
			start_server "$srv" "$row"
			out="$OUT/$row-$srv-$round.json"
			# shellcheck disable=SC2046,SC2086
			"$BENCH" versus --server "$srv" $TARGET --pid "$SERVER_PID" --quiet \
				$(row_flags "$row") --json "$out" >"$OUT/$row-$srv-$round.txt" 2>&1 || true
			grep -h "^  $srv " "$OUT/$row-$srv-$round.txt" || tail -3 "$OUT/$row-$srv-$round.txt"
			cleanup
		done
	done
done

python3 - "$OUT" "$ROWS" <<'EOF'
import json, os, statistics, sys
out, rows = sys.argv[1], sys.argv[2].split()
def runs(row, srv):
    rs = []
    for f in sorted(os.listdir(out)):
        if f.startswith(f"{row}-{srv}-") and f.endswith(".json"):
            with open(os.path.join(out, f)) as fh:
                v = json.load(fh).get("versus")
            if v:
                rs.append(v)
    return rs
def med(xs):
    return statistics.median(xs) if xs else float("nan")
def ratio(a, b):
    return a / b if b else float("nan")
print(f"\n{'row':<13} {'figure':<16} {'corral':>10} {'centrifugo':>11} {'ratio':>6}   {'corral p99':>10} {'cf p99':>9} {'ratio':>6}  runs  missing")
for row in rows:
    c, f = runs(row, "corral"), runs(row, "centrifugo")
    if row == "idle":
        name = "KiB/conn"
        cv = med([r.get("perConnBytes", 0) / 1024 for r in c]); fv = med([r.get("perConnBytes", 0) / 1024 for r in f])
    else:
        name = "server CPU-s"
        cv = med([r["serverCpuSeconds"] for r in c]); fv = med([r["serverCpuSeconds"] for r in f])
    cp, fp = med([r["p99Ms"] for r in c]), med([r["p99Ms"] for r in f])
    miss = f"{sum(r['gaps'] + r.get('duplicated', 0) for r in c)}/{sum(r['gaps'] + r.get('duplicated', 0) for r in f)}"
    print(f"{row:<13} {name:<16} {cv:>10.2f} {fv:>11.2f} {ratio(cv, fv):>6.2f}   {cp:>10.1f} {fp:>9.1f} {ratio(cp, fp):>6.2f}  {len(c)}/{len(f)}   {miss}")
    if row.startswith("storm"):
        for srv, rs in (("corral", c), ("centrifugo", f)):
            p50 = med([r.get("recoverP50Ms", 0) for r in rs]); mx = med([r.get("recoverMaxMs", 0) for r in rs])
            back = [f"{r.get('recovered', 0)}/{r['joined']}" for r in rs]
            first = [r.get("firstFailures") or {} for r in rs]
            print(f"  {srv:<11} recover p50 {p50:.0f} ms, max {mx:.0f} ms; recovered {' '.join(back)}; first attempts failed {first}")
print(f"\nmedians of the runs in {out}; ratio = corral / centrifugo (below 1: corral ahead); missing = lost + duplicated")
EOF
