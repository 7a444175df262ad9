#!/bin/bash
# usage: outbox-w4.sh — issue 40: W4 through the Postgres outbox, beside the
# dual-write baseline with a crash injected (docs/OUTBOX.md, BENCHMARKS.md).
# Builds corral and corral-bench into $BIN (default: a temp dir), starts a private PostgreSQL (initdb
# + pg_ctl in a temp dir on $PGPORT, as the postgres user when run as root),
# then per mode a fresh `corral serve --outbox` and one
# `corral-bench outbox-burst` run, each holding the load lock. Prints each
# run's headline; JSON records go to $OUT. Ports 285xx.
set -eu
# A member gets 180 x 6,000 = 1.08 million deliveries/s to read at W4's
# figures: on a small machine they arrive late, so the run waits $DRAIN for
# them (and for the outbox to empty) before it judges.
B=${BIN:-$(mktemp -d -t outbox-w4.XXXXXX)}
OUT=${OUT:-$B/outbox-out}
ROUNDS=${ROUNDS:-1}
SOCKETS=${SOCKETS:-6000} RATE=${RATE:-180} DURATION=${DURATION:-10s} POOL=${POOL:-10} DRAIN=${DRAIN:-60s}
LOCK=${LOCK:-/tmp/corral-load.lock}
WS=127.0.0.1:28520 API=127.0.0.1:28521 PGPORT=${PGPORT:-28550}
PGBIN=${PGBIN:-$(dirname "$(command -v initdb 2>/dev/null || ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)")}
mkdir -p "$B" "$OUT"
cd "$(dirname "$0")/../.."
go build -o "$B/corral" ./cmd/corral
go build -o "$B/corral-bench" ./cmd/corral-bench

PGDIR=$(mktemp -d /tmp/outbox-w4-pg.XXXXXX)
as=()
if [ "$(id -u)" = 0 ]; then chown postgres "$PGDIR"; as=(runuser -u postgres --); fi
trap '"${as[@]}" "$PGBIN/pg_ctl" -D "$PGDIR/data" -m immediate stop >/dev/null 2>&1; rm -rf "$PGDIR"' EXIT
"${as[@]}" "$PGBIN/initdb" -D "$PGDIR/data" -U corral --auth=trust -E UTF8 --locale=C >/dev/null
"${as[@]}" "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -w \
  -o "-p $PGPORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=''" start >/dev/null
DB="postgres://corral@127.0.0.1:$PGPORT/postgres?sslmode=disable"

# run NAME MODE: one server, one workload.
run() {
  local name=$1 mode=$2
  flock "$LOCK" bash -c "
    CORRAL_PUBLISH_RATE=-1 CORRAL_HISTORY=100000 $B/corral serve --insecure-dev --addr $WS --internal-addr $API --admit-rate -1 \
      --log-level error --outbox '$DB' & S=\$!
    for i in \$(seq 50); do curl -sf http://$WS/readyz >/dev/null 2>&1 && break; sleep 0.1; done
    $B/corral-bench outbox-burst --mode $mode --db '$DB' --sockets $SOCKETS --rate $RATE --duration $DURATION \
      --pool $POOL --drain $DRAIN --url ws://$WS/ws --api http://$API --pid \$S --quiet --json $OUT/$name.json > $OUT/$name.txt 2>&1
    kill \$S; wait \$S 2>/dev/null"
  python3 -c 'import json,sys; print(sys.argv[2]+": "+json.load(open(sys.argv[1]))["headline"])' "$OUT/$name.json" "$name" \
    || { echo "$name: no record"; tail -5 "$OUT/$name.txt"; }
}

for i in $(seq "$ROUNDS"); do
  run "outbox-$i" outbox
  run "dual-write-$i" dual-write
done
