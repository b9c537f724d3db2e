#!/usr/bin/env bash
# Installs what Pantheon-rs needs on a Debian/Ubuntu machine (run as root), and defines
# `build_and_install`, which builds the workspace and puts its programs on the PATH.
# Sourced by scripts/main-job.sh, scripts/test.sh and bench/.
#
# One build configuration serves the main job, the tests and the installed programs: the
# release profile (the one docs/performance.md measures), built for the whole workspace at once
# (`--workspace`, so that Cargo unifies the same dependency features for `cargo build` and
# `cargo test` and neither rebuilds what the other built).
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  echo "error: run as root (experiments create network namespaces and TUN devices)" >&2
  exit 1
fi
# Installs the Debian packages among its arguments that are missing (also used by bench/).
need_packages() {
  local need=() pkg
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  if [ "${#need[@]}" -gt 0 ]; then
    echo ">> apt-get install ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
}
# Packages whose install would start a system service (sshd, munged, slurmctld): installed with
# a policy-rc.d that forbids starting any, so that the tests bring up their own, on their own
# sockets and ports, and stop them.
need_packages_not_started() {
  local need=() pkg policy=/usr/sbin/policy-rc.d
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  [ "${#need[@]}" -gt 0 ] || return 0
  if [ -e "$policy" ]; then
    need_packages "${need[@]}"
  else
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy"
    trap 'rm -f "$policy"' EXIT
    need_packages "${need[@]}"
    rm -f "$policy"
    trap - EXIT
  fi
}
# ssh2 (`pantheon node bootstrap`) builds libssh2 against the system OpenSSL and zlib;
# quiche's BoringSSL (the QUIC BBRv2 scheme program) needs cmake, a C++ compiler and libclang.
need_packages iperf3 iproute2 iputils-ping iptables pkg-config gcc libssl-dev zlib1g-dev \
  cmake g++ libclang-dev
if ! command -v cargo >/dev/null 2>&1; then
  for d in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
    [ -x "$d/cargo" ] && export PATH="$d:$PATH"
  done
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "error: Rust (cargo ≥ 1.89) is not installed; install it with rustup (https://rustup.rs)" >&2
  exit 1
fi
# One build directory outside the clone, reused by later builds (a fresh machine builds from
# nothing; later builds recompile only what changed).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/pantheon-rs/target}"
# Where the programs are installed: $PANTHEON_PREFIX/bin (default /usr/local/bin, on every
# login shell's PATH). The list of installed files is kept for scripts/uninstall.sh.
PANTHEON_PREFIX="${PANTHEON_PREFIX:-/usr/local}"
PANTHEON_MANIFEST="$PANTHEON_PREFIX/share/pantheon-rs/installed-files"
export PANTHEON="$PANTHEON_PREFIX/bin/pantheon"

# Builds every program of the workspace (release profile) and installs them into
# $PANTHEON_PREFIX/bin: `pantheon`, `pantheon-agent`, `pantheon-tunnel` and the scheme
# programs (`pantheon-quinn`, `pantheon-quiche`, `pantheon-ledbat`, `pantheon-webrtc`,
# `pantheon-tcp`), which
# `pantheon` looks for next to itself. Copies, not links: `cargo clean` leaves the installed
# programs working.
build_and_install() {
  echo ">> cargo build --release --workspace --bins"
  cargo build --quiet --release --locked --workspace --bins
  local bins=() f
  for f in pantheon pantheon-agent pantheon-tunnel pantheon-quinn pantheon-quiche pantheon-ledbat \
    pantheon-webrtc pantheon-tcp; do
    bins+=("$CARGO_TARGET_DIR/release/$f")
  done
  mkdir -p "$PANTHEON_PREFIX/bin" "$(dirname "$PANTHEON_MANIFEST")"
  echo ">> install ${#bins[@]} programs into $PANTHEON_PREFIX/bin"
  install -m 755 "${bins[@]}" "$PANTHEON_PREFIX/bin/"
  : > "$PANTHEON_MANIFEST"
  for f in "${bins[@]}"; do
    echo "$PANTHEON_PREFIX/bin/$(basename "$f")" >> "$PANTHEON_MANIFEST"
  done
}
