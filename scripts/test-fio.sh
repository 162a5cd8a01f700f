#!/usr/bin/env bash
# Tests strata's C API and its fio ioengine (issue 5). Called by scripts/test.sh;
# runs alone too. Debian bookworm, as root: installs fio and the build
# dependencies itself (apt-get). Needs cargo (rustup) on PATH.
#
#   scripts/test-fio.sh            # prints "fio tests: N passed, M failed"
#
# What it checks:
#  - libstrata_ffi.so exports exactly the functions strata.h declares;
#  - a C program exercises the C API (put/get/delete/batch/errors/reopen);
#  - fio jobs through strata with verify=crc32c (write, read back, verify):
#    sequential and random, numjobs=2, iodepth>1 (the writer's group commit;
#    reads through the read queue), multi-block I/O units, fsync=N, jobs in
#    threads sharing one database, verify in a second fio run (persistence),
#    read jobs (layout), and a negative control (verifying an empty database
#    must fail, so a silent verifier cannot pass);
#  - malformed strata configs make fio exit non-zero with a clear message.
# Test data lives under target/ (the project disk: tmpfs refuses O_DIRECT).
# Environment: CARGO_TARGET_DIR is honoured; FIO_TEST_KEEP=1 keeps the data.
set -uo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
unset STRATA_CONFIG # the tests set their own
cd "$repo"

log() { echo "test-fio: $*"; }

# ---- install ---------------------------------------------------------------
if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
	log "installing fio and build dependencies (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends \
		fio dpkg-dev gcc make libc6-dev libaio-dev zlib1g-dev binutils python3 ca-certificates >/dev/null; }; then
		log "apt-get install failed"
		echo "fio tests: 0 passed, 1 failed"
		exit 1
	fi
fi
for tool in fio gcc cargo nm; do
	if ! command -v "$tool" >/dev/null; then
		log "$tool is not installed"
		echo "fio tests: 0 passed, 1 failed"
		exit 1
	fi
done

# ---- build -----------------------------------------------------------------
target="${CARGO_TARGET_DIR:-$repo/target}"
mkdir -p "$repo/target"
if ! fio/build.sh; then
	log "building the engine failed"
	echo "fio tests: 0 passed, 1 failed"
	exit 1
fi
engine="$repo/fio/build/libfio_strata.so"
ffi_dir="$repo/fio/build" # build.sh copies libstrata_ffi.so next to the engine

work="$(mktemp -d -p "$repo/target" fio-test.XXXXXX)"
cleanup() { [[ "${FIO_TEST_KEEP:-0}" == 1 ]] || rm -rf "$work"; }
trap cleanup EXIT
log "test data in $work"

passed=0
failed=0
failed_names=()

# run_test NAME FUNCTION: the function returns 0 on success; its output goes to
# $work/NAME.log and is shown when it fails.
run_test() {
	local name="$1" fn="$2" out="$work/$1.log"
	mkdir -p "$work/$name"
	if (cd "$work/$name" && "$fn" "$work/$name") >"$out" 2>&1; then
		passed=$((passed + 1))
		log "ok   $name"
	else
		failed=$((failed + 1))
		failed_names+=("$name")
		log "FAIL $name"
		sed 's/^/    | /' "$out" | tail -40
	fi
}

# fio through strata; the engine options come after --ioengine.
sfio() {
	fio --ioengine="external:$engine" --verify_state_save=0 "$@"
}

# ---- C API -------------------------------------------------------------------
t_header_matches_exports() {
	local header_fns so_fns
	header_fns="$(grep -oE '\bstrata_[a-z_]+\(' "$repo/crates/strata-ffi/include/strata.h" |
		tr -d '(' | sort -u)"
	so_fns="$(nm -D --defined-only "$ffi_dir/libstrata_ffi.so" | awk '$2 == "T" {print $3}' |
		grep '^strata_' | sort -u)"
	echo "header: $(echo "$header_fns" | wc -l) functions; library: $(echo "$so_fns" | wc -l)"
	diff <(echo "$header_fns") <(echo "$so_fns")
}

