#!/usr/bin/env bash
# Installs what Pantheon-rs needs on a Debian/Ubuntu machine (run as root), and defines
# `build_and_install`, which builds the workspace and puts its programs on the PATH, and
# `build_and_install_main_job`, which builds and installs only what the main job runs.
# Sourced by scripts/main-job.sh, scripts/install.sh, scripts/test.sh and bench/.
#
# Two builds, both with the release profile (the one docs/performance.md measures), in one
# build directory:
# - the whole workspace at once, every feature (`--workspace`, so that Cargo unifies the same
#   dependency features for `cargo build` and `cargo test` and neither rebuilds what the other
#   built): scripts/install.sh, the test command, bench/;
# - `pantheon` alone without its default features (no testbed, Indigo training, calibration or
#   sweeps: about a third of the dependencies): the main job on a machine where the full
#   install has not been made, so that a newcomer sees results within minutes.
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
# What every experiment needs: iperf3 (kernel TCP schemes), iproute2 and iptables (namespaces,
# NAT), ping, and a C compiler for the one C dependency of the lean build (ring).
need_packages iperf3 iproute2 iputils-ping iptables gcc
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
  # ssh2 (`pantheon node bootstrap`) builds libssh2 against the system OpenSSL and zlib;
  # quiche's BoringSSL (the QUIC BBRv2 scheme program) needs cmake, a C++ compiler and libclang.
  need_packages pkg-config libssl-dev zlib1g-dev cmake g++ libclang-dev
  echo ">> cargo build --release --workspace --bins"
  # shellcheck disable=SC2086 # $PANTHEON_BUILD_FLAGS: extra cargo flags (e.g. --timings)
  cargo build --quiet --release --locked --workspace --bins ${PANTHEON_BUILD_FLAGS:-}
  local bins=() f
  for f in pantheon pantheon-agent pantheon-tunnel pantheon-quinn pantheon-quiche pantheon-ledbat \
    pantheon-webrtc pantheon-tcp pantheon-guest-clock; do
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

# Builds `pantheon` alone, without the default features of its package (what local
# experiments, their analysis and reports, comparison, the scheme library, `pantheon shell` and
# simulated runs need), and installs it into $PANTHEON_PREFIX/bin. A command of a left-out
# feature (`serve`, `train`, `calibrate`, `sweep`, `run remote`…) says so and names
# scripts/install.sh. Where the full install was made already (pantheon-agent installed), it
# does the full build instead, so that running the main job again never takes a feature away.
build_and_install_main_job() {
  if [ -x "$PANTHEON_PREFIX/bin/pantheon-agent" ]; then
    build_and_install
    return
  fi
  echo ">> cargo build --release -p pantheon-cli --no-default-features --bin pantheon"
  # shellcheck disable=SC2086
  cargo build --quiet --release --locked -p pantheon-cli --no-default-features --bin pantheon \
    ${PANTHEON_BUILD_FLAGS:-}
  mkdir -p "$PANTHEON_PREFIX/bin" "$(dirname "$PANTHEON_MANIFEST")"
  echo ">> install pantheon into $PANTHEON_PREFIX/bin (the main job's build)"
  install -m 755 "$CARGO_TARGET_DIR/release/pantheon" "$PANTHEON_PREFIX/bin/"
  echo "$PANTHEON_PREFIX/bin/pantheon" > "$PANTHEON_MANIFEST"
}
