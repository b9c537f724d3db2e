#!/usr/bin/env bash
# Installs what the tests need and runs them all: unit tests of every crate (no root needed)
# and the end-to-end local experiments of tests/ (root: namespaces, TUN, iperf3).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo test --workspace
