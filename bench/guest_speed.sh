#!/usr/bin/env bash
# Kernel schemes in a guest (issue 51): the throughput ceiling of a guest's path through the
# tunnel and the emulator, for one guest and for two at once, beside the host's.
#
# Path: a constant RATE Mbit/s trace each way (default 2000: above what a guest under TCG
# sends), no added delay, Mahimahi's infinite queues; SECS-second runs, RUNS runs each:
#   one flow:   `--schemes "cubic cubic_guest"` — the host's Cubic, then Cubic from a guest;
#   two flows:  `--mix "cubic cubic"` and `--mix "cubic_guest cubic_guest"` — two senders at
#               once on this machine's cores, host or guest (two guests: two QEMUs).
# Prints per experiment and scheme the runs' mean throughput (Pantheon's, from
# pantheon_perf.json; a mix: the sum of its flows) and the median over flows of their minimum
# and 95th-percentile one-way delay, so the guest's ceiling and what it adds can be read side by
# side.
#
#   bash bench/guest_speed.sh [RUNS=3] [SECS=10] [RATE=2000]   (root; after `pantheon schemes
#   setup cubic_guest`)
set -euo pipefail
RUNS=${1:-3}
SECS=${2:-10}
RATE=${3:-2000}
cd "$(dirname "$0")/.."
source scripts/setup.sh   # root check, cargo, CARGO_TARGET_DIR, $PANTHEON
[ -n "${GUESTSPEED_NO_BUILD:-}" ] || build_and_install >&2
OUT=${GUESTSPEED_OUT:-$(mktemp -d /tmp/pguestspeed.XXXXXX)}
mkdir -p "$OUT"
T=$OUT/${RATE}mbps.trace
"$PANTHEON" trace constant "$RATE" -o "$T" >/dev/null
common=(--run-times "$RUNS" -t "$SECS" --seed 1 --uplink-trace "$T" --downlink-trace "$T")
exp() {
  local name=$1; shift
  [ -f "$OUT/$name/pantheon_perf.json" ] && return 0
  echo ">> $name: $*, $RUNS × $SECS s over $RATE Mbit/s" >&2
  "$PANTHEON" run local "$@" "${common[@]}" --data-dir "$OUT/$name" --overwrite \
    >"$OUT/$name.log" 2>&1 || echo "   (some run failed: $OUT/$name.log)" >&2
}
exp one --schemes "cubic cubic_guest"
exp two-host --mix "cubic cubic"
exp two-guest --mix "cubic_guest cubic_guest"

/usr/bin/python3 - "$OUT" "$RATE" <<'PY'
import json, statistics, sys
out, rate = sys.argv[1], sys.argv[2]
print(f"ceiling over {rate} Mbit/s each way, no added delay, infinite queues\n")
print("| experiment | scheme / mix | runs | tput (Mbit/s, sum of flows) | flows' min one-way delay (ms) | flows' p95 (ms) |")
print("|---|---|---|---|---|---|")
for exp in ["one", "two-host", "two-guest"]:
    try:
        perf = json.load(open(f"{out}/{exp}/pantheon_perf.json"))
    except OSError:
        print(f"| {exp} | (no results) | | | | |"); continue
    for scheme, runs in perf.items():
        tputs, means, p95s = [], [], []
        for run, flows in runs.items():
            fl = [v for k, v in flows.items() if k.isdigit() and isinstance(v, dict)]
            tputs.append(sum(f.get("tput") or 0 for f in fl))
            means += [f["min_delay"] for f in fl if f.get("min_delay") is not None]
            p95s += [f["delay"] for f in fl if f.get("delay") is not None]
        med = lambda x: f"{statistics.median(x):.2f}" if x else "—"
        sd = f" ± {statistics.stdev(tputs):.0f}" if len(tputs) > 1 else ""
        print(f"| {exp} | {scheme} | {len(tputs)} | {statistics.mean(tputs):.0f}{sd} | {med(means)} | {med(p95s)} |")
print(f"\nresults in {out}")
PY