t_c_api() {
	local dir="$1"
	gcc -std=c11 -Wall -Wextra -Werror -I"$repo/crates/strata-ffi/include" \
		"$repo/crates/strata-ffi/tests/c/api_test.c" -L"$ffi_dir" -lstrata_ffi \
		-Wl,-rpath,"$ffi_dir" -o "$dir/api_test" || return 1
	mkdir -p "$dir/db"
	"$dir/api_test" "$dir/db"
}

# ---- fio: verified writes ------------------------------------------------------
t_seq_write_verify_numjobs2() {
	sfio --name=seqv --directory="$1" --rw=write --bs=64k --size=16m --numjobs=2 \
		--direct=1 --verify=crc32c --do_verify=1 --group_reporting
}

t_rand_write_verify_numjobs2() {
	sfio --name=randv --directory="$1" --rw=randwrite --bs=4k --size=8m --numjobs=2 \
		--direct=1 --verify=crc32c --do_verify=1 --group_reporting
}

# iodepth > 1: the worker pool, group-committed write batches, reaping.
t_rand_write_verify_qd16_numjobs2() {
	sfio --name=qd --directory="$1" --rw=randwrite --bs=4k --size=16m --numjobs=2 --iodepth=16 \
		--direct=1 --verify=crc32c --do_verify=1 --group_reporting
}

# Verify reads at iodepth 16 go through the read queue (one get per block,
# reaped in ->getevents): I/O units of 1 to 128 blocks, so an io_u's blocks
# complete out of order and several io_us' gets are in flight together. Small
# layers, so that most reads go to layer files (the queue's io_uring reads).
t_multiblock_verify_qd16_read_queue() {
	local dir="$1" config='{"layer_size_bytes_max": "4MiB"}'
	sfio --name=mgv --directory="$dir" --rw=randwrite --bsrange=4k-512k --size=32m --iodepth=16 \
		--direct=1 --verify=crc32c --do_verify=1 --strata-config="$config" || return 1
	sfio --name=mgv --directory="$dir" --rw=randwrite --bsrange=4k-512k --size=32m --iodepth=16 \
		--direct=1 --verify=crc32c --verify_only \
		--strata-config="$config" --strata-stats="$dir/stats.json" || return 1
	python3 - "$dir/stats.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
reads = s["io"].get("delta", {}).get("read", {}).get("ops", 0)
print(f"delta layers={s['delta_layers']} delta reads={reads}")
assert s["delta_layers"] >= 2 and reads > 0, "the verify reads did not reach layer files"
EOF
}

# At iodepth 1 reads go through the read queue too (submitted and reaped in
# ->queue): multi-block units from small layers, verified. Then a timed read
# job with a ramp: the engine writes the stats of the ramp's end beside the
# job's, and the counted part made gets of its own.
t_multiblock_verify_qd1_read_queue_ramp_stats() {
	local dir="$1" config='{"layer_size_bytes_max": "4MiB"}'
	sfio --name=q1 --directory="$dir" --rw=randwrite --bsrange=4k-512k --size=32m --iodepth=1 \
		--direct=1 --verify=crc32c --do_verify=1 --strata-config="$config" || return 1
	sfio --name=q1 --directory="$dir" --rw=randread --bs=4k --size=32m --iodepth=1 --direct=1 \
		--time_based --runtime=1 --ramp_time=1 \
		--strata-config="$config" --strata-stats="$dir/stats.json" || return 1
	python3 - "$dir/stats.json" "$dir/stats.ramp.json" <<'EOF'
import json, sys
end, ramp = (json.load(open(p)) for p in sys.argv[1:3])
print(f"gets: ramp {ramp['point_lookups']}, end {end['point_lookups']}")
assert 0 < ramp["point_lookups"] < end["point_lookups"], "no gets counted after the ramp"
EOF
}

# A sync waits for every write in flight; with reads and writes mixed.
t_randrw_fsync_verify_qd8() {
	sfio --name=qdf --directory="$1" --rw=randrw --bs=4k --size=8m --iodepth=8 --fsync=4 \
		--direct=1 --verify=crc32c --do_verify=1 --output-format=json --output="$1/out.json" || return 1
	python3 - "$1/out.json" <<'EOF'
import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0]
w, s = job["write"]["total_ios"], job["sync"]["total_ios"]
print(f"writes={w} syncs={s} reads={job['read']['total_ios']} error={job['error']}")
# fio skips a sync point when the sync has to wait (FIO_Q_BUSY) while
# writes go on; most are kept.
assert job["error"] == 0 and w > 0 and s >= w // 8
EOF
}

