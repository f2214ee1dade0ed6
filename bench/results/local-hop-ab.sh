#!/usr/bin/env bash
# local-hop-ab OLD NEW [REPEATS]: ring-bench all-reduce (float32 sum, in place,
# arena buffers), old tree against new, side by side in one run: for each
# repeat each tree in turn (the first alternates) starts its own daemons with
# its own scripts/ring-local and runs its own ring-bench.  The new tree also
# runs with RING_SHM=0 (its own code, operations over the socket).
# Layouts: 1 daemon x 1 process (the hop alone), 1 daemon x 2 processes,
# 2 daemons x 1 process; sizes 8 B, 1 MiB.
set -euo pipefail
old=$(cd "$1" && pwd) new=$(cd "$2" && pwd) reps=${3:-5}
work=$(mktemp -d /tmp/lh-ab.XXXXXX)
run() {	# label tree daemons procs per_daemon [env...]
	local label=$1 t=$2 d=$3 p=$4 l=$5; shift 5
	local env dir vars size line n w
	env=$("$t/scripts/ring-local" "$d")
	dir=$(sed -n 's/^RING_LOCAL_DIR=//p' <<<"$env")
	mapfile -t vars < <(grep '^RING_' <<<"$env")
	for size in 8 1048576; do
		if ((size == 8)); then n=2000 w=200; else n=100 w=10; fi
		line=$(env "${vars[@]}" "$@" timeout 300 "$t/build/bin/ring-bench" -p "$p" -l "$l" \
			-b "$size" -e "$size" -n "$n" -w "$w" -c 0 | awk '!/^#/ && NF >= 13 { print $10 }')
		echo "$line" >>"$work/$label.${d}x$l.$size"
	done
	"$t/scripts/ring-local" stop "$dir" >/dev/null
}
for ((r = 0; r < reps; r++)); do
	for lay in "1 1 1" "1 2 2" "2 2 1"; do
		read -r -a args <<<"$lay"
		set -- "${args[@]}"
		if ((r % 2 == 0)); then
			run old "$old" "$@"; run new "$new" "$@"; run newsock "$new" "$@" RING_SHM=0
		else
			run newsock "$new" "$@" RING_SHM=0; run new "$new" "$@"; run old "$old" "$@"
		fi
	done
done
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
spread() { sort -g | awk '{ v[NR] = $1 } END { printf "%.0f%%", 100 * (v[NR] - v[1]) / v[int((NR + 1) / 2)] }'; }
echo "| layout | size (B) | main (us) | rings (us) | rings / main | saved (us) | RING_SHM=0 (us) | main's spread |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for lay in 1x1 1x2 2x1; do
	for size in 8 1048576; do
		o=$(median <"$work/old.$lay.$size") n=$(median <"$work/new.$lay.$size")
		s=$(median <"$work/newsock.$lay.$size") sp=$(spread <"$work/old.$lay.$size")
		case $lay in 1x1) name="1 daemon x 1 process" ;; 1x2) name="1 daemon x 2 processes" ;; *) name="2 daemons x 1 process" ;; esac
		awk -v L="$name" -v z="$size" -v o="$o" -v n="$n" -v s="$s" -v sp="$sp" \
			'BEGIN { printf "| %s | %d | %.1f | %.1f | %.3f | %.1f | %.1f | %s |\n", L, z, o, n, n / o, o - n, s, sp }'
	done
done
echo
echo "raw (in-place us per repeat):"
for f in "$work"/*; do echo "$(basename "$f"): $(tr '\n' ' ' <"$f")"; done
rm -rf "$work"
