#!/usr/bin/env bash
# Runs fio job files through strata and through fio's own engines on a plain
# file, side by side (LAB.md §5). For the lab's fio experiment and by hand.
#
#   fio/run-compare.sh -o OUT [-d DATA_DIR] [-e "strata psync io_uring"] [JOB ...]
#
# JOB: names of fio/jobfiles/*.fio without .fio (default: all of them).
# DATA_DIR: where the files and databases go; must be on the disk under test,
#   not tmpfs (default: <repo>/target/fio-compare-data). Emptied after each run
#   unless KEEP_DATA=1.
# Environment (exported to the job files; defaults shown):
#   SIZE=256m RUNTIME=10 DIRECT=1 IODEPTH=1 NUMJOBS=1
#   STRATA_FIO_CONFIG=<strata config file or text>  (optional, for strata runs)
#   FIO_EXTRA="--ramp_time=2 ..."                    (optional, every run)
#   SLICES=1  runs of a job that only reads (rw=read or randread) through the
#             engines in turn, on data laid out once: slice i runs the engines
#             in the order given when i is odd, reversed when it is even, so a
#             drift of the device over the slices favours no engine. With more
#             than one, a first round (not in runs.tsv: <job>/layout/) lays
#             each engine's files out and reads them for RUNTIME=1 without a
#             ramp, so that no counted run follows its own layout's writes.
#             A job that writes runs once per engine, on emptied directories,
#             whatever it says.
#
# Output, in OUT (<run> is <job>, or <job>/slice<i> for the slices of a job
# run more than once):
#   <run>/<engine>.json        fio's own --output-format=json, one per run
#   <run>/strata.stats.json    strata's stats at the end of the strata run
#   runs.tsv                   one line per run: job engine iodepth numjobs size
#                              runtime direct exit_code json_path (relative to
#                              OUT) slice
#   summary.tsv                one line per run: job engine read_iops
#                              read_bw_bytes read_lat_mean_us read_lat_p99_us
#                              write_iops write_bw_bytes write_lat_mean_us
#                              write_lat_p99_us (needs python3; else absent)
# Exit status: non-zero if any run failed (the others still run).
#
# The engines: strata = fio/build/libfio_strata.so (built by fio/build.sh if
# missing); psync and io_uring = fio's engines on plain files fio lays out
# itself. psync is synchronous (queue depth 1 per job); io_uring and strata get
# iodepth=$IODEPTH (strata keeps that many reads in flight in its read queue
# on fio's thread, and group-commits the writes queued together on a writer
# thread).
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
out=""
data="$repo/target/fio-compare-data"
engines="strata psync io_uring"
while getopts "o:d:e:h" opt; do
	case "$opt" in
	o) out="$OPTARG" ;;
	d) data="$OPTARG" ;;
	e) engines="$OPTARG" ;;
	*) sed -n '2,42p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[[ -n "$out" ]] || { echo "run-compare.sh: -o OUT is required" >&2; exit 2; }

export SIZE="${SIZE:-256m}" RUNTIME="${RUNTIME:-10}" DIRECT="${DIRECT:-1}"
export IODEPTH="${IODEPTH:-1}" NUMJOBS="${NUMJOBS:-1}"
slices="${SLICES:-1}"
[[ "$slices" =~ ^[1-9][0-9]*$ ]] || { echo "run-compare.sh: SLICES must be a whole number >= 1, not '$slices'" >&2; exit 2; }
read -r -a extra <<<"${FIO_EXTRA:-}"

