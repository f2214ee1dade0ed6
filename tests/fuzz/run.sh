#!/bin/sh
# run.sh - builds the fuzz targets, then runs each for SECONDS (default 20) with
# libFuzzer's -max_total_time, starting from a seed corpus in
# build/fuzz/corpus-NAME/ (kept between runs, so coverage accumulates).  The
# protocol targets write their own seeds (valid encoded frames and messages,
# RINGD_FUZZ_SEEDS=DIR); config and hostfile get a few sample files.  Crashes
# land in build/fuzz/ as crash-*; the script exits non-zero if any target fails.
# Old findings, kept as tests/fuzz/crashers/NAME-*, are replayed first.
# Usage: tests/fuzz/run.sh [SECONDS] [NAME...]
set -eu

cd "$(dirname "$0")/../.."

SECS=${1:-20}
[ $# -gt 0 ] && shift
OUT=${FUZZ_OUT:-build/fuzz}

tests/fuzz/build.sh "$@"

# Text seeds for the parsers that read files.
seed_text() {	# NAME FILE TEXT
	printf '%s' "$3" > "$OUT/corpus-$1/$2"
}
seed_config() {
	seed_text fuzz_config basic 'hosts = /etc/ringd/hosts
rank = 0
listen = 0.0.0.0:18515
cluster = prod
segment = 1M
piece = 64M
log_level = info
'
	seed_text fuzz_config tls '# TLS between peers
tls_cert = /etc/ringd/host.pem
tls_key = /etc/ringd/host.key
tls_ca = /etc/ringd/ca.pem
allow_users = alice, 1000
allow_groups = train
insecure = no
metrics_listen = [::1]:9100
'
	seed_text fuzz_config secret 'secret_file = /etc/ringd/secret
heartbeat_ms = 500
peer_timeout_ms = 5000
window = 8M
sndbuf = 4M
max_clients = 64
foreground = yes
'
}
seed_hostfile() {
	seed_text fuzz_hostfile ringd '# ring order
node1:18515
node2:18515
10.0.0.3:18516
[fe80::1]:18515
'
	seed_text fuzz_hostfile openmpi 'node1 slots=4
node2 slots=4 max_slots=8
# comment
node3
'
	seed_text fuzz_hostfile mlx '[{"ssh": "node1", "ips": ["10.0.0.1"]},
 {"ssh": "node2", "ips": ["10.0.0.2", "10.1.0.2"]}]
'
	seed_text fuzz_hostfile mlx-strings '["127.0.0.1:5000", "127.0.0.1:5001"]'
}

status=0
for bin in "$OUT"/fuzz_*; do
	[ -x "$bin" ] || continue
	name=$(basename "$bin")
	case "$name" in *.*) continue ;; esac
	if [ $# -gt 0 ]; then
		case " $* " in *" $name "*) ;; *) continue ;; esac
	fi
	corpus="$OUT/corpus-$name"
	mkdir -p "$corpus"
	case "$name" in
	fuzz_config) seed_config ;;
	fuzz_hostfile) seed_hostfile ;;
	*) RINGD_FUZZ_SEEDS="$corpus" "$bin" -runs=0 >/dev/null 2>&1 || true ;;
	esac
	# Inputs that once failed this target (tests/fuzz/crashers/NAME-*) must
	# pass before the fuzzing starts: a finding never comes back unseen.
	for old in tests/fuzz/crashers/"$name"-*; do
		[ -f "$old" ] || continue
		if ! "$bin" "$old" > "$OUT/$name.replay.log" 2>&1; then
			echo "  FAIL    $name: old finding $old fails again:" >&2
			tail -n 30 "$OUT/$name.replay.log" >&2
			status=1
		fi
	done
	echo "  RUN     $name for ${SECS}s ($(find "$corpus" -type f | wc -l) inputs in corpus)"
	if ! "$bin" -max_total_time="$SECS" -print_final_stats=1 \
	    -artifact_prefix="$OUT/$name-" "$corpus" > "$OUT/$name.log" 2>&1; then
		echo "  FAIL    $name: see $OUT/$name.log" >&2
		tail -n 30 "$OUT/$name.log" >&2
		status=1
		continue
	fi
	grep -E '^stat::number_of_executed_runs|^#[0-9]+.*DONE' "$OUT/$name.log" | tail -n 2 |
	    sed 's/^/          /'
done
exit $status
