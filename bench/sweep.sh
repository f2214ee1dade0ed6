# bench/sweep.sh - bench/peers --sweep (bench/sweep runs it), sourced by
# bench/peers: it uses its helpers (bounded, start_ring, stop_ring, busbw,
# ar_factor, ratio, say) and its variables.  All-reduce, float32 sum, in place,
# from 8 B to 256 MiB by factors of 4, ringd with its defaults against Open MPI
# and Gloo, in four layouts: 2 and 4 daemons with one rank each (Open MPI over
# TCP on loopback, as everywhere here), and 1 daemon with 2 and 4 local ranks
# (Open MPI over its shared-memory transport, vader: what it would use on one
# host; Gloo has only TCP).  Every size of a layout runs in one run of each
# system, the systems alternating from repeat to repeat; each figure is the
# median of the repeats.  Prints one Markdown table per layout (busbw and time
# per system, ringd's ratios of busbw: above 1, ringd is faster) and draws
# ringd/Open MPI for every layout with gnuplot.
# shellcheck shell=bash disable=SC2154 # the variables are bench/peers'

# Sizes 8 B .. 128 MiB by 4, then 256 MiB; in three bands of iterations, so
# that a small size is timed over many operations and a large one in seconds.
sweep_sizes=()
for ((b = 8; b <= 128 * MiB; b *= 4)); do sweep_sizes+=("$b"); done
sweep_sizes+=($((256 * MiB)))
# band: "FIRST LAST FACTOR ITERS WARMUP" (the quick run divides the iterations)
sweep_bands=("8 32768 4 400 40" "131072 8388608 4 40 4" "33554432 134217728 4 8 1"
	"268435456 268435456 2 5 1")
# layouts: "DAEMONS LOCAL_RANKS"; SWEEP_LAYOUTS overrides ("2x1 1x2")
sweep_layouts=("2 1" "4 1" "1 2" "1 4")
if [[ -n ${SWEEP_LAYOUTS:-} ]]; then
	sweep_layouts=()
	for l in $SWEEP_LAYOUTS; do sweep_layouts+=("${l%x*} ${l#*x}"); done
fi

# sweep_mpi_cmd N: sets mpi_cmd to the launcher of N ranks: Open MPI over TCP
# when the ranks are on several daemons' "hosts", over shared memory (vader)
# when the layout is one host
sweep_mpi_cmd() {
	if ((sweep_local)); then
		mpi_cmd=(env GLIBC_TUNABLES="$peer_tunables" mpirun --allow-run-as-root --oversubscribe
			--bind-to none -x GLIBC_TUNABLES --mca pml ob1 --mca btl "vader,self" -n "$1")
	else
		mpi_cmd=(env GLIBC_TUNABLES="$peer_tunables" "$here/bench/mpi-tcp" "$1")
	fi
}

# sweep_run SYSTEM N LOCAL: one run of every band; appends "SIZE TIME_US" rows
# to $work/sw.LAYOUT.SYSTEM
sweep_run() {
	local sys=$1 n=$2 l=$3 out=$work/sw.$(($2 / $3))x$3.$1 band b e f it wu r pid rc store mpi_cmd
	for band in "${sweep_bands[@]}"; do
		read -r b e f it wu <<<"$band"
		if ((quick)); then it=$(((it + 3) / 4)) wu=$(((wu + 3) / 4)); fi
		rc=0
		case $sys in
		ringd)
			bounded "$work/out" env RING_ARENA_MB=$((3 * e / MiB + 64)) "$rb" -t allreduce \
				-b "$b" -e "$e" -f "$f" -n "$it" -w "$wu" -p "$n" -l "$l" || return 1
			awk '$1 ~ /^[0-9]+$/ { print $1, $10 }' "$work/out" >>"$out" ;;
		mpi)
			sweep_mpi_cmd "$n"
			bounded "$work/out" "${mpi_cmd[@]}" "$work/mpi-allreduce" -b "$b" -e "$e" -f "$f" -n "$it" -w "$wu" || return 1
			awk '$1 ~ /^[0-9]+$/ { print $1, $3 }' "$work/out" >>"$out" ;;
		gloo)
			local pids=()
			store=$(mktemp -d "$work/store.XXXXXX")
			for ((r = 0; r < n; r++)); do
				GLIBC_TUNABLES=$peer_tunables timeout -k 5 "$run_limit" \
					"$work/gloo-allreduce" -a "$gloo_algo" --rank "$r" --size "$n" \
					--store "$store" --host 127.0.0.1 -b "$b" -e "$e" -f "$f" \
					-n "$it" -w "$wu" >"$work/out.$r" 2>>"$work/log" &
				pids+=("$!")
				live+=("$!")
			done
			for pid in "${pids[@]}"; do
				wait "$pid" || rc=1
			done
			live=()
			rm -rf -- "$store"
			((rc == 0)) || return 1
			awk '$1 ~ /^[0-9]+$/ { print $1, $3 }' "$work/out.0" >>"$out" ;;
		esac
	done
}