# I/O units of several blocks (block size = smallest bs = 4 KiB).
t_multiblock_write_verify() {
	sfio --name=multiv --directory="$1" --rw=randwrite --bsrange=4k-64k --size=16m \
		--direct=1 --verify=crc32c --do_verify=1
}

t_randrw_verify_numjobs3() {
	sfio --name=rwv --directory="$1" --rw=randrw --bs=8k --size=8m --numjobs=3 \
		--direct=0 --verify=crc32c --do_verify=1 --group_reporting
}

# fsync=8: every 8 writes a DDIR_SYNC, i.e. strata_sync; fio counts them.
t_fsync_write_verify() {
	sfio --name=fsyncv --directory="$1" --rw=randwrite --bs=4k --size=4m --fsync=8 \
		--direct=1 --verify=crc32c --do_verify=1 --output-format=json --output="$1/out.json" || return 1
	python3 - "$1/out.json" <<'EOF'
import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0]
syncs = job["sync"]["total_ios"]
writes = job["write"]["total_ios"]
print(f"writes={writes} syncs={syncs} error={job['error']}")
assert job["error"] == 0
assert writes == 1024, writes
assert syncs >= writes // 8 - 1, "fsync=8 should issue a sync every 8 writes"
EOF
}

# thread=1: jobs of one process share one database (disrespect-fio-files +
# the config's path), each in its own key space.
t_threads_share_one_db() {
	local dir="$1"
	printf '{"path": "%s/shared.strata"}\n' "$dir" >"$dir/config.json"
	sfio --name=thr --directory="$dir" --thread --numjobs=2 --rw=randwrite --bs=4k --size=4m --iodepth=4 \
		--direct=1 --verify=crc32c --do_verify=1 --group_reporting \
		--strata-config="$dir/config.json" --disrespect-fio-files || return 1
	[[ -d "$dir/shared.strata" ]] || { echo "no database at the config's path"; return 1; }
	! ls -d "$dir"/thr.*.strata 2>/dev/null || { echo "a database next to fio's files"; return 1; }
}

# Write in one fio run, verify in another: the data survives close and reopen.
t_verify_in_second_run() {
	local dir="$1"
	sfio --name=persist --directory="$dir" --rw=randwrite --bs=4k --size=8m --direct=1 \
		--verify=crc32c --do_verify=0 || return 1
	sfio --name=persist --directory="$dir" --rw=randwrite --bs=4k --size=8m --direct=1 \
		--verify=crc32c --verify_only
}

# Negative control: the same verification against an empty database must fail
# (reads of never-written blocks return zeros, which fail the header check).
t_verify_of_empty_db_fails() {
	local dir="$1"
	mkdir -p "$dir/a"
	sfio --name=persist --directory="$dir/a" --rw=randwrite --bs=4k --size=2m --direct=1 \
		--verify=crc32c --do_verify=0 --create_serialize=0 2>&1 || return 1
	mkdir -p "$dir/b"
	if sfio --name=persist --directory="$dir/b" --rw=randwrite --bs=4k --size=2m --direct=1 \
		--verify=crc32c --verify_only --verify_fatal=1 >"$dir/neg.out" 2>&1; then
		cat "$dir/neg.out"
		echo "verify_only against an empty database passed: verification is not checking anything"
		return 1
	fi
	# fio read zeros where its header should be: the failure is the verifier's.
	grep "verify: bad magic header" "$dir/neg.out" | head -3 | grep -q .
}

# A read job lays its file out first (as fio does for plain files), once.
t_read_job_lays_out_once() {
	local dir="$1"
	sfio --name=rd --directory="$dir" --rw=randread --bs=4k --size=8m --direct=1 >"$dir/1.out" 2>&1 ||
		return 1
	grep "laying out" "$dir/1.out" || { echo "no layout on the first read job"; return 1; }
	sfio --name=rd --directory="$dir" --rw=read --bs=64k --size=8m --direct=1 >"$dir/2.out" 2>&1 ||
		return 1
	! grep "laying out" "$dir/2.out" || { echo "laid out twice"; return 1; }
	grep -q "READ: .*io=8192KiB" "$dir/2.out" || { cat "$dir/2.out"; return 1; }
}

