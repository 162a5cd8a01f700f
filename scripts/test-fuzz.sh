#!/usr/bin/env bash
# Fuzzes strata's on-disk decoders: log record and batch, delta data block,
# block index, bloom filter, footer (a whole delta layer file), manifest. The
# targets and the properties they check are in crates/strata/src/fuzzing.rs.
#
#   1. stable toolchain: `cargo test -p strata --features fuzzing --test
#      fuzz_decoders`, a seeded mutation driver over the target functions
#      (valid seeds, committed regression inputs, then mutated cases);
#   2. when `cargo +nightly` is available (cargo-fuzz is installed if missing):
#      a short libFuzzer run of each target, from its committed seeds in
#      crates/strata/fuzz/seeds/<target>/, FUZZ_SECONDS (default 20) each.
#
# Environment: FUZZ_SECONDS, FUZZ_TARGETS (space-separated subset),
# FUZZ_SKIP_LIBFUZZER=1, CARGO_TARGET_DIR (used by both parts).
# libFuzzer's findings are written to crates/strata/fuzz/artifacts/<target>/;
# its growing corpus to crates/strata/fuzz/corpus/<target>/ (not committed).
#
# Prints "fuzz tests: N passed, M failed" last; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."

source scripts/cargo-env.sh

all_targets="log_record batch delta_block block_index bloom footer manifest"
targets="${FUZZ_TARGETS:-$all_targets}"
seconds="${FUZZ_SECONDS:-20}"
fuzz_dir=crates/strata/fuzz
passed=0
failed=0
failures=()

# 1. The stable driver: one test per target, plus the seed-freshness check.
echo "==> stable: cargo test -p strata --features fuzzing --test fuzz_decoders"
log=$(mktemp)
cargo test -p strata --features fuzzing --test fuzz_decoders 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
result=$(grep -E '^test result: ' "$log" | tail -1)
if [[ "$result" =~ ([0-9]+)\ passed\;\ ([0-9]+)\ failed ]]; then
	passed=$((passed + BASH_REMATCH[1]))
	failed=$((failed + BASH_REMATCH[2]))
fi
if ((status != 0)); then
	# A crash (an allocation over the cap, the watchdog) prints no result line.
	[[ "$result" =~ [1-9][0-9]*\ failed ]] || failed=$((failed + 1))
	failures+=("stable")
fi
rm -f "$log"

# 2. libFuzzer, when a nightly toolchain is there.
if [[ "${FUZZ_SKIP_LIBFUZZER:-0}" == 1 ]]; then
	echo "==> libFuzzer: skipped (FUZZ_SKIP_LIBFUZZER=1)"
elif ! cargo +nightly --version >/dev/null 2>&1; then
	echo "==> libFuzzer: skipped (no nightly toolchain: rustup toolchain install nightly)"
else
	if ! cargo fuzz --version >/dev/null 2>&1; then
		echo "==> installing cargo-fuzz"
		cargo install cargo-fuzz --locked || echo "scripts/test-fuzz.sh: cargo install cargo-fuzz failed" >&2
	fi
	if ! cargo fuzz --version >/dev/null 2>&1; then
		failed=$((failed + 1))
		failures+=("cargo-fuzz missing")
	else
		target_dir_args=()
		[[ -n "${CARGO_TARGET_DIR:-}" ]] && target_dir_args=(--target-dir "$CARGO_TARGET_DIR")
		echo "==> libFuzzer: building the targets"
		if ! (cd crates/strata && cargo +nightly fuzz build "${target_dir_args[@]}"); then
			failed=$((failed + 1))
			failures+=("cargo fuzz build")
		else
			for t in $targets; do
				echo "==> libFuzzer: $t for ${seconds} s"
				mkdir -p "$fuzz_dir/corpus/$t" "$fuzz_dir/artifacts/$t"
				log=$(mktemp)
				# -malloc_limit_mb: no decoder input here justifies a single
				# allocation near it (the largest is a 16 MiB block buffer).
				(cd crates/strata && cargo +nightly fuzz run "${target_dir_args[@]}" "$t" \
					"fuzz/corpus/$t" "fuzz/seeds/$t" -- \
					-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=128 \
					-print_final_stats=1 -artifact_prefix="fuzz/artifacts/$t/") >"$log" 2>&1
				status=$?
				grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^Done [0-9]+ runs|stat::number_of_executed_units|Test unit written|^SUMMARY|panicked at' "$log"
				if ((status == 0)); then
					passed=$((passed + 1))
				else
					tail -40 "$log"
					failed=$((failed + 1))
					failures+=("libfuzzer:$t")
				fi
				rm -f "$log"
			done
		fi
	fi
fi

if ((${#failures[@]})); then
	echo "scripts/test-fuzz.sh: FAILED: ${failures[*]}"
fi
echo "fuzz tests: $passed passed, $failed failed"
((failed == 0))