# sweep_median LAYOUT SYSTEM SIZE: the median time (us) of that size, or nothing
sweep_median() {
	local f=$work/sw.$1.$2
	[[ -s $f ]] || return 0
	awk -v s="$3" '$1 == s { print $2 }' "$f" | sort -g |
		awk '{ a[NR] = $1 } END { if (NR) print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# sweep_spread LAYOUT SYSTEM SIZE: (max - min) / median of its repeats, in %
sweep_spread() {
	local f=$work/sw.$1.$2 m
	m=$(sweep_median "$1" "$2" "$3")
	[[ -n $m ]] || return 0
	awk -v s="$3" '$1 == s { print $2 }' "$f" | sort -g |
		awk -v m="$m" 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.0f%%", 100 * (hi - lo) / m }'
}

run_sweep() {
	local lay d l n k j sys systems=(ringd mpi gloo) table=$work/table data=$work/sweep.dat
	local b f r m g row dat mpi_name
	say "sweep: $repeats repeats of each system per layout; load average $load_start"
	for lay in "${sweep_layouts[@]}"; do
		read -r d l <<<"$lay"
		n=$((d * l)) sweep_local=$((d == 1))
		start_ring "$d"
		for ((k = 0; k < repeats; k++)); do
			for ((j = 0; j < ${#systems[@]}; j++)); do
				sys=${systems[(j + k) % ${#systems[@]}]}
				sweep_run "$sys" "$n" "$l" ||
					say "sweep: a $sys run on ${d}x$l failed (see $work/log)"
			done
		done
		stop_ring
		say "sweep: ${d}x$l done"
	done
	load_end=$(cut -d' ' -f1-3 /proc/loadavg)

	: >"$data"
	{
		printf '# bench/sweep: all-reduce float32 sum in place, ringd with its defaults; busbw GB/s (time us), medians of %d runs%s; %d cores (%s)\n' \
			"$repeats" "$( ((quick)) && echo ' (QUICK)')" "$(nproc)" \
			"$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
		printf '# %s, load average at start %s, at end %s; spread: (max - min) / median of the repeats\n' \
			"$(date -u +%F)" "$load_start" "$load_end"
		for lay in "${sweep_layouts[@]}"; do
			read -r d l <<<"$lay"
			n=$((d * l)) f=$(ar_factor $((d * l)))
			mpi_name="Open MPI (TCP)"
			((d == 1)) && mpi_name="Open MPI (shared memory)"
			printf '\n%d daemon(s) x %d rank(s):\n\n' "$d" "$l"
			printf '| size | ringd | %s | Gloo | ringd/MPI | ringd/Gloo | spread ringd, MPI |\n' "$mpi_name"
			printf '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n'
			for b in "${sweep_sizes[@]}"; do
				r=$(sweep_median "${d}x$l" ringd "$b") m=$(sweep_median "${d}x$l" mpi "$b")
				g=$(sweep_median "${d}x$l" gloo "$b")
				row="| $(numfmt --to=iec-i --suffix=B "$b") | $(sweep_cell "$b" "$r" "$f")"
				row+=" | $(sweep_cell "$b" "$m" "$f") | $(sweep_cell "$b" "$g" "$f")"
				row+=" | $(sweep_ratio "$m" "$r") | $(sweep_ratio "$g" "$r")"
				row+=" | $(sweep_spread "${d}x$l" ringd "$b"), $(sweep_spread "${d}x$l" mpi "$b") |"
				echo "$row"
			done
		done
	} >"$table"
	# the data file: size, then per layout ringd/MPI and ringd/Gloo
	for b in "${sweep_sizes[@]}"; do
		dat=$b
		for lay in "${sweep_layouts[@]}"; do
			read -r d l <<<"$lay"
			r=$(sweep_median "${d}x$l" ringd "$b") m=$(sweep_median "${d}x$l" mpi "$b")
			g=$(sweep_median "${d}x$l" gloo "$b")
			dat+=" $(sweep_ratio "$m" "$r") $(sweep_ratio "$g" "$r")"
		done
		echo "$dat" >>"$data"
	done
	tee ${outfile:+"$outfile"} <"$table"
	cp "$data" "${plotfile%.svg}.dat" 2>/dev/null || true
	sweep_plot "$data"
}

# sweep_ratio PEER_TIME RINGD_TIME: ringd's busbw over the peer's, or - (which
# the plot reads as a missing point) when a time is missing
sweep_ratio() {
	if [[ -n $1 && -n $2 ]]; then ratio "$1" "$2"; else printf -- '-'; fi
}

# sweep_cell BYTES TIME FACTOR: "busbw (time)", or - when there is no time
sweep_cell() {
	if [[ -n $2 ]]; then
		printf '%s (%s)' "$(busbw "$1" "$2" "$3")" "$2"
	else
		printf -- '-'
	fi
}

# sweep_plot DATA: ringd's busbw over Open MPI's against size, a line per layout
sweep_plot() {
	if ! command -v gnuplot >/dev/null 2>&1; then
		say "sweep: no gnuplot (scripts/install-deps --bench): no plot"
		return 0
	fi
	local lines="" i=0 lay d l peer
	for lay in "${sweep_layouts[@]}"; do
		read -r d l <<<"$lay"
		peer="Open MPI over TCP"
		((d == 1)) && peer="Open MPI over shared memory"
		lines+=", \"$1\" using 1:$((2 + 2 * i)) with linespoints title \"$d daemon(s) x $l, vs $peer\""
		lines+=", \"$1\" using 1:$((3 + 2 * i)) with linespoints dt 3 title \"$d daemon(s) x $l, vs Gloo\""
		i=$((i + 1))
	done
	gnuplot 2>>"$work/log" <<EOF || say "sweep: gnuplot failed (see $work/log)"
set terminal svg size 1000,560 dynamic noenhanced font "sans,11"
set output "$plotfile"
set title "ringd (defaults) all-reduce busbw / peer's busbw (above 1: ringd faster); loopback, $(nproc) cores"
set logscale x 2
set format x "%.0b%B"
set xlabel "message size (float32, in place)"
set ylabel "ratio of busbw"
set logscale y 2
set grid
set key outside right
set datafile missing "-"
plot 1 with lines lc rgb "gray" dt 2 title ""$lines
EOF
	[[ -s $plotfile ]] && say "sweep: plot in $plotfile"
}
