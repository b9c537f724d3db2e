#!/usr/bin/env bash
# Scheme sanity table (issue 6): is each wrapper really full-throttle, and do the delay-based
# schemes keep delay down?
#
#   bash bench/schemes.sh [SECS=30]          (root; every run creates and removes its namespaces)
#   SCHEMES="pcc sprout" bash bench/schemes.sh 30
#
# Path: constant 10 Mbit/s both ways (traces/10mbps.trace), mm-delay 28 (56 ms RTT), no random
# loss. Two experiments, one run of SECS seconds per scheme each:
#   1-BDP:    DropTail queues of 47 packets both ways (10 Mbit/s × 56 ms = 70 kB ≈ 47 × 1500 B);
#   infinite: Mahimahi's default infinite queues.
# Prints, per scheme, the throughput and its share of the 10 Mbit/s link over the 1-BDP path,
# and the p95 one-way delay of both paths (Pantheon's definitions, from pantheon_perf.json).
set -euo pipefail
SECS=${1:-30}
cd "$(dirname "$0")/.."
source scripts/setup.sh   # root check, iperf3, cargo, CARGO_TARGET_DIR, $PANTHEON
build_and_install >&2
# Default: the registry schemes and every source scheme that could be built here (issue 28;
# from the mirrors in $PANTHEON_SOURCE_MIRROR, or over the network). SCHEMES="…" picks others.
if [ -z "${SCHEMES:-}" ]; then
  "$PANTHEON" schemes setup $("$PANTHEON" schemes list --source --names) >/dev/null || true
  SCHEMES="cubic bbr quic quic_newreno quic_bbr quic_bbr2 quic_bbr3 tquic_copa ledbat \
$("$PANTHEON" schemes list --source --runnable --names | tr '\n' ' ')"
fi
"$PANTHEON" schemes setup $SCHEMES >/dev/null
OUT=$(mktemp -d /tmp/pschemes.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
trace=traces/10mbps.trace
run() {
  local name=$1; shift
  echo ">> $name: $SCHEMES, ${SECS} s each" >&2
  "$PANTHEON" run local --schemes "$SCHEMES" --runtime "$SECS" --seed 1 --data-dir "$OUT/$name" \
    --uplink-trace "$trace" --downlink-trace "$trace" --prepend-mm-cmds "mm-delay 28" "$@" \
    >/dev/null
}
run bdp --extra-mm-link-args "--uplink-queue=droptail --uplink-queue-args=packets=47 \
--downlink-queue=droptail --downlink-queue-args=packets=47"
run infinite
python3 - "$OUT" $SCHEMES <<'PY'
import json, sys
out, schemes = sys.argv[1], sys.argv[2:]
perf = {k: json.load(open(f"{out}/{k}/pantheon_perf.json")) for k in ("bdp", "infinite")}
def get(k, s, m):
    try:
        return perf[k][s]["1"]["all"][m]
    except (KeyError, TypeError):
        return float("nan")
print("| scheme | 1-BDP DropTail: tput (Mbit/s) | % of 10 Mbit/s | p95 delay (ms) "
      "| infinite queue: tput (Mbit/s) | p95 delay (ms) |")
print("|---|---|---|---|---|---|")
for s in schemes:
    t = get("bdp", s, "tput")
    print(f"| {s} | {t:.2f} | {t * 10:.0f} % | {get('bdp', s, 'delay'):.1f} "
          f"| {get('infinite', s, 'tput'):.2f} | {get('infinite', s, 'delay'):.1f} |")
PY
