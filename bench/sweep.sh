# bench/sweep.sh - bench/peers --sweep, sourced by bench/peers (it uses its
# helpers: bounded, start_ring, stop_ring, median, busbw, ar_factor, ratio, say
# and its variables).  All-reduce, float32 sum, in place, from 8 B to 64 MiB by
# factors of 2, on 2 and 4 loopback daemons: ring-bench, Open MPI's
# MPI_Allreduce over TCP and Gloo's ring, each size in one run of each system,
# the systems alternating from repeat to repeat; with -p (50 by default) also
# ringd with the busy-poll window on, daemons and clients ("ringd poll").  Prints one Markdown table (the
# medians' busbw per size and ringd's ratios, so the crossovers show) and draws
# the ratios with gnuplot.
# shellcheck shell=bash disable=SC2154 # the variables are bench/peers'

sweep_min=8 sweep_max=$((64 * MiB))

# sweep_run SYSTEM N ITERS WARMUP: appends "SIZE TIME_US" rows to $work/sw.N.SYSTEM
sweep_run() {
	local sys=$1 n=$2 it=$3 wu=$4 out=$work/sw.$2.$1 r pid rc=0 store
	local pids=() pre=()
	case $sys in
	ringd | rpoll)
		if [[ $sys == rpoll ]]; then
			[[ -n $poll_dir ]] || return 1
			pre=(env "${poll_env[@]}")
		fi
		bounded "$work/out" "${pre[@]+"${pre[@]}"}" "$rb" -t allreduce -b "$sweep_min" -e "$sweep_max" -f 2 \
			-n "$it" -w "$wu" -p "$n" || return 1
		awk '$1 ~ /^[0-9]+$/ { print $1, $10 }' "$work/out" >>"$out" ;;
	mpi)
		bounded "$work/out" env GLIBC_TUNABLES="$peer_tunables" "$here/bench/mpi-tcp" "$n" \
			"$work/mpi-allreduce" -b "$sweep_min" -e "$sweep_max" -f 2 -n "$it" -w "$wu" ||
			return 1
		awk '$1 ~ /^[0-9]+$/ { print $1, $3 }' "$work/out" >>"$out" ;;
	gloo)
		store=$(mktemp -d "$work/store.XXXXXX")
		for ((r = 0; r < n; r++)); do
			GLIBC_TUNABLES=$peer_tunables timeout -k 5 "$run_limit" \
				"$work/gloo-allreduce" -a "$gloo_algo" --rank "$r" --size "$n" \
				--store "$store" --host 127.0.0.1 -b "$sweep_min" -e "$sweep_max" \
				-f 2 -n "$it" -w "$wu" >"$work/out.$r" 2>>"$work/log" &
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
}

# sweep_median N SYSTEM SIZE: the median time (us) of that size, or nothing
sweep_median() {
	local f=$work/sw.$1.$2
	[[ -s $f ]] || return 0
	awk -v s="$3" '$1 == s { print $2 }' "$f" | sort -g |
		awk '{ a[NR] = $1 } END { if (NR) print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

run_sweep() {
	local n k j sys it wu b r p m g f systems=(ringd mpi gloo) row dat
	((poll_us > 0)) && systems=(ringd rpoll mpi gloo)
	if ((quick)); then it=5 wu=1; else it=20 wu=3; fi
	say "sweep: $repeats repeats, $it iterations per size; load average $load_start"
	for n in 2 4; do
		start_ring "$n"
		start_poll_ring "$n" || true
		for ((k = 0; k < repeats; k++)); do
			for ((j = 0; j < ${#systems[@]}; j++)); do
				sys=${systems[(j + k) % ${#systems[@]}]}
				sweep_run "$sys" "$n" "$it" "$wu" ||
					say "sweep: a $sys run on $n ranks failed (see $work/log)"
			done
		done
		stop_ring
		say "sweep: $n ranks done"
	done
	load_end=$(cut -d' ' -f1-3 /proc/loadavg)

	# the table, and the data file for the plot: size, then per n the ratios
	# ringd/MPI and ringd/Gloo of busbw (= the inverse ratio of the times)
	local table=$work/table data=$work/sweep.dat
	: >"$data"
	{
		printf '# bench/peers --sweep: all-reduce float32 sum in place, busbw GB/s (time us), medians of %d runs%s; %d cores (%s)\n' \
			"$repeats" "$( ((quick)) && echo ' (QUICK)')" "$(nproc)" \
			"$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
		printf '# %s, load average at start %s, at end %s\n' "$(date -u +%F)" "$load_start" "$load_end"
		printf '| size | 2 daemons: ringd | ringd poll | Open MPI | Gloo | ringd/MPI | poll/MPI | ringd/Gloo | 4 daemons: ringd | ringd poll | Open MPI | Gloo | ringd/MPI | poll/MPI | ringd/Gloo |\n'
		printf '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
		for ((b = sweep_min; b <= sweep_max; b *= 2)); do
			row="| $(numfmt --to=iec-i --suffix=B "$b")" dat="$b"
			for n in 2 4; do
				f=$(ar_factor "$n")
				r=$(sweep_median "$n" ringd "$b") m=$(sweep_median "$n" mpi "$b")
				p=$(sweep_median "$n" rpoll "$b") g=$(sweep_median "$n" gloo "$b")
				row+=" | $(sweep_cell "$b" "$r" "$f") | $(sweep_cell "$b" "$p" "$f")"
				row+=" | $(sweep_cell "$b" "$m" "$f") | $(sweep_cell "$b" "$g" "$f")"
				row+=" | ${r:+${m:+$(ratio "$m" "$r")}} | ${p:+${m:+$(ratio "$m" "$p")}}"
				row+=" | ${r:+${g:+$(ratio "$g" "$r")}}"
				dat+=" $(sweep_ratio "$m" "$r") $(sweep_ratio "$g" "$r")"
				dat+=" $(sweep_ratio "$m" "$p")"
			done
			echo "$row |"
			echo "$dat" >>"$data"
		done
	} >"$table"
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

# sweep_plot DATA: ringd's busbw ratios against size, one line per peer and n
sweep_plot() {
	if ! command -v gnuplot >/dev/null 2>&1; then
		say "sweep: no gnuplot (scripts/install-deps --bench): no plot"
		return 0
	fi
	local poll_lines=""
	((poll_us > 0)) && poll_lines=", \\
     \"$1\" using 1:4 with linespoints pt 6 title \"2 daemons, poll $poll_us us, vs Open MPI\", \\
     \"$1\" using 1:7 with linespoints pt 6 title \"4 daemons, poll $poll_us us, vs Open MPI\""
	gnuplot 2>>"$work/log" <<EOF || say "sweep: gnuplot failed (see $work/log)"
set terminal svg size 900,500 dynamic noenhanced font "sans,11"
set output "$plotfile"
set title "ringd all-reduce busbw / peer's busbw (above 1: ringd faster); loopback, $(nproc) cores"
set logscale x 2
set format x "%.0b%B"
set xlabel "message size (float32, in place)"
set ylabel "ratio of busbw"
set logscale y 2
set grid
set key top left
set datafile missing "-"
plot 1 with lines lc rgb "gray" dt 2 title "", \
     "$1" using 1:2 with linespoints title "2 daemons, vs Open MPI", \
     "$1" using 1:3 with linespoints title "2 daemons, vs Gloo", \
     "$1" using 1:5 with linespoints title "4 daemons, vs Open MPI", \
     "$1" using 1:6 with linespoints title "4 daemons, vs Gloo"$poll_lines
EOF
	[[ -s $plotfile ]] && say "sweep: plot in $plotfile"
}
