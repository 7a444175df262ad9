# bins.sh — sourced by the scripts beside it: the binaries they run.
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
