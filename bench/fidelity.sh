#!/usr/bin/env bash
# Tunnel fidelity (the Pantheon paper's check, at small scale, over our emulator): does running
# a scheme inside pantheon-tunnel change its throughput or delay?
#
#   bash bench/fidelity.sh [RUNS=10] [SECS=10]        (root; creates and removes its own netns)
#   FIDELITY_TRACE=constant|poisson (default poisson)   FIDELITY_SCHEMES="cubic bbr" (default)
#   FIDELITY_QUEUE=PACKETS|infinite (default 167: a DropTail queue of one BDP each way)
#
# Path: 50 Mbit/s both ways, mm-delay 20 (20 ms one-way), DropTail queues of one BDP
# (50 Mbit/s × 40 ms RTT = 167 packets of 1 500 bytes) each way, as an emulator calibrated to a
# real path has (a real bottleneck's buffer is finite). With `infinite` (Mahimahi's default
# queue) Cubic never loses and its queue grows until the receive window stops it; the window
# counts payload bytes, and a tunnelled packet carries 36 fewer (inner MTU 1 464), so the same
# window holds 2.55 % more link time inside: cubic's p95 delay is ≈ 2.6 % higher inside, the
# cost of any encapsulating tunnel (Pantheon's included), which `infinite` shows. With poisson (the
# default) run i of each side gets the same pair of Poisson traces of 50 Mbit/s mean (seeds i
# and 1000 + i, `pantheon trace poisson`): the paper compared runs over real paths, whose rate
# varies from run to run, and over a constant-rate trace our emulator is deterministic, so runs
# differ by < 0.1 % and the KS test flags any offset however small. For each scheme, RUNS runs
# of SECS seconds:
#   inside:  `pantheon run local` (iperf3 through one tunnel pair over the emulated path);
#   outside: `pantheon shell mm-delay 20 mm-link … -- iperf3 -c $MAHIMAHI_BASE -C <cc>`.
# Both sides are measured with the same instrument, the emulator's mm-link uplink log
# (Pantheon's `<cc>_mm_datalink_run<N>.log` inside), over the same window: the first SECS − 0.5
# s of data departures (the senders start and stop differently: iperf3 ends by itself, `run
# local` stops it at the deadline, and a queue that grows through the run makes the p95 follow
# the run length). Throughput = data-packet (≥ 1000 B) bytes between the first and last data
# departure; one-way delay = 20 ms + each data packet's time in the link; per run the mean
# throughput and the 95th-percentile delay. A two-sample Kolmogorov–Smirnov test (scipy)
# compares the RUNS values inside vs outside, per scheme and statistic; the paper found no
# difference at p < 0.2.
set -euo pipefail
RUNS=${1:-10}
SECS=${2:-10}
TRACE=${FIDELITY_TRACE:-poisson}
SCHEMES=${FIDELITY_SCHEMES:-cubic bbr}
QUEUE=${FIDELITY_QUEUE:-167}
case "$QUEUE" in
  infinite) QUEUE_ARGS=() ;;
  *[!0-9]*|'') echo "FIDELITY_QUEUE must be a number of packets or infinite" >&2; exit 2 ;;
  *) QUEUE_ARGS=(--uplink-queue=droptail "--uplink-queue-args=packets=$QUEUE"
                 --downlink-queue=droptail "--downlink-queue-args=packets=$QUEUE") ;;
esac
cd "$(dirname "$0")/.."
source scripts/setup.sh   # root check, iperf3, cargo, CARGO_TARGET_DIR, $PANTHEON
need_packages python3-scipy
build_and_install >&2
OUT=$(mktemp -d /tmp/pfidelity.XXXXXX)
NS="pfid-$$"
SERVER=
cleanup() {
  [ -n "$SERVER" ] && { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; }
  ip netns del "$NS" 2>/dev/null || true
}
trap cleanup EXIT INT TERM
for i in $(seq 1 "$RUNS"); do
  case "$TRACE" in
    constant) "$PANTHEON" trace constant 50 -o "$OUT/up$i.trace" >/dev/null
              cp "$OUT/up$i.trace" "$OUT/down$i.trace" ;;
    poisson)  "$PANTHEON" trace poisson 50 --seed "$i" -o "$OUT/up$i.trace" >/dev/null
              "$PANTHEON" trace poisson 50 --seed "$((1000 + i))" -o "$OUT/down$i.trace" >/dev/null ;;
    *) echo "FIDELITY_TRACE must be constant or poisson" >&2; exit 2 ;;
  esac