t_every_jobfile_parses_and_runs() {
	local dir="$1" j
	export SIZE=4m RUNTIME=1 DIRECT=1 IODEPTH=1 NUMJOBS=1
	for j in "$repo"/fio/jobfiles/*.fio; do
		echo "== $(basename "$j")"
		sfio --directory="$dir" "$j" --output-format=terse >/dev/null || { echo "$j failed"; return 1; }
	done
}

# ---- fio: configuration errors ----------------------------------------------------
# expect_config_error DIR CONFIG PATTERN: fio exits non-zero and says PATTERN.
expect_config_error() {
	local dir="$1" config="$2" pattern="$3"
	if sfio --name=bad --directory="$dir" --rw=write --bs=4k --size=1m \
		--strata-config="$config" >"$dir/out" 2>&1; then
		cat "$dir/out"
		echo "fio exited 0 with a malformed config"
		return 1
	fi
	cat "$dir/out"
	grep -q "fio: strata: bad configuration: .*$pattern" "$dir/out"
}

t_malformed_json_config_fails() {
	expect_config_error "$1" '{"io_mode": "direct-rw",' "malformed JSON"
}

t_unknown_config_key_fails() {
	printf 'io_mode = "direct-rw"\nwriter_bufer_bytes = 65536\n' >"$1/c.toml"
	expect_config_error "$1" "$1/c.toml" "unknown key \`writer_bufer_bytes\`"
}

t_bad_config_value_fails() {
	expect_config_error "$1" '{"io_engine": "warp"}' "warp"
}

t_missing_config_file_fails() {
	expect_config_error "$1" "$1/no-such.toml" "cannot read"
}

t_bad_strata_config_env_fails() {
	local dir="$1"
	if STRATA_CONFIG='{"fallback_to_buffered": "maybe"}' sfio --name=bad --directory="$dir" \
		--rw=write --bs=4k --size=1m >"$dir/out" 2>&1; then
		cat "$dir/out"
		return 1
	fi
	cat "$dir/out"
	grep -q 'bad configuration: .*STRATA_CONFIG.*fallback_to_buffered' "$dir/out"
}

run_test header_matches_exports t_header_matches_exports
run_test c_api t_c_api
run_test seq_write_verify_numjobs2 t_seq_write_verify_numjobs2
run_test rand_write_verify_numjobs2 t_rand_write_verify_numjobs2
run_test rand_write_verify_qd16_numjobs2 t_rand_write_verify_qd16_numjobs2
run_test multiblock_verify_qd16_read_queue t_multiblock_verify_qd16_read_queue
run_test multiblock_verify_qd1_read_queue_ramp_stats t_multiblock_verify_qd1_read_queue_ramp_stats
run_test randrw_fsync_verify_qd8 t_randrw_fsync_verify_qd8
run_test multiblock_write_verify t_multiblock_write_verify
run_test randrw_verify_numjobs3 t_randrw_verify_numjobs3
run_test fsync_write_verify t_fsync_write_verify
run_test threads_share_one_db t_threads_share_one_db
run_test verify_in_second_run t_verify_in_second_run
run_test verify_of_empty_db_fails t_verify_of_empty_db_fails
run_test read_job_lays_out_once t_read_job_lays_out_once
run_test every_jobfile_parses_and_runs t_every_jobfile_parses_and_runs
run_test malformed_json_config_fails t_malformed_json_config_fails
run_test unknown_config_key_fails t_unknown_config_key_fails
run_test bad_config_value_fails t_bad_config_value_fails
run_test missing_config_file_fails t_missing_config_file_fails
run_test bad_strata_config_env_fails t_bad_strata_config_env_fails

if ((failed)); then
	log "failed: ${failed_names[*]}"
fi
echo "fio tests: $passed passed, $failed failed"
((failed == 0))
