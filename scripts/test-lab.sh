#!/usr/bin/env bash
# Tests the strata lab end to end (issue 4). Called by scripts/test.sh; runs
# alone too. Debian bookworm, as root: installs what it needs itself
# (apt-get: chromium for the browser check, clang + libclang-dev for the
# rocksdb crate's bindgen, fio for the device line's cross-check and the fio
# experiment, dpkg-dev + gcc + make + fio's configure deps to build strata's
# fio ioengine, python3).
# Needs cargo (rustup) on PATH.
#
#   scripts/test-lab.sh            # prints "lab tests: N passed, M failed"
#
# What it checks:
#  - the README's main-job command, read from README.md and run exactly as
#    written from the repository root with default paths (it installs what
#    it needs, builds RocksDB and every peer, runs the quick lab): exit 0,
#    the report's path printed, results under ./lab-results, ./lab-data
#    left empty, no backtrace;
#  - the lab's unit tests with the RocksDB peer compiled in;
#  - expected failures (unknown experiment or engine, a data directory that
#    cannot be made, a bad key in `strata db`) print one line and no
#    backtrace, even with RUST_BACKTRACE=1;
#  - the results JSON: every experiment with the machine and the device
#    line; the device's random-read latency for 3 methods × 2 files at
#    every size from 1 B to 4 MiB (>= 3 repeats), its fits and the 4 KiB
#    line (and fio's); ingest and bulk with all five engines and each engine's
#    durability settings; every row's figure the median of >= 3 samples;
#    no ingest sample from less than ~1 s of work; the fio experiment ran
#    (fio is installed here): every job file through strata, psync and
#    io_uring at queue depth 1, the iodepth-16 random pair through strata
#    and io_uring, with IOPS and the ratios to io_uring (a read job's the
#    median of its repeats x slices pairs); the file 8x
#    strata's block cache, strata's read rows with their cache hit ratio,
#    and no read aim judged on a figure of cache hits;
#  - phases: all five engines, a row for each of the four phases with
#    latency percentiles, size on disk and device reads per get (strata's
#    read rows: its cache hit ratio too), and the
#    memory budget and how it was enforced recorded (a peer whose child the
#    budget's OOM killer ended, as the lab records it, has fewer rows: that
#    is the peer's result, not a lab failure; strata must have them all);
#  - remote: it ran against SeaweedFS (lab.sh installs it), the server
#    passed the race check, the upload, cold-get and open rows with the
#    server's raw lines, no wrong value, no layer downloaded at open; the
#    reads over the local budget: a row a phase, every get right, the
#    database ten times the budget by the last phase;
#  - `strata lab report DIR` regenerates the report from the JSON alone;
#  - headless Chromium renders report.html: the screenshot is not blank and
#    shows the plots' colours; the DOM opens with the summary (a row per
#    experiment, aims met / not met, the overview plot), holds one table per
#    experiment and an SVG plot per experiment, and the fio table and
#    plots; the page needs no network (no http(s) URLs other than the SVG
#    namespace).
# The main job's data goes to ./lab-data (the project disk: tmpfs refuses
# O_DIRECT), its results to ./lab-results/<UTC time>; the test's own files
# to target/lab-test.*. Environment: CARGO_TARGET_DIR is honoured;
# LAB_TEST_KEEP=1 keeps the test's files.
set -uo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"

passed=0
failed=0
log() { echo "test-lab: $*"; }
pass() { passed=$((passed + 1)); log "ok   $*"; }
fail() { failed=$((failed + 1)); log "FAIL $*"; }
finish() {
	echo "lab tests: $passed passed, $failed failed"
	[[ "$failed" == 0 ]]
	exit $?
}

# ---- install ---------------------------------------------------------------
if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
	log "installing chromium, clang, libclang-dev, fio and its build deps, python3 (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends \
		chromium clang libclang-dev fio dpkg-dev gcc make libc6-dev libaio-dev zlib1g-dev \
		python3 fonts-dejavu-core ca-certificates >/dev/null; }; then
		fail "apt-get install"
		finish
	fi
