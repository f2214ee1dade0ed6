#!/bin/sh
# tsan.sh - the data path's threads under ThreadSanitizer (issue 39): ringd
# built with TSAN=1 in a tree of its own (build-tsan), driven by the plain
# build's test programs: tests/it_streams (every stream and thread setting, a
# stream killed, a worker's write that lingers) and a short chaos soak
# (tests/it_chaos) whose six daemons run threads = 2 and streams = 4 with 4 KiB
# segments, so their DATA is striped over streams the workers write.  The
# daemons are what has threads (the engine, its workers, the control
# thread); a Criterion program cannot run under TSan (its runner maps an
# arena at addresses TSan keeps for itself), and libring and the tests run
# one thread each.  Each daemon writes a report to the run's directory
# (TSAN_OPTIONS log_path); any report fails the run, and is printed.  No
# suppression: libevent is not instrumented, but its locks are pthread
# mutexes, which TSan intercepts (libevent_pthreads binds to libtsan's
# pthread_mutex_lock), so evbuffers locked for two threads order as they
# should.  Takes about 4 minutes on 2 cores.
# Usage: tests/tsan.sh [CHAOS_SECONDS]   (45 by default; 0: no chaos soak)
# Environment: JOBS (make -j, default: the cores), TSAN_KEEP=1 (keep the
# directory with the reports).
set -eu

cd "$(dirname "$0")/.."

CHAOS_S=${1:-45}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

make --no-print-directory -j"$JOBS" WERROR=1 TSAN=1 BUILD=build-tsan build-tsan/bin/ringd \
	>/dev/null
make --no-print-directory -j"$JOBS" WERROR=1 build/bin/ringctl build/tests/it_streams \
	build/tests/it_chaos >/dev/null

dir=$(mktemp -d "${TMPDIR:-/tmp}/tsan.XXXXXX")
if [ "${TSAN_KEEP:-0}" != 1 ]; then
	trap 'rm -rf "$dir"' EXIT
fi
RINGD=$(pwd)/build-tsan/bin/ringd
TSAN_OPTIONS="log_path=$dir/report ${TSAN_OPTIONS:-}"
export RINGD TSAN_OPTIONS

failed=0
# one test at a time: the killed stream's test bounds how soon its operation
# fails, and two clusters of TSan daemons on 2 cores are slow enough
RUN_TESTS_ARGS=-j1 scripts/run-tests build/tests/it_streams || failed=1
if [ "$CHAOS_S" -gt 0 ]; then
	RING_CHAOS_S=$CHAOS_S RUN_TESTS_TIMEOUT=$((CHAOS_S + 300)) \
		RING_CHAOS_ARGS="--insecure yes --peer-timeout-ms 1000 --heartbeat-ms 200 \
--evict-after-ms 1500 --rejoin-after-ms 500 --threads 2 --streams 4 --segment 4K" \
		scripts/run-tests build/tests/it_chaos || failed=1
fi

reports=$(find "$dir" -name 'report.*' | sort)
if [ -n "$reports" ]; then
	for r in $reports; do
		echo "---- ThreadSanitizer: $r"
		cat "$r"
	done
	echo "tsan.sh: $(echo "$reports" | wc -l) daemon(s) reported data races (above)" >&2
	exit 1
fi
echo "tsan.sh: no ThreadSanitizer report"
exit "$failed"