jobs=("$@")
if ((${#jobs[@]} == 0)); then
	for f in "$here"/jobfiles/*.fio; do jobs+=("$(basename "$f" .fio)"); done
fi

engine_lib="$here/build/libfio_strata.so"
if [[ " $engines " == *" strata "* && ! -f "$engine_lib" ]]; then
	"$here/build.sh" || exit 1
fi

mkdir -p "$out" "$data"
out="$(cd "$out" && pwd)"
printf 'job\tengine\tiodepth\tnumjobs\tsize\truntime\tdirect\texit_code\tjson\tslice\n' >"$out/runs.tsv"
status=0

# Whether a job file only reads (its rw= is read or randread): its data can
# be laid out once and read by several runs.
reads_only() {
	local rw
	rw="$(sed -n 's/^[[:space:]]*rw[[:space:]]*=[[:space:]]*\([a-z]*\).*/\1/p' "$1" | tail -n 1)"
	[[ "$rw" == read || "$rw" == randread ]]
}

# One fio run of job file $2 (job $1) through engine $3 on directory $4,
# output in OUT/$5, runs.tsv line with slice $6 (slice 0: the layout round,
# not counted: no line, one second of reads, no ramp).
run_one() {
	local job="$1" jobfile="$2" engine="$3" dir="$4" at="$5" slice="$6" rc runtime="$RUNTIME"
	local more=()
	((slice == 0)) && { runtime=1 more=(--ramp_time=0); }
	mkdir -p "$out/$at"
	local args=(--directory="$dir" --output-format=json --output="$out/$at/$engine.json")
	case "$engine" in
	strata)
		args+=(--ioengine="external:$engine_lib" --strata-stats="$out/$at/strata.stats.json")
		[[ -n "${STRATA_FIO_CONFIG:-}" ]] && args+=(--strata-config="$STRATA_FIO_CONFIG")
		;;
	*) args+=(--ioengine="$engine") ;;
	esac
	local which="$job / $engine"
	[[ "$at" == "$job" ]] || which="$job / $engine (slice $slice)"
	((slice == 0)) && which="$job / $engine (layout)"
	echo "run-compare.sh: $which (SIZE=$SIZE RUNTIME=$runtime DIRECT=$DIRECT IODEPTH=$IODEPTH NUMJOBS=$NUMJOBS)"
	# Engine options must follow --ioengine, so the job file comes last.
	(cd "$dir" && RUNTIME="$runtime" fio "${args[@]}" "${extra[@]}" "${more[@]}" "$jobfile")
	rc=$?
	((rc == 0)) || { echo "run-compare.sh: $which failed (exit $rc)" >&2; status=1; }
	((slice == 0)) && return
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$job" "$engine" "$IODEPTH" "$NUMJOBS" "$SIZE" \
		"$RUNTIME" "$DIRECT" "$rc" "$at/$engine.json" "$slice" >>"$out/runs.tsv"
}

read -r -a order <<<"$engines"
for job in "${jobs[@]}"; do
	jobfile="$here/jobfiles/$job.fio"
	[[ -f "$jobfile" ]] || { echo "run-compare.sh: no job file $jobfile" >&2; status=1; continue; }
	n=1
	reads_only "$jobfile" && n="$slices"
	# Every run of a job that writes, and the layout of one that only
	# reads, starts on an emptied directory (a job runs each engine once
	# unless it only reads).
	for engine in "${order[@]}"; do
		rm -rf "${data:?}/$job-$engine" && mkdir -p "$data/$job-$engine"
	done
	if ((n > 1)); then
		for engine in "${order[@]}"; do
			run_one "$job" "$jobfile" "$engine" "$data/$job-$engine" "$job/layout" 0
		done
	fi
	for ((slice = 1; slice <= n; slice++)); do
		at="$job"
		((n == 1)) || at="$job/slice$slice"
		turn=("${order[@]}")
		if ((slice % 2 == 0)); then
			turn=()
			for ((i = ${#order[@]} - 1; i >= 0; i--)); do turn+=("${order[i]}"); done
		fi
		for engine in "${turn[@]}"; do
			run_one "$job" "$jobfile" "$engine" "$data/$job-$engine" "$at" "$slice"
		done
	done
	if [[ "${KEEP_DATA:-0}" != 1 ]]; then
		for engine in "${order[@]}"; do rm -rf "${data:?}/$job-$engine"; done
	fi
done

if command -v python3 >/dev/null; then
	python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, "runs.tsv"))][1:]
cols = ["job", "engine", "slice", "read_iops", "read_bw_bytes", "read_lat_mean_us", "read_lat_p99_us",
        "write_iops", "write_bw_bytes", "write_lat_mean_us", "write_lat_p99_us"]
lines = ["\t".join(cols)]
for job, engine, *_rest, rc, path, slice_ in rows:
    vals = [job, engine, slice_]
    try:
        j = json.load(open(os.path.join(out, path)))["jobs"][0]
        for d in ("read", "write"):
            s = j[d]
            lat = s.get("clat_ns", {})
            p99 = lat.get("percentile", {}).get("99.000000", 0)
            vals += [f"{s['iops']:.0f}", str(s["bw_bytes"]), f"{lat.get('mean', 0) / 1000:.1f}", f"{p99 / 1000:.1f}"]
    except Exception as e:  # a failed run: keep the row, mark it
        vals += ["error"] * 8
    lines.append("\t".join(vals))
open(os.path.join(out, "summary.tsv"), "w").write("\n".join(lines) + "\n")
w = [max(len(l.split("\t")[i]) for l in lines) for i in range(len(cols))]
for l in lines:
    print("  ".join(v.rjust(w[i]) for i, v in enumerate(l.split("\t"))))
PY
fi
exit $status
