#!/bin/sh
# build.sh - builds every libFuzzer target tests/fuzz/fuzz_*.c into build/fuzz/,
# with AddressSanitizer and UndefinedBehaviorSanitizer (any UB aborts, so the
# fuzzer reports it).  Protocol targets link the proto module; the targets of the
# daemon's parsers (fuzz_config, fuzz_hostfile) also link ringd/config.c and
# ringd/hostfile.c and jansson, and are skipped with a note while those sources
# are missing.  Usage: tests/fuzz/build.sh [NAME...]   (default: every target)
# Environment: FUZZ_CC (default clang-14, else clang), FUZZ_OUT (build/fuzz).
set -eu

cd "$(dirname "$0")/../.."

CC=${FUZZ_CC:-$(command -v clang-14 || command -v clang || true)}
OUT=${FUZZ_OUT:-build/fuzz}
if [ -z "$CC" ]; then
	echo "build.sh: clang not found (set FUZZ_CC)" >&2
	exit 1
fi
# The escaped quotes are meant: word splitting of $CFLAGS below passes
# -DRING_VERSION_STRING="fuzz" on, a string literal for the macro.
# shellcheck disable=SC2089,SC2090
CFLAGS="-std=gnu11 -g -O1 -fno-omit-frame-pointer -D_GNU_SOURCE -I. \
	-DRING_VERSION_STRING=\"fuzz\" -Wall -Wextra -Wno-unused-parameter \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
JANSSON=$(pkg-config --libs jansson 2>/dev/null || echo -ljansson)

mkdir -p "$OUT"

if [ $# -gt 0 ]; then
	targets=$(for n in "$@"; do echo "tests/fuzz/${n%.c}.c"; done)
else
	targets=$(ls tests/fuzz/fuzz_*.c)
fi

for src in $targets; do
	name=$(basename "$src" .c)
	extra=""
	libs=""
	case "$name" in
	fuzz_frame|fuzz_msg)
		;;
	*)
		# The daemon's text parsers: config needs the hostfile, the hostfile
		# reads MLX's JSON with jansson.
		missing=""
		for f in ringd/config.c ringd/hostfile.c; do
			if [ -f "$f" ]; then
				extra="$extra $f"
			else
				missing="$missing $f"
			fi
		done
		if [ -n "$missing" ]; then
			echo "  SKIP    $name (missing:$missing)"
			continue
		fi
		libs="$JANSSON"
		;;
	esac
	echo "  FUZZ    $OUT/$name"
	# shellcheck disable=SC2086,SC2090
	$CC $CFLAGS -o "$OUT/$name" "$src" proto/*.c $extra $libs -lm
done
