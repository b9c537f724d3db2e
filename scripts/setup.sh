#!/usr/bin/env bash
# Installs what Pantheon-rs needs on a Debian/Ubuntu machine (run as root) and builds it.
# Sourced by scripts/main-job.sh and scripts/test.sh.
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
# ssh2 (`pantheon node bootstrap`) builds libssh2 against the system OpenSSL and zlib.
need_packages iperf3 iproute2 iputils-ping iptables pkg-config gcc libssl-dev zlib1g-dev
if ! command -v cargo >/dev/null 2>&1; then
  for d in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
    [ -x "$d/cargo" ] && export PATH="$d:$PATH"
  done
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "error: Rust (cargo ≥ 1.85) is not installed; install it with rustup (https://rustup.rs)" >&2
  exit 1
fi
# One build directory outside the clone, reused by later builds (a fresh machine builds from
# nothing: about 10 minutes on 2 cores, most of it Polars).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/pantheon-rs/target}"
export PANTHEON="$CARGO_TARGET_DIR/debug/pantheon"