done

echo ">> inside the tunnel: pantheon run local, $RUNS × $SECS s per scheme ($TRACE traces)" >&2
for i in $(seq 1 "$RUNS"); do
  "$PANTHEON" run local --schemes "$SCHEMES" -t "$SECS" \
    --uplink-trace "$OUT/up$i.trace" --downlink-trace "$OUT/down$i.trace" \
    --prepend-mm-cmds "mm-delay 20" --extra-mm-link-args "${QUEUE_ARGS[*]}" \
    --data-dir "$OUT/inside$i" >/dev/null
done

echo ">> outside the tunnel: pantheon shell, $RUNS × $SECS s per scheme" >&2
ip netns add "$NS"
ip -n "$NS" link set lo up
mkdir -p "$OUT/outside"
for cc in $SCHEMES; do
  for i in $(seq 1 "$RUNS"); do
    ip netns exec "$NS" iperf3 -s -1 -p 5401 >/dev/null 2>&1 &
    SERVER=$!
    sleep 0.3
    ip netns exec "$NS" "$PANTHEON" shell mm-delay 20 mm-link "$OUT/up$i.trace" "$OUT/down$i.trace" \
      "${QUEUE_ARGS[@]}" --uplink-log="$OUT/outside/${cc}_mm_datalink_run$i.log" -- \
      iperf3 -c '$MAHIMAHI_BASE' -p 5401 -C "$cc" -t "$SECS" >/dev/null
    wait "$SERVER" 2>/dev/null || true
    SERVER=
  done
done

/usr/bin/python3 - "$OUT" "$RUNS" "$SECS" "$SCHEMES" "$TRACE" "$QUEUE" <<'PY'
import sys, numpy as np
from scipy.stats import ks_2samp
out, runs, secs, trace = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[5]
window_ms = (secs - 0.5) * 1000
def run_stats(path):
    t, size, delay = [], [], []
    for line in open(path):
        f = line.split()
        if len(f) == 4 and f[1] == '-' and int(f[2]) >= 1000:
            if t and int(f[0]) - t[0] > window_ms:
                break
            t.append(int(f[0])); size.append(int(f[2])); delay.append(int(f[3]) + 20)
    tput = sum(size) * 8 / (t[-1] - t[0]) / 1000          # Mbit/s
    return tput, float(np.percentile(delay, 95, method='nearest'))
queue = 'infinite queue' if sys.argv[6] == 'infinite' else f'DropTail {sys.argv[6]} packets'
print(f"tunnel fidelity: 50 Mbit/s ({trace} traces), mm-delay 20, {queue}, {runs} runs of {secs:g} s per side; "
      "KS p ≥ 0.2 = no difference found")
print(f"{'scheme':<6} {'statistic':<22} {'inside (median)':>16} {'outside (median)':>17} {'KS D':>6} {'p':>7}  verdict")
for cc in sys.argv[4].split():
    side = {}
    side['inside'] = [run_stats(f"{out}/inside{i}/{cc}_mm_datalink_run1.log") for i in range(1, runs + 1)]
    side['outside'] = [run_stats(f"{out}/outside/{cc}_mm_datalink_run{i}.log") for i in range(1, runs + 1)]
    for k, label in [(0, 'throughput (Mbit/s)'), (1, 'p95 one-way delay (ms)')]:
        a = [r[k] for r in side['inside']]; b = [r[k] for r in side['outside']]
        d, p = ks_2samp(a, b)
        print(f"{cc:<6} {label:<22} {np.median(a):>16.2f} {np.median(b):>17.2f} {d:>6.2f} {p:>7.3f}  "
              f"{'no difference found' if p >= 0.2 else 'DIFFERENT at p < 0.2'}  (n={len(a)}/{len(b)})")
        print(f"{'':<6} {'  per run, inside':<22} {' '.join(f'{x:.2f}' for x in a)}")
        print(f"{'':<6} {'  per run, outside':<22} {' '.join(f'{x:.2f}' for x in b)}")
PY
echo "(logs in $OUT)"
