#!/usr/bin/env bash
# Runs every test of strata: the README's "all tests" command, and what CI
# runs (.ci/run). On a fresh Debian machine, as root, it installs what the
# tests need (apt-get update first); it needs only Rust (cargo) on PATH.
#
#   1. cargo fmt/clippy checks and `cargo test --workspace`: unit, property,
#      model-based, crash (SIGKILL) and corruption tests of the engine, the
#      lab's and the C API's Rust tests, README's example as a doc test; the
#      remote store's tests with the `s3` feature against moto's S3 server
#      (installed from PyPI, started on 127.0.0.1 by the tests);
#   2. scripts/test-fuzz.sh: every on-disk decoder's fuzz target, a seeded
#      mutation run on stable (and, with FUZZ_LIBFUZZER=1, a short libFuzzer
#      run of each on nightly);
#   3. scripts/test-fio.sh: the fio ioengine built against fio 3.33's
#      headers, verified fio jobs through strata, the C API from C;
#   4. scripts/test-lab.sh: the README's main job exactly as written (all
#      five engines, RocksDB built), its results and report checked, the
#      report rendered in headless Chromium.
#
# Each part prints a closing "N passed, M failed" line; the script exits
# non-zero if any part failed.
set -uo pipefail
cd "$(dirname "$0")/.."

source scripts/cargo-env.sh

if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || echo "scripts/test.sh: apt-get update failed; continuing with what is installed" >&2
	# Build tools for the C pieces (fio engine, C API test) and the lab's peers.
	apt-get install -y -qq --no-install-recommends build-essential pkg-config >/dev/null ||
		echo "scripts/test.sh: apt-get install failed" >&2
fi

failed=()
run() {
	local name="$1"
	shift
	echo "==> $name: $*"
	if ! "$@"; then
		failed+=("$name")
	fi
}

# moto's S3 server (PyPI), which the remote store's tests start on
# 127.0.0.1 themselves; installed unless it is there.
install_moto() {
	python3 -c 'import moto.server, flask' 2>/dev/null && return 0
	echo "scripts/test.sh: installing moto[server] from PyPI"
	python3 -m pip install --quiet 'moto[server]>=5.2' ||
		python3 -m pip install --quiet --break-system-packages 'moto[server]>=5.2'
}

run fmt cargo fmt --all -- --check
run clippy cargo clippy --workspace --all-targets -- -D warnings
run clippy-s3 cargo clippy -p strata -p strata-lab --features strata/s3,strata-lab/s3 --all-targets -- -D warnings
run cargo-test cargo test --workspace
# The remote store against a real S3-compatible server (and the directory
# store beside it): round trips, create-only puts, the server's
# conditional-write race check, a stopped server.
run moto install_moto
run remote cargo test -p strata --features s3 --test remote
# The fault sweep at every operation (a debug build samples every 7th).
run fault-sweep cargo test --release -p strata --test fault_sweep
# The decoders' fuzz targets through the stable mutation driver (200,000
# cases each). libFuzzer's runs (nightly, cargo-fuzz: minutes of building)
# only with FUZZ_LIBFUZZER=1, to keep CI within its hour; run
# scripts/test-fuzz.sh alone for them.
[[ -x scripts/test-fuzz.sh ]] && run fuzz env FUZZ_SECONDS="${FUZZ_SECONDS:-10}" \
	FUZZ_SKIP_LIBFUZZER="$([[ "${FUZZ_LIBFUZZER:-0}" == 1 ]] && echo 0 || echo 1)" scripts/test-fuzz.sh
[[ -x scripts/test-fio.sh ]] && run fio scripts/test-fio.sh
[[ -x scripts/test-lab.sh ]] && run lab scripts/test-lab.sh

if ((${#failed[@]})); then
	echo "scripts/test.sh: FAILED: ${failed[*]}"
	exit 1
fi
echo "scripts/test.sh: all parts passed"
