#!/bin/sh
# client-fuzz.sh - builds the client-protocol fuzzer (tests/fuzz/client_fuzz.c)
# with the daemons it drives under AddressSanitizer and UBSan (make ASAN=1
# BUILD=build-asan client-fuzz), then runs it niced for SECONDS (default 60)
# against 1-3 real daemons on loopback.  It prints the seed first and each
# round's seed; on a finding it prints the seed that replays the round, keeps
# the daemons' directory (logs included) and exits 1.
# Usage: tests/fuzz/client-fuzz.sh [SECONDS] [client_fuzz options: --seed S ...]
# Environment: BUILD (build-asan), JOBS (make -j, default: the cores),
# FUZZ_NICE (10), CLIENT_FUZZ_NOBUILD=1 (run what is built).
set -eu

cd "$(dirname "$0")/../.."

SECS=60
case ${1:-} in
[0-9]*) SECS=$1; shift ;;
esac
BUILD=${BUILD:-build-asan}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

if [ "${CLIENT_FUZZ_NOBUILD:-0}" != 1 ]; then
	nice -n "${FUZZ_NICE:-10}" make --no-print-directory -j"$JOBS" WERROR=1 ASAN=1 \
		BUILD="$BUILD" client-fuzz
fi
# LeakSanitizer looks at each daemon when it exits on SIGTERM (a leak fails the
# round); the clients end with _exit, in the middle of things on purpose.
exec nice -n "${FUZZ_NICE:-10}" "$BUILD/tests/fuzz/client_fuzz" --time "$SECS" \
	--bin "$BUILD/bin" "$@"
