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
#
# Output, in OUT:
#   <job>/<engine>.json        fio's own --output-format=json, one per run
#   <job>/strata.stats.json    strata's stats at the end of the strata run
#   runs.tsv                   one line per run: job engine iodepth numjobs size
#                              runtime direct exit_code json_path (relative to OUT)
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
	*) sed -n '2,35p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[[ -n "$out" ]] || { echo "run-compare.sh: -o OUT is required" >&2; exit 2; }

export SIZE="${SIZE:-256m}" RUNTIME="${RUNTIME:-10}" DIRECT="${DIRECT:-1}"
export IODEPTH="${IODEPTH:-1}" NUMJOBS="${NUMJOBS:-1}"
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
printf 'job\tengine\tiodepth\tnumjobs\tsize\truntime\tdirect\texit_code\tjson\n' >"$out/runs.tsv"
status=0

for job in "${jobs[@]}"; do
	jobfile="$here/jobfiles/$job.fio"
	[[ -f "$jobfile" ]] || { echo "run-compare.sh: no job file $jobfile" >&2; status=1; continue; }
	mkdir -p "$out/$job"
	for engine in $engines; do
		dir="$data/$job-$engine"
		rm -rf "$dir" && mkdir -p "$dir"
		args=(--directory="$dir" --output-format=json --output="$out/$job/$engine.json")
		case "$engine" in
		strata)
			args+=(--ioengine="external:$engine_lib" --strata-stats="$out/$job/strata.stats.json")
			[[ -n "${STRATA_FIO_CONFIG:-}" ]] && args+=(--strata-config="$STRATA_FIO_CONFIG")
			;;
		*) args+=(--ioengine="$engine") ;;
		esac
		echo "run-compare.sh: $job / $engine (SIZE=$SIZE RUNTIME=$RUNTIME DIRECT=$DIRECT IODEPTH=$IODEPTH NUMJOBS=$NUMJOBS)"
		# Engine options must follow --ioengine, so the job file comes last.
		(cd "$dir" && fio "${args[@]}" "${extra[@]}" "$jobfile")
		rc=$?
		((rc == 0)) || { echo "run-compare.sh: $job / $engine failed (exit $rc)" >&2; status=1; }
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$job" "$engine" "$IODEPTH" "$NUMJOBS" "$SIZE" \
			"$RUNTIME" "$DIRECT" "$rc" "$job/$engine.json" >>"$out/runs.tsv"
		[[ "${KEEP_DATA:-0}" == 1 ]] || rm -rf "$dir"
	done
done

if command -v python3 >/dev/null; then
	python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, "runs.tsv"))][1:]
cols = ["job", "engine", "read_iops", "read_bw_bytes", "read_lat_mean_us", "read_lat_p99_us",
        "write_iops", "write_bw_bytes", "write_lat_mean_us", "write_lat_p99_us"]
lines = ["\t".join(cols)]
for job, engine, *_rest, rc, path in rows:
    vals = [job, engine]
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