fi
for tool in cargo chromium clang python3; do
	if ! command -v "$tool" >/dev/null; then
		fail "$tool is not installed"
		finish
	fi
done
have_fio=0
command -v fio >/dev/null && have_fio=1
((have_fio)) || log "fio is not installed: the fio experiment must say it was skipped"

target="${CARGO_TARGET_DIR:-$repo/target}"
mkdir -p "$repo/target"
work="$(mktemp -d -p "$repo/target" lab-test.XXXXXX)"
cleanup() { [[ "${LAB_TEST_KEEP:-0}" == 1 ]] || rm -rf "$work"; }
trap cleanup EXIT
log "test data in $work"

# ---- the README's main job, exactly as written --------------------------------
# The command is read from README.md (the first sh block after "Main job"),
# and run from the repository root with its default paths, as a new user
# would: it installs what it needs, builds every peer and runs the lab.
main_job="$(awk '/^Main job/ {m=1} m && /^```sh/ {b=1; next} b && /^```/ {exit} b {print}' README.md)"
if [[ -z "$main_job" || "$main_job" == *$'\n'* ]]; then
	fail "README.md has no one-line main-job command after 'Main job': '$main_job'"
	finish
fi
engines="strata,rocksdb,fjall,redb,lmdb"
log "the README's main job: $main_job"
start=$(date +%s)
if bash -c "$main_job" 2>&1 | tee "$work/run.out"; then
	pass "the README's main job exits 0 ($(($(date +%s) - start)) s): $main_job"
else
	fail "the README's main job exited non-zero: $main_job"
fi
results="$(sed -n 's/^report: \(.*\)\/report.html$/\1/p' "$work/run.out" | tail -n 1)"
if [[ -n "$results" && -f "$results/report.html" ]]; then
	pass "the run prints where the report is ($results/report.html)"
else
	fail "the run does not print 'report: <results>/report.html'"
	finish
