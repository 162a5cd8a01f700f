#!/usr/bin/env bash
# Builds fio/build/libfio_strata.so: strata's fio external ioengine.
#
#   fio/build.sh            # builds libstrata_ffi (cargo, release) and the engine
#   fio --ioengine=external:$PWD/fio/build/libfio_strata.so ...
#
# The engine is compiled against fio 3.33's internal headers, taken from
# Debian's source package of the installed fio (apt-get source, with deb-src
# enabled in a private copy of the machine's Debian source list: the system's
# apt configuration is not changed). The source is cached in fio/build/src.
#
# Needs: fio 3.33 (Debian bookworm), dpkg-dev (dpkg-source), gcc, make,
# cargo. scripts/test-fio.sh installs them.
#
# Environment: CARGO_TARGET_DIR (where cargo builds; default <repo>/target),
# STRATA_FFI_SKIP_CARGO=1 (use an already built libstrata_ffi.so).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="$here/build"
fio_version_want="3.33"
mkdir -p "$build"

die() { echo "fio/build.sh: $*" >&2; exit 1; }

command -v fio >/dev/null || die "fio is not installed (apt-get install fio)"
fio_version="$(fio --version | sed 's/^fio-//')"
[[ "$fio_version" == "$fio_version_want" ]] ||
	die "the installed fio is $fio_version; this engine is built for fio $fio_version_want (Debian bookworm)"
command -v dpkg-source >/dev/null || die "dpkg-source is missing (apt-get install dpkg-dev)"
command -v gcc >/dev/null || die "gcc is missing (apt-get install gcc)"

# 1. fio's source, matching the installed package's version.
src="$build/src/fio-$fio_version_want"
if [[ ! -f "$src/ioengines.h" ]]; then
	deb_version="$(dpkg-query -W -f='${Version}' fio)"
	apt_dir="$build/apt"
	mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/etc"
	# Debian's sources in either format: deb822 (debian.sources, the default
	# of bookworm images) or one-line (sources.list, what debootstrap writes).
	if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
		list="$apt_dir/etc/debian.sources"
		sed -E 's/^Types:[[:space:]]*deb[[:space:]]*$/Types: deb deb-src/' \
			/etc/apt/sources.list.d/debian.sources >"$list"
	elif grep -qE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list 2>/dev/null; then
		list="$apt_dir/etc/sources.list"
		grep -E '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list >"$list"
		sed -E 's/^[[:space:]]*deb[[:space:]]/deb-src /' "$list" >>"$list.src" && cat "$list.src" >>"$list" && rm -f "$list.src"
	else
		die "no Debian sources in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list: cannot locate fio's source package"
	fi
	apt_opts=(-o "Dir::Etc::SourceList=$list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o APT::Sandbox::User=root)
	echo "fio/build.sh: fetching Debian's fio $deb_version source"
	apt-get "${apt_opts[@]}" -qq update
	rm -rf "$build/src" && mkdir -p "$build/src"
	(cd "$build/src" && apt-get "${apt_opts[@]}" -qq source "fio=$deb_version" >/dev/null)
	[[ -f "$src/ioengines.h" ]] || die "apt-get source fio did not unpack to $src"
fi
if [[ ! -f "$src/config-host.h" ]]; then
	echo "fio/build.sh: configuring fio's headers"
	# Debian's own configure flags (debian/rules), minus the GUI and nbd, which
	# only add engines; the structs an engine touches do not depend on them.
	(cd "$src" && ./configure --disable-native --prefix=/usr >"$build/configure.log" 2>&1) ||
		die "fio's ./configure failed; see $build/configure.log"
fi
grep -q '#define FIO_IOOPS_VERSION[[:space:]]*31' "$src/ioengines.h" ||
	die "$src/ioengines.h is not fio 3.33's (FIO_IOOPS_VERSION 31)"

# 2. The C API library.
target="${CARGO_TARGET_DIR:-$repo/target}"
if [[ "${STRATA_FFI_SKIP_CARGO:-0}" != 1 ]]; then
	(cd "$repo" && cargo build --release -p strata-ffi)
fi
lib="$target/release/libstrata_ffi.so"
[[ -f "$lib" ]] || die "$lib not found (cargo build --release -p strata-ffi)"
cp -f "$lib" "$build/libstrata_ffi.so"

# 3. The engine, next to its library (rpath $ORIGIN).
gcc -std=gnu11 -O2 -g -Wall -Wno-unused-parameter -fPIC -shared \
	-D_GNU_SOURCE -D_LARGEFILE_SOURCE -D_FILE_OFFSET_BITS=64 -DFIO_EXTERNAL_ENGINE \
	-include "$src/config-host.h" -I"$src" -I"$repo/crates/strata-ffi/include" \
	-o "$build/libfio_strata.so" "$here/strata_engine.c" \
	-L"$build" -lstrata_ffi -Wl,-rpath,'$ORIGIN' -lpthread
echo "fio/build.sh: built $build/libfio_strata.so"
