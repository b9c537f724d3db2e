#!/usr/bin/env bash
# Emulator benchmark: every figure of the emulator issues, measured in one run.
#
#   bash bench/emulator.sh [SECS=5] [TCP_REPS=3]      (root; creates and removes its own netns)
#
# 1. delivered rate vs trace rate: UDP offered at 1.05× constant 1, 10, 100, 1000 Mbit/s
#    traces; the receiver's rate (first to last packet) / the trace rate (target: within 1 %);
# 2. per-packet delay error vs the ideal schedule at 100 Mbit/s (mm-delay 10 + the link; packets
#    sent clear of ms boundaries; the same model run offline on the send times gives the ideal
#    departure; target p99 ≤ 0.1 ms; Mahimahi: up to 1 ms from its ms clock);
# 3. iperf3 TCP cubic through a 2000 and a 10 000 Mbit/s trace link (issue 53: ≥ 8 Gbit/s
#    through 10 Gbit/s on this kind of 2-vCPU machine; Mahimahi: 848 Mbit/s on 1000);
# 4. density (issue 53): N paths of 16 Mbit/s + mm-delay 20 at once, one TCP flow each, for
#    N = 1, 8, 16, 32, 64: how many deliver within 1 % of one path alone with p95 lateness
#    within 1 ms of its (target: all of N ≥ 32);
# 5. `pantheon run local --schemes cubic` (tunnel + emulator, logs on) through 10 Gbit/s each
#    way, TCP_REPS runs of SECS × 2 s (issue 53: ≥ 5 Gbit/s).
#
# Side by side with another build: BASELINE=DIR, a directory holding that build's `emubench`
# (from target/release/examples), `pantheon` and `pantheon-tunnel`; each measurement then
# alternates between the two.
# Namespaces are named emb-<pid>-*; the bench removes them on every exit path.
set -euo pipefail
SECS=${1:-5}
REPS=${2:-3}
cd "$(dirname "$0")/.."
source scripts/setup.sh   # root check, iperf3, cargo, CARGO_TARGET_DIR
echo ">> cargo build --release --workspace --example emubench --bins" >&2
cargo build --quiet --release --workspace --example emubench --bins
BUILDS=("this:$CARGO_TARGET_DIR/release")
if [ -n "${BASELINE:-}" ]; then BUILDS=("baseline:$BASELINE" "${BUILDS[@]}"); fi

CHILD=
OUT=$(mktemp -d "${TMPDIR:-/tmp}/emubench.XXXXXX")
cleanup() {
  if [ -n "$CHILD" ]; then
    kill "$CHILD" 2>/dev/null || true
    wait "$CHILD" 2>/dev/null || true
    for ns in $(ip netns list | awk '{print $1}' | grep "^emb-$CHILD-" || true); do
      ip netns del "$ns" || true
    done
  fi
}
trap 'cleanup; rm -rf "$OUT"' EXIT INT TERM
step() {
  for build in "${BUILDS[@]}"; do
    echo "[${build%%:*}]"
    bin="${build#*:}/emubench"
    [ -x "$bin" ] || bin="${build#*:}/examples/emubench"
    "$bin" "$@" &
    CHILD=$!
    wait "$CHILD" || echo "  (exit $?: this build has no such measurement)"
    cleanup
    CHILD=
  done
  echo
}
step rate "$SECS"
step delay "$SECS"
step tcp 2000 10 "$REPS"
step tcp 10000 10 "$REPS"
step density 1,8,16,32,64 10

# 5. tunnel + emulator: 833.3 opportunities of 1500 bytes per ms = 10 Gbit/s.
"$CARGO_TARGET_DIR/release/pantheon" trace constant 10000 -o "$OUT/10g.trace" >/dev/null
echo "pantheon run local --schemes cubic through 10 Gbit/s each way ($((SECS * 2)) s × $REPS)"
for rep in $(seq "$REPS"); do
  for build in "${BUILDS[@]}"; do
    dir="${build#*:}"
    rm -rf "$OUT/run"
    PATH="$dir:$PATH" "$dir/pantheon" run local --schemes cubic -t $((SECS * 2)) \
      --uplink-trace "$OUT/10g.trace" --downlink-trace "$OUT/10g.trace" --data-dir "$OUT/run" \
      2>&1 | awk -v b="${build%%:*}" -v r="$rep" -F'|' \
        '/^\| cubic \| 1 \|/ { printf "  [%s] rep %s: %s Mbit/s, p95 delay %s ms\n", b, r, $5, $6 }'
  done
done
