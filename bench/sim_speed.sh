#!/usr/bin/env bash
# Speed of simulated time (issue 30): a SECS-second run of each QUIC scheme over 100 Mbit/s,
# mm-delay 28, a one-BDP DropTail each way (467 packets), simulated on one core; prints each
# run's simulated seconds, wall seconds, their ratio (× faster than real time) and datagrams per
# second, from the run's record. Run it with nothing else busy (one core per run).
#
#   bash bench/sim_speed.sh [SECS=30] [MBPS=100]
set -euo pipefail
SECS=${1:-30}
MBPS=${2:-100}
cd "$(dirname "$0")/.."
source scripts/setup.sh   # root check, cargo, CARGO_TARGET_DIR, $PANTHEON
build_and_install >&2
OUT=$(mktemp -d /tmp/psimspeed.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
"$PANTHEON" trace constant "$MBPS" -o "$OUT/t.trace" >/dev/null
BDP=$(( MBPS * 56 * 1000 / 8 / 1500 ))
for scheme in quic quic_newreno quic_bbr; do
  "$PANTHEON" run sim --schemes "$scheme" -t "$SECS" --seed 1 --data-dir "$OUT/$scheme" \
    --uplink-trace "$OUT/t.trace" --downlink-trace "$OUT/t.trace" --prepend-mm-cmds "mm-delay 28" \
    --extra-mm-link-args "--uplink-queue=droptail --uplink-queue-args=packets=$BDP --downlink-queue=droptail --downlink-queue-args=packets=$BDP" \
    >"$OUT/$scheme.log" 2>&1
  note=$(grep -o 'simulated: [^"]*' "$OUT/$scheme/pantheon_runs.json" | head -1)
  tput=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['$scheme']['1']['all']['tput'],2))" "$OUT/$scheme/pantheon_perf.json")
  echo "$scheme over $MBPS Mbit/s for $SECS s: $tput Mbit/s; $note"
done
