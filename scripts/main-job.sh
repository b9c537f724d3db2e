#!/usr/bin/env bash
# The main job: a hand-made path with the one-way delay of Pantheon's Nepal → AWS India Wi-Fi
# path (constant 10 Mbit/s both ways, 28 ms one-way delay; Pantheon's calibrated emulator of
# that path is the `nepal-aws-india` preset instead: 0.57 Mbit/s Poisson, 4.77 % loss, a
# 14-packet queue), TCP Cubic and TCP BBR, 30 s runs; then the same path with 0.4 % i.i.d. loss
# each way, and with a 50-packet DropTail uplink queue.
# It first builds and installs `pantheon` into /usr/local/bin with what local experiments need
# (scripts/setup.sh: build_and_install_main_job; the testbed, Indigo training, calibration,
# sweeps and the QUIC/WebRTC scheme programs come with scripts/install.sh or the test
# command), then runs the experiments with the installed `pantheon`, as a user would.
# Results: results/nepal-wifi/{base,loss,droptail}/ (pantheon_report.pdf, pantheon_summary.md, …).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
build_and_install_main_job
out=results/nepal-wifi
trace=traces/10mbps.trace
run() {
  local name=$1; shift
  rm -rf "$out/$name"
  echo ">> $name"
  pantheon run local --schemes "cubic bbr" --runtime 30 --data-dir "$out/$name" \
    --uplink-trace "$trace" --downlink-trace "$trace" "$@"
}
run base --prepend-mm-cmds "mm-delay 28"
run loss --prepend-mm-cmds "mm-delay 28 mm-loss uplink 0.004 mm-loss downlink 0.004"
run droptail --prepend-mm-cmds "mm-delay 28" \
  --extra-mm-link-args "--uplink-queue=droptail --uplink-queue-args=packets=50"
echo ">> done: open $out/*/pantheon_report.pdf (or .html), or $out/*/pantheon_summary.md"
echo ">> pantheon is installed as $(command -v pantheon) ($(pantheon --version)); try pantheon --help"
[ -x "$PANTHEON_PREFIX/bin/pantheon-agent" ] ||
  echo ">> built for local experiments; bash scripts/install.sh builds the rest (testbed, Indigo training, calibration, sweeps, QUIC/WebRTC schemes)"
