# bins.sh — sourced by the scripts beside it: the binaries they run, and
# the two port helpers they share (wait_port, free_port).
#
# CORRAL and BENCH (corral-bench) name binaries to use; left unset, both are
# built from this checkout into a temp dir that is removed when the shell
# exits (the caller's own EXIT trap should call bins_cleanup too). No script
# needs anything on PATH or at a fixed location besides go, curl, python3
# and, for the Redis rows, redis-server (REDIS_SERVER).
bins_dir=""
bins_cleanup() { [ -n "$bins_dir" ] && rm -rf "$bins_dir"; bins_dir=""; }
if [ -z "${CORRAL:-}" ] || [ -z "${BENCH:-}" ]; then
	bins_dir=$(mktemp -d -t corral-bins.XXXXXX)
	trap bins_cleanup EXIT
	(cd "$(dirname "${BASH_SOURCE[0]}")/../.." &&
		go build -o "$bins_dir/corral" ./cmd/corral &&
		go build -o "$bins_dir/corral-bench" ./cmd/corral-bench) || {
		echo "bins.sh: go build failed" >&2
		exit 1
	}
	CORRAL=${CORRAL:-$bins_dir/corral}
	BENCH=${BENCH:-$bins_dir/corral-bench}
fi
REDIS_SERVER=${REDIS_SERVER:-redis-server}

# wait_port waits (at most 10 s) until something listens on 127.0.0.1:$1.
wait_port() {
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "$(basename "$0"): nothing listens on 127.0.0.1:$1" >&2
	return 1
}

# free_port prints a TCP port of 127.0.0.1 that nothing listens on now.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