fi
case "$results" in
"$repo"/lab-results/*) pass "results under ./lab-results by default" ;;
*) fail "results not under $repo/lab-results: $results" ;;
esac
if [[ -z "$(ls -A "$repo/lab-data" 2>/dev/null)" ]]; then
	pass "the run cleans its data directory (./lab-data)"
else
	fail "the run left data behind in ./lab-data: $(ls "$repo/lab-data")"
fi
if grep -q "Stack backtrace\|panicked at" "$work/run.out"; then
	fail "the main job printed a backtrace or a panic"
fi
strata="$target/release/strata"

# Release profile: reuses the RocksDB build of the main job.
if cargo test --release -p strata-lab --features rocksdb; then
	pass "lab unit tests (with RocksDB)"
else
	fail "lab unit tests (with RocksDB)"
fi

# Expected failures: one readable line, no backtrace, even with RUST_BACKTRACE=1.
one_line_error() {
	local what="$1"
	shift
	local err
	err="$(RUST_BACKTRACE=1 "$@" 2>&1 >/dev/null)"
	local rc=$?
	if [[ $rc != 0 && "$(printf '%s\n' "$err" | grep -c .)" == 1 && "$err" != *acktrace* ]]; then
		pass "$what: one line ($err)"
	else
		fail "$what: exit $rc, stderr: $err"
	fi
}
one_line_error "an unknown experiment" "$strata" lab run no-such-experiment --quick
one_line_error "an unknown engine" "$strata" lab run --quick --engines strata,nosuchdb
touch "$work/a-file"
one_line_error "a data directory that is a file" "$strata" lab run device --quick --dir "$work/a-file/data"
one_line_error "a bad key in strata db" "$strata" db "$work/db" get ""

# The results JSON: schema, machine, device line, engines.
if python3 - "$results" "$engines" "$repo" "$have_fio" <<'EOF'; then
import glob, json, os, sys
results, engines, repo, have_fio = sys.argv[1], sys.argv[2].split(","), sys.argv[3], sys.argv[4] == "1"
expected = ["device", "io", "ingest", "bulk", "fio", "phases", "remote"]
# The experiments whose rows are figures of a measurement repeated in quick
# mode too: the primary metric of each row has a spread of >= 3 samples.
repeated = {"device": "mib_s", "io": "write_mib_s", "ingest": "mib_s", "bulk": "insert_mib_s", "fio": "iops"}
errors = []
for name in expected:
    path = os.path.join(results, name + ".json")
    if not os.path.exists(path):
        errors.append(f"{name}.json missing"); continue
    d = json.load(open(path))
    for key in ["schema_version", "machine", "options", "rows", "metrics", "git_commit", "started_at_utc", "aims"]:
        if key not in d:
            errors.append(f"{name}: no {key}")
    # The aims as data, each also said as a note.
    for aim in d.get("aims") or []:
        verdict = ("aim met:" if aim.get("met") else "aim not met:") if aim.get("judged", True) else "aim not judged:"
        if not aim.get("claim", {}).get("kind") or f"{verdict} {aim.get('text')}" not in d.get("notes", []):
            errors.append(f"{name}: aim {aim} without its kind or its note")
    if name in ("io", "ingest", "bulk") and not d.get("aims"):
        errors.append(f"{name}: no aims")
    if d.get("schema_version") != 2:
        errors.append(f"{name}: schema_version {d.get('schema_version')}")
    m = d.get("machine", {})
    if not m.get("cpu_model") or not m.get("cores") or not m.get("memory_bytes") or not m.get("filesystem", {}).get("fs_type"):
        errors.append(f"{name}: incomplete machine {m}")
    line = d.get("device_line") or {}
    if not line.get("write_mib_s", 0) > 0 or not line.get("read_mib_s", 0) > 0:
        errors.append(f"{name}: no device line")
    if name == "fio" and not have_fio:
        if not d.get("options", {}).get("skipped") or not any(n.startswith("skipped: ") for n in d.get("notes", [])):
            errors.append(f"fio: not installed, yet not marked skipped: {d.get('options')}")
        continue
    if not d.get("rows"):
        errors.append(f"{name}: no rows (notes: {d.get('notes')})")
    key = repeated.get(name)
    for r in d.get("rows", []):
        n = r.get("spread", {}).get(key, {}).get("n", 1)
        if key in r.get("metrics", {}) and n < 3:
            errors.append(f"{name} {r['case']} / {r['engine']} {r['config']}: {key} from {n} sample(s), not >= 3")
    if name == "remote":
        # scripts/lab.sh installs SeaweedFS: the experiment ran against it,
        # the server passed the race check, every line is there, no get
        # answered wrong, and the open downloaded no layer file.
        opts = d.get("options", {})
        if "skipped" in opts:
            errors.append(f"remote: skipped: {opts['skipped']}")
        winners = opts.get("race_winners")
        if not winners or any(w != 1 for w in winners):
            errors.append(f"remote: race check winners {winners}")
        rows = {(r["case"], r["engine"]): r for r in d.get("rows", [])}
        for case, engine, key in [("upload", "strata", "mib_s"), ("upload", "raw PUT", "mib_s"), ("upload", "raw parts", "mib_s"),
                                  ("cold get", "strata", "p50_us"), ("cold get", "raw ranged GET", "p50_us"),
                                  ("open from the bucket", "strata", "open_ms")]:
            r = rows.get((case, engine))
            if r is None or not r["metrics"].get(key, 0) > 0:
                errors.append(f"remote: no {key} for {case} / {engine}")
        cold = rows.get(("cold get", "strata"))
        if cold and (cold["params"].get("wrong_values") != 0 or "gets_per_op" not in cold["metrics"]):
            errors.append(f"remote: cold gets {cold}")
        opened = rows.get(("open from the bucket", "strata"))
        if opened and opened["metrics"].get("downloaded_files") != 0:
            errors.append(f"remote: the open downloaded {opened['metrics'].get('downloaded_files')} layer files")
        # Reads over the local budget: a row a phase, every get right, the
        # database at least ten times the budget by the last phase.
        phases = [r for r in d.get("rows", []) if r["case"] == "reads over the local budget" and r["engine"] == "strata"]
        if len(phases) < 2 or any(p["params"].get("wrong_values") != 0 or not p["metrics"].get("p50_us", 0) > 0
                                  or "local_x_budget" not in p["metrics"] for p in phases):
            errors.append(f"remote: reads over the local budget {phases}")
        elif not phases[-1]["metrics"].get("data_x_budget", 0) >= 10:
            errors.append(f"remote: the database ends {phases[-1]['metrics'].get('data_x_budget')} times its local budget, not >= 10")
        if not d.get("aims"):
            errors.append("remote: no aims")
        print(f"  remote: race {winners}, " + ", ".join(f"{c} / {e} {r['metrics']}" for (c, e), r in rows.items()))
    if name == "device":
        # The random-read sweep: every (file, method) at every size from
        # 1 B to 4 MiB (quick), p50/mean/p99 from >= 3 repeats, its fit, the
        # 4 KiB line, and fio's 4 KiB figure beside it.
        if not line.get("read_4k_latency_ns", 0) > 0:
            errors.append(f"device: no read_4k_latency_ns in the device line {line}")
        if have_fio and not (line.get("fio_read_4k_latency_ns") or 0) > 0:
            errors.append(f"device: no fio_read_4k_latency_ns in the device line {line}")
        rows = d.get("rows", [])
        for file in ("unwritten", "filled"):
            for method in ("psync", "io_uring", "io_uring+direct+fixed"):
                config = f"{file} file, {method}"
                points = [r for r in rows if r["engine"] == "lab probe" and r["config"] == config
                          and r["case"].startswith("random read QD1 ") and "bytes" in r["params"]]
                sizes = sorted(r["params"]["bytes"] for r in points)
                if sizes != [1 << k for k in range(23)]:
                    errors.append(f"device {config}: sizes {sizes}, not 1 B .. 4 MiB")
                for r in points:
                    m = r["metrics"]
                    if not 0 < m.get("lat_p50_us", 0) <= m.get("lat_p99_us", 0) or not m.get("lat_mean_us", 0) > 0:
                        errors.append(f"device {config} {r['case']}: latencies {m}")
                    if r.get("spread", {}).get("lat_p50_us", {}).get("n", 1) < 3:
                        errors.append(f"device {config} {r['case']}: lat_p50_us from < 3 samples")
                if not any(r["case"] == "random read QD1 4 KiB" for r in points):
                    errors.append(f"device {config}: no 4 KiB row")
                fits = [r for r in rows if r["case"].startswith("random read QD1, fit") and r["config"] == config]
                if len(fits) != 1:
                    errors.append(f"device {config}: {len(fits)} fit rows")
                elif file == "filled" and not fits[0]["metrics"].get("fit_mib_s", 0) > 0:
                    errors.append(f"device {config}: no fitted bandwidth {fits[0]['metrics']}")
        if have_fio and not any(r["engine"] == "fio" and r["case"] == "random read QD1 4 KiB" for r in rows):
            errors.append("device: no fio 4 KiB random-read row")
        print(f"  device: 4 KiB random read p50 {line.get('read_4k_latency_ns', 0) / 1e3:.1f} us (fio {(line.get('fio_read_4k_latency_ns') or 0) / 1e3:.1f} us)")
    if name in ("ingest", "bulk"):
        seen = {r["engine"] for r in d["rows"]}
        for engine in engines:
            if engine not in seen:
                errors.append(f"{name}: no row for {engine} (notes: {d.get('notes')})")
    if name == "ingest":
        for r in d["rows"]:
            v = r["metrics"].get("mib_s", 0)
            if not v > 0:
                errors.append(f"ingest {r['engine']} {r['case']}: mib_s {v}")
            # No figure from less than about a second of work.
            work = r.get("spread", {}).get("work_s", {}).get("min", r["metrics"].get("work_s", 0))
            if not work >= 0.9:
                errors.append(f"ingest {r['engine']} {r['config']} {r['case']}: a sample of {work:.2f} s of work")
        opts = d.get("options", {}).get("engine_options", {})
        for engine in engines:
            if "durability" not in opts.get(engine, {}):
                errors.append(f"ingest: no durability setting recorded for {engine}")
    if name == "bulk":
        for r in d["rows"]:
            for k in ["insert_s", "write_amp", "recovery_s", "peak_rss_mib", "size_on_disk_mib"]:
                if k not in r["metrics"]:
                    errors.append(f"bulk {r['engine']}: no {k}")
        # Both value sizes (1 KiB copied into layers, 8 KiB left in strata's log).
        for engine in engines:
            sizes = {r["params"].get("value_len_bytes") for r in d["rows"] if r["engine"] == engine}
            if sizes != {1024, 8192}:
                errors.append(f"bulk {engine}: value sizes {sorted(s for s in sizes if s)}, not 1024 and 8192")
    if name == "phases":
        # Every engine, with a row for each phase of at least one iteration,
        # latency percentiles, device reads per get and the budget recorded.
        phases = ["append", "update", "mixed", "read"]
        opts = d.get("options", {})
        for k in ["memory_budget_bytes", "ops_per_phase", "value_len_bytes", "data_target_bytes", "memory_budget"]:
            if k not in opts:
                errors.append(f"phases: option {k} not recorded")
        for engine in engines:
            rows = [r for r in d["rows"] if r["engine"] == engine]
            seen = {r["case"].split(" #")[0] for r in rows}
            end = opts.get("memory_budget", {}).get(engine, {}).get("end", "")
            # A peer whose own memory outgrew the budget is a result the
            # lab reports (its child killed by the cgroup's OOM killer,
            # said in the notes and the report), not a lab failure; strata
            # must finish every phase.
            if engine != "strata" and "killed" in end and "budget" in end:
                print(f"  phases {engine}: phases missing, accepted: {end}")
                continue
            for phase in phases:
                if phase not in seen:
                    errors.append(f"phases: no {phase} row for {engine} (notes: {d.get('notes')})")
            for r in rows:
                m = r["metrics"]
                for k in ["latency_p50_us", "latency_p99_us", "latency_p999_us", "latency_mean_us", "size_on_disk_mib"]:
                    if not m.get(k, 0) > 0:
                        errors.append(f"phases {engine} {r['case']}: {k} {m.get(k)}")
                if r["case"].startswith(("read", "mixed")) and "device_reads_per_get" not in m:
                    errors.append(f"phases {engine} {r['case']}: no device reads per get")
                # strata's read rows report its cache hit ratio (LAB.md).
                if engine == "strata" and r["case"].startswith(("read", "mixed")) and "cache_hit_ratio" not in m:
                    errors.append(f"phases strata {r['case']}: no cache hit ratio")
            if engine in opts.get("memory_budget", {}):
                print(f"  phases {engine}: {opts['memory_budget'][engine].get('method')}, {opts['memory_budget'][engine].get('end')}")
    if name == "fio":
        # fio is installed: the experiment must have run, not skipped.
        if "skipped" in d.get("options", {}):
            errors.append(f"fio: skipped: {d['options']['skipped']}")
        rows = {(r["case"], r["engine"]): r for r in d.get("rows", [])}
        # A job that only reads runs in slices: its ratio is the median of
        # repeats x slices pairs.
        pairs = d.get("options", {}).get("repeats", 0) * d.get("options", {}).get("read_slices", 0)
        jobs = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(repo, "fio/jobfiles/*.fio")))
        wanted = [(f"{j} qd1", e) for j in jobs for e in ("strata", "psync", "io_uring")]
        wanted += [(f"{j} qd16", e) for j in ("rand-read-iops", "rand-write-iops") for e in ("strata", "io_uring")]
        for case, engine in wanted:
            r = rows.get((case, engine))
            if r is None:
                errors.append(f"fio: no row for {case} / {engine} (notes: {d.get('notes')})")
                continue
            m = r["metrics"]
            if not m.get("iops", 0) > 0 or not m.get("mib_s", 0) > 0:
                errors.append(f"fio {case} / {engine}: iops {m.get('iops')} mib_s {m.get('mib_s')}")
            if not any(k in m for k in ("read_lat_p99_us", "write_lat_p99_us")):
                errors.append(f"fio {case} / {engine}: no p99 latency")
            if engine == "strata" and "x_io_uring" not in m:
                errors.append(f"fio {case}: no strata / io_uring ratio")
            if not os.path.exists(os.path.join(results, r["params"].get("fio_json", "-"))):
                errors.append(f"fio {case} / {engine}: fio's JSON {r['params'].get('fio_json')} missing")
            if engine == "strata" and "-read-" in case and r.get("spread", {}).get("x_io_uring", {}).get("n") != pairs:
                errors.append(f"fio {case}: the ratio is not the median of {pairs} pairs: {r.get('spread', {}).get('x_io_uring')}")
        # Reads reach the device: the file is >= 8x strata's block cache,
        # every strata row that read reports its cache hit ratio, and no
        # read aim made of cache hits (> 1/8) is judged.
        opts = d.get("options", {})
        if not opts.get("size_bytes", 0) >= 8 * opts.get("strata_block_cache_bytes", float("inf")):
            errors.append(f"fio: file {opts.get('size_bytes')} bytes is not 8x strata's block cache {opts.get('strata_block_cache_bytes')}")
        for (case, engine), r in rows.items():
            if engine == "strata" and ("read" in case or "randrw" in case) and "cache_hit_ratio" not in r["metrics"]:
                errors.append(f"fio {case}: strata's row has no cache hit ratio")
        for aim in d.get("aims") or []:
            claim = aim.get("claim", {})
            if aim.get("judged", True) and "reads at" in claim.get("what", ""):
                case = claim["what"].rsplit(" at ", 1)[-1]
                job = {"4 KiB random reads": "rand-read-iops", "1 MiB sequential reads": "seq-read-bw", "1 MiB random reads": "rand-read-bw"}.get(claim["what"].rsplit(" at ", 1)[0])
                r = rows.get((f"{job} {case}", "strata"))
                hit = max([r["metrics"].get("cache_hit_ratio", 1.0)] + ([r["spread"]["cache_hit_ratio"]["max"]] if "cache_hit_ratio" in r.get("spread", {}) else [])) if r else 1.0
                if hit > 0.125:
                    errors.append(f"fio: aim judged on a figure of cache hits ({hit:.2}): {aim.get('text')}")
        for case in sorted({c for c, _ in wanted}):
            print(f"  fio {case}: " + ", ".join(
                f"{e} {rows[(case, e)]['metrics'].get('iops', 0):.0f} IOPS" for e in ("strata", "psync", "io_uring") if (case, e) in rows))
for e in errors:
    print("  " + e)
sys.exit(1 if errors else 0)
EOF
	pass "results JSON: every experiment, machine, device line, strata and peers, fio's jobs × engines"
else
	fail "results JSON"
fi

# ---- the report ---------------------------------------------------------------
rm -f "$results/report.html"
if "$strata" lab report "$results" >/dev/null && [[ -s "$results/report.html" ]]; then
	pass "strata lab report regenerates report.html from the JSON"
else
	fail "strata lab report"
	finish
fi
report="$results/report.html"
if grep -Eo 'https?://[^" )]+' "$report" | grep -v '^http://www.w3.org/' | grep -q .; then
	fail "report.html refers to the network"
else
	pass "report.html is self-contained"
fi

chrome() {
	timeout 180 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--user-data-dir="$(mktemp -d -p "$work")" "$@" 2>>"$work/chromium.log"
}

if chrome --screenshot="$work/report.png" --window-size=1400,2400 "file://$report" >/dev/null &&
	[[ -s "$work/report.png" ]]; then
	pass "chromium screenshot"
else
	fail "chromium screenshot (see $work/chromium.log)"
	tail -5 "$work/chromium.log"
fi

# Decode the PNG (zlib + scanline filters, no PIL) and check it is not blank
# and shows the plots' first palette colour (the bars of the first series).
if python3 - "$work/report.png" <<'EOF'; then
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, width = 8, b"", 0
while pos < len(data):
    length, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + length]
    if kind == b"IHDR":
        width, height, depth, color = struct.unpack(">IIBB", body[:10])
        assert depth == 8 and color in (2, 6), f"unsupported PNG depth {depth} colour {color}"
        bpp = 3 if color == 2 else 4
    elif kind == b"IDAT":
        idat += body
    pos += 12 + length
raw = zlib.decompress(idat)
stride = width * bpp
prev = bytearray(stride)
pixels = 0
non_white = 0
colours = set()
palette_hits = 0
i = 0
for _ in range(height):
    f = raw[i]; line = bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b = prev[x]
        c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for x in range(0, stride, bpp * 2):  # every other pixel is plenty
        rgb = tuple(line[x:x + 3])
        pixels += 1
        if rgb != (255, 255, 255):
            non_white += 1
        colours.add(rgb)
        if abs(rgb[0] - 0x1f) < 8 and abs(rgb[1] - 0x77) < 8 and abs(rgb[2] - 0xb4) < 8:
            palette_hits += 1
    prev = line
share = non_white / max(pixels, 1)
print(f"  screenshot {width}x{height}: {share:.1%} non-white, {len(colours)} colours, {palette_hits} plot-blue pixels")
ok = share > 0.02 and len(colours) > 20 and palette_hits > 500
sys.exit(0 if ok else 1)
EOF
	pass "screenshot is not blank and shows the plots"
else
	fail "screenshot is blank or has no plots"
fi

if chrome --dump-dom "file://$report" >"$work/dom.html" && [[ -s "$work/dom.html" ]]; then
	pass "chromium --dump-dom"
else
	fail "chromium --dump-dom"
fi
n_json=$(ls "$results"/*.json | wc -l)
n_tables=$(grep -o '<table class="experiment-table"' "$work/dom.html" | wc -l)
n_sections=$(grep -o '<section class="experiment"' "$work/dom.html" | wc -l)
n_svg=$(grep -o '<svg' "$work/dom.html" | wc -l)
if [[ "$n_tables" == "$n_json" && "$n_sections" == "$n_json" ]]; then
	pass "DOM holds one table per experiment ($n_tables tables, $n_json results)"
else
	fail "DOM holds $n_tables tables and $n_sections sections for $n_json results"
fi
if [[ "$n_svg" -ge "$n_json" ]]; then
	pass "DOM holds the SVG plots ($n_svg)"
else
	fail "DOM holds $n_svg SVG plots for $n_json experiments"
fi
if ((!have_fio)) && grep -q '<table class="experiment-table" data-experiment="fio">' "$work/dom.html" &&
	grep -q 'skipped: fio is not installed' "$work/dom.html"; then
	pass "DOM holds the fio table, saying why it was skipped"
elif grep -q '<table class="experiment-table" data-experiment="fio">' "$work/dom.html" &&
	grep -q '<td class="l">rand-write-iops qd1</td>' "$work/dom.html" &&
	grep -q 'IOPS ÷ io_uring' "$work/dom.html" &&
	grep -q 'gets without a device read' "$work/dom.html" &&
	grep -q 'fio: IOPS (read + write)' "$work/dom.html"; then
	pass "DOM holds the fio table (jobs × engines, ratios, strata's cache hits) and its plots"
else
	fail "DOM has no fio table or plot"
fi
if grep -q '<table class="device-latency">' "$work/dom.html" &&
	grep -q '<table class="device-fit">' "$work/dom.html" &&
	grep -q 'Block size (bytes), log scale' "$work/dom.html" &&
	grep -q '4 KiB random read at QD1, p50, filled file' "$work/dom.html"; then
	pass "DOM holds the device's latency plots and tables and its 4 KiB headline in the summary"
else
	fail "DOM has no device latency plot, table or headline"
fi
n_headline=$(grep -o '<table class="phases-headline"' "$work/dom.html" | wc -l)
# A headline row per engine says which iterations it compares: (#1 → #3);
# one in each of the two tables for each engine with read and mixed rows
# (a peer the budget killed has none: see the results JSON check).
n_headline_rows=$(grep -o '(#[0-9]* → #[0-9]*)' "$work/dom.html" | wc -l)
n_phases_engines=$(python3 -c '
import json, sys
rows = json.load(open(sys.argv[1] + "/phases.json"))["rows"]
have = lambda e, p: any(r["engine"] == e and r["case"].startswith(p) for r in rows)
print(sum(1 for e in {r["engine"] for r in rows} if have(e, "read") and have(e, "mixed")))
' "$results" 2>/dev/null || echo 5)
if ((n_headline >= 2)) && ((n_phases_engines >= 1)) && ((n_headline_rows >= 2 * n_phases_engines)) &&
	grep -q 'phases: read latency per operation (log)' "$work/dom.html" &&
	grep -q 'phases: device reads per get' "$work/dom.html" &&
	grep -q '2× device 4 KiB read' "$work/dom.html"; then
	pass "DOM holds the phases plots (device lines at 1× and 2×) and its headline table, in the summary too"
else
	fail "DOM has no phases plot or headline table ($n_headline tables, $n_headline_rows engine rows)"
fi
for engine in ${engines//,/ }; do
	if ! grep -q "<td class=\"l\">$engine</td>" "$work/dom.html"; then
		fail "the report's tables have no row for $engine"
	fi
done

# The verdict on top: the summary section comes first, with a row per
# experiment, the aims marked met or not met, and the overview plot.
if python3 - "$work/dom.html" "$results" <<'EOF'; then
import glob, os, re, sys
dom = open(sys.argv[1]).read()
names = [os.path.basename(p)[:-5] for p in glob.glob(os.path.join(sys.argv[2], "*.json"))]
errors = []
m = re.search(r'<section class="summary" id="summary">(.*?)</section>', dom, re.S)
if not m:
    errors.append("no summary section")
else:
    summary = m.group(1)
    if dom.find('<section class="summary"') > dom.find('<section class="experiment"'):
        errors.append("the summary is not above the experiments")
    for name in names:
        if f'data-experiment="{name}"' not in summary:
            errors.append(f"the summary has no row for {name}")
    if not any(f'data-verdict="{v}"' in summary for v in ("met", "not-met", "not-judged")):
        errors.append("the summary shows no aim met, not met or not judged")
    if not re.search(r'<div class="overview">\s*<svg', summary):
        errors.append("the summary has no overview plot")
    print(f"  summary: {len(names)} experiments, {summary.count('data-verdict=')} aims")
for e in errors:
    print("  " + e)
sys.exit(1 if errors else 0)
EOF
	pass "the report opens with the summary: a row per experiment, the aims, the overview plot"
else
	fail "the report's summary"
fi

finish
