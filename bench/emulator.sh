#!/usr/bin/env bash
# Emulator benchmark: every figure of the emulator issue, measured in one run.
#
#   bash bench/emulator.sh [SECS=5] [TCP_REPS=3]      (root; creates and removes its own netns)
#
# 1. delivered rate vs trace rate: UDP offered at 1.05× constant 1, 10, 100, 1000 Mbit/s
#    traces; the receiver's rate (first to last packet) / the trace rate (target: within 1 %);
# 2. per-packet delay error vs the ideal schedule at 100 Mbit/s (mm-delay 10 + the link; packets
#    sent clear of ms boundaries; the same model run offline on the send times gives the ideal
#    departure; target p99 ≤ 0.1 ms; Mahimahi: up to 1 ms from its ms clock);
# 3. iperf3 TCP cubic through a 2000 Mbit/s trace link (target ≥ 1500 Mbit/s, aim 2000;
#    Mahimahi: 848 Mbit/s on a 1000 Mbit/s trace on this kind of 2-vCPU machine).
# Namespaces are named emb-<pid>-*; the bench removes them on every exit path.
set -euo pipefail
SECS=${1:-5}
REPS=${2:-3}
cd "$(dirname "$0")/.."
source scripts/setup.sh   # root check, iperf3, cargo, CARGO_TARGET_DIR
echo ">> cargo build --release --workspace --example emubench" >&2
cargo build --quiet --release --workspace --example emubench
BIN="$CARGO_TARGET_DIR/release/examples/emubench"

CHILD=
cleanup() {
  if [ -n "$CHILD" ]; then
    kill "$CHILD" 2>/dev/null || true
    wait "$CHILD" 2>/dev/null || true
    for ns in $(ip netns list | awk '{print $1}' | grep "^emb-$CHILD-" || true); do
      ip netns del "$ns" || true
    done
  fi
}
trap cleanup EXIT INT TERM
step() {
  "$BIN" "$@" &
  CHILD=$!
  wait "$CHILD"
  cleanup
  CHILD=
  echo
}
step rate "$SECS"
step delay "$SECS"
step tcp 2000 10 "$REPS"
