#!/usr/bin/env bash
# Runs examples/memory_load inside a memory cgroup of BUDGET MiB (page cache
# included), as the issue-28 scenario did: `scripts/memory-budget.sh [BUDGET
# MiB] [load args...]`, e.g. `scripts/memory-budget.sh 256 1024 256` loads
# 1 GiB of 256-byte values in 256 MiB. Needs root and a cgroup v1 memory
# controller or cgroup v2; prints the example's lines and the cgroup's peak.
set -euo pipefail
cd "$(dirname "$0")/.."
budget_mib=${1:-256}
shift || true
cargo build --release --example memory_load
bin=target/release/examples/memory_load
name=strata-memory-budget-$$
if [ -d /sys/fs/cgroup/memory ]; then
    cg=/sys/fs/cgroup/memory/$name
    mkdir "$cg"
    echo $((budget_mib << 20)) > "$cg/memory.limit_in_bytes"
    peak_file=$cg/memory.max_usage_in_bytes
    oom_file=$cg/memory.oom_control
else
    cg=/sys/fs/cgroup/$name
    mkdir "$cg"
    echo $((budget_mib << 20)) > "$cg/memory.max"
    peak_file=$cg/memory.peak
    oom_file=$cg/memory.events
fi
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
status=0
sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$cg" "$bin" "$@" || status=$?
echo "cgroup: budget $budget_mib MiB, peak $(( $(cat "$peak_file") >> 20 )) MiB, exit status $status"
grep -E 'oom_kill|oom ' "$oom_file" || true
exit $status
