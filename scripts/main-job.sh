#!/usr/bin/env bash
# The main job: Pantheon's replication of a real Nepal → AWS India Wi-Fi path (constant
# 10 Mbit/s both ways, 28 ms one-way delay), TCP Cubic and TCP BBR, 30 s runs; then the same
# path with 0.4 % i.i.d. loss each way, and with a 50-packet DropTail uplink queue.
# Results: results/nepal-wifi/{base,loss,droptail}/ (pantheon_summary.md, *.svg, stats logs).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo build --quiet -p pantheon-orchestrator -p pantheon-tunnel --bins
out=results/nepal-wifi
trace=traces/10mbps.trace
run() {
  local name=$1; shift
  rm -rf "$out/$name"
  echo ">> $name"
  "$PANTHEON" run local --schemes "cubic bbr" --runtime 30 --data-dir "$out/$name" \
    --uplink-trace "$trace" --downlink-trace "$trace" "$@"
}
run base --prepend-mm-cmds "mm-delay 28"
run loss --prepend-mm-cmds "mm-delay 28 mm-loss uplink 0.004 mm-loss downlink 0.004"
run droptail --prepend-mm-cmds "mm-delay 28" \
  --extra-mm-link-args "--uplink-queue=droptail --uplink-queue-args=packets=50"
echo ">> done: open $out/*/pantheon_report.pdf (or .html), or $out/*/pantheon_summary.md"
