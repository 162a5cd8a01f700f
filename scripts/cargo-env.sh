# Sourced by the scripts that run cargo: puts rustup's cargo on PATH when a
# fresh login shell has not (sudo, CI), or says that Rust is required.
if ! command -v cargo >/dev/null; then
	for d in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
		[[ -x "$d/cargo" ]] && export PATH="$d:$PATH"
	done
fi
command -v cargo >/dev/null || { echo "${0##*/}: cargo (Rust, via rustup) is required" >&2; exit 1; }
