#!/usr/bin/env bash
# Tunnel fidelity (the Pantheon paper's check, at small scale, over our emulator): does running
# a scheme inside pantheon-tunnel change its throughput or delay?
#
#   bash bench/fidelity.sh [RUNS=10] [SECS=10]        (root; creates and removes its own netns)
#
# Path: 50 Mbit/s both ways (constant trace), mm-delay 20 (20 ms one-way), infinite queue.
# For TCP cubic and bbr, RUNS runs of SECS seconds each:
#   inside:  `pantheon run local` (iperf3 through one tunnel pair over the emulated path);
#   outside: `pantheon shell mm-delay 20 mm-link … -- iperf3 -c $MAHIMAHI_BASE -C <cc>`.
# Both sides are measured with the same instrument, the emulator's mm-link uplink log
# (Pantheon's `<cc>_mm_datalink_run<N>.log` inside): throughput = data-packet (≥ 1000 B) bytes
# between the first and last data departure, one-way delay = 20 ms + each data packet's time in
# the link; per run the mean throughput and the 95th-percentile delay. A two-sample
# Kolmogorov–Smirnov test (scipy) compares the RUNS values inside vs outside, per scheme and
# statistic; the paper found no difference at p < 0.2.
set -euo pipefail
RUNS=${1:-10}
SECS=${2:-10}
cd "$(dirname "$0")/.."
source scripts/setup.sh   # root check, iperf3, cargo, CARGO_TARGET_DIR, $PANTHEON
need_packages python3-scipy
echo ">> cargo build -p pantheon-orchestrator" >&2
cargo build --quiet -p pantheon-orchestrator
OUT=$(mktemp -d /tmp/pfidelity.XXXXXX)
NS="pfid-$$"
SERVER=
cleanup() {
  [ -n "$SERVER" ] && { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; }
  ip netns del "$NS" 2>/dev/null || true
}
trap cleanup EXIT INT TERM
"$PANTHEON" trace constant 50 -o "$OUT/50mbps.trace" >/dev/null

echo ">> inside the tunnel: pantheon run local, $RUNS × $SECS s per scheme" >&2
"$PANTHEON" run local --schemes "cubic bbr" --run-times "$RUNS" -t "$SECS" \
  --uplink-trace "$OUT/50mbps.trace" --downlink-trace "$OUT/50mbps.trace" \
  --prepend-mm-cmds "mm-delay 20" --data-dir "$OUT/inside" >/dev/null

echo ">> outside the tunnel: pantheon shell, $RUNS × $SECS s per scheme" >&2
ip netns add "$NS"
ip -n "$NS" link set lo up
mkdir -p "$OUT/outside"
for cc in cubic bbr; do
  for i in $(seq 1 "$RUNS"); do
    ip netns exec "$NS" iperf3 -s -1 -p 5401 >/dev/null 2>&1 &
    SERVER=$!
    sleep 0.3
    ip netns exec "$NS" "$PANTHEON" shell mm-delay 20 mm-link "$OUT/50mbps.trace" "$OUT/50mbps.trace" \
      --uplink-log="$OUT/outside/${cc}_mm_datalink_run$i.log" -- \
      iperf3 -c '$MAHIMAHI_BASE' -p 5401 -C "$cc" -t "$SECS" >/dev/null
    wait "$SERVER" 2>/dev/null || true
    SERVER=
  done
done

/usr/bin/python3 - "$OUT" "$RUNS" <<'PY'
import sys, glob, numpy as np
from scipy.stats import ks_2samp
out, runs = sys.argv[1], int(sys.argv[2])
def run_stats(path):
    t, size, delay = [], [], []
    for line in open(path):
        f = line.split()
        if len(f) == 4 and f[1] == '-' and int(f[2]) >= 1000:
            t.append(int(f[0])); size.append(int(f[2])); delay.append(int(f[3]) + 20)
    tput = sum(size) * 8 / (t[-1] - t[0]) / 1000          # Mbit/s
    return tput, float(np.percentile(delay, 95, method='nearest'))
print(f"tunnel fidelity: 50 Mbit/s, mm-delay 20, {runs} runs per side; KS p ≥ 0.2 = no difference found")
print(f"{'scheme':<6} {'statistic':<22} {'inside (median)':>16} {'outside (median)':>17} {'KS D':>6} {'p':>7}  verdict")
for cc in ['cubic', 'bbr']:
    side = {}
    for name in ['inside', 'outside']:
        logs = sorted(glob.glob(f"{out}/{name}/{cc}_mm_datalink_run*.log"))
        side[name] = [run_stats(p) for p in logs]
    for k, label in [(0, 'throughput (Mbit/s)'), (1, 'p95 one-way delay (ms)')]:
        a = [r[k] for r in side['inside']]; b = [r[k] for r in side['outside']]
        d, p = ks_2samp(a, b)
        print(f"{cc:<6} {label:<22} {np.median(a):>16.2f} {np.median(b):>17.2f} {d:>6.2f} {p:>7.3f}  "
              f"{'no difference found' if p >= 0.2 else 'DIFFERENT at p < 0.2'}  (n={len(a)}/{len(b)})")
PY
echo "(logs in $OUT)"
