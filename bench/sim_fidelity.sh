#!/usr/bin/env bash
# Fidelity of simulated time (issue 30): the QUIC schemes simulated (`pantheon run sim`) against
# the same schemes run in real time through the tunnel and the emulator (`pantheon run local`),
# over five emulators, RUNS runs of SECS seconds per scheme, side and emulator.
#
#   bash bench/sim_fidelity.sh [RUNS=10] [SECS=20]     (root, for the real-time side)
#   SIMFID_SCHEMES="quic quic_newreno quic_bbr" (default)   SIMFID_EMULATORS="10inf 10bdp …"
#   SIMFID_HOST_LATENCY=measured: the simulated side's --host-latency (default ideal); its
#   runs go to EMULATOR-sim-LATENCY/ (ideal: EMULATOR-sim/), beside the same real-time runs,
#   so that one real-time side serves every host model.
#
# The emulators (both directions alike unless said):
#   10inf    10 Mbit/s, mm-delay 28, Mahimahi's infinite queues;
#   10bdp    10 Mbit/s, mm-delay 28, DropTail of one BDP (10 Mbit/s × 56 ms = 47 packets);
#   10loss   10 Mbit/s, mm-delay 28, 0.4 % i.i.d. uplink loss, infinite queues;
#   mexico   the calibrated preset mexico-cellular-aws-california (2.64 Mbit/s Poisson
#            delivery, mm-delay 88, 130-packet uplink DropTail);
#   100bdp   100 Mbit/s, mm-delay 28, DropTail of one BDP (467 packets).
# Both sides get --seed 1 (run i's emulator seed is 1 ^ i on both: the same loss draws and
# Poisson deliveries in the same order). Per run: Pantheon's throughput and 95th-percentile
# one-way delay of the run (pantheon_perf.json, "all"). Per (emulator, scheme) and statistic:
# the mean of each side, their difference in % of the real mean, the runs' own spread (the
# larger side's standard deviation, % of the real mean) and the two-sample Kolmogorov–Smirnov
# p-value (scipy). "ok" when |difference| ≤ max(5 %, spread) and p ≥ 0.05. Also each simulated
# run's cost (real s per simulated s) from its record.
set -euo pipefail
RUNS=${1:-10}
SECS=${2:-20}
SCHEMES=${SIMFID_SCHEMES:-quic quic_newreno quic_bbr}
EMULATORS=${SIMFID_EMULATORS:-10inf 10bdp 10loss mexico 100bdp}
HOST=${SIMFID_HOST_LATENCY:-ideal}
SIMTAG=sim$([ "$HOST" = ideal ] || echo "-$HOST")
cd "$(dirname "$0")/.."
source scripts/setup.sh   # root check, cargo, CARGO_TARGET_DIR, $PANTHEON
need_packages python3-scipy
build_and_install >&2
OUT=${SIMFID_OUT:-$(mktemp -d /tmp/psimfid.XXXXXX)}
mkdir -p "$OUT"
"$PANTHEON" trace constant 10 -o "$OUT/10mbps.trace" >/dev/null
"$PANTHEON" trace constant 100 -o "$OUT/100mbps.trace" >/dev/null

droptail() {
  echo "--uplink-queue=droptail --uplink-queue-args=packets=$1 --downlink-queue=droptail --downlink-queue-args=packets=$1"
}

# The emulator's flags of `run local`/`run sim`, into ARGS.
set_path() {
  local t10=$OUT/10mbps.trace t100=$OUT/100mbps.trace
  case "$1" in
    10inf)  ARGS=(--uplink-trace "$t10" --downlink-trace "$t10" --prepend-mm-cmds "mm-delay 28") ;;
    10bdp)  ARGS=(--uplink-trace "$t10" --downlink-trace "$t10" --prepend-mm-cmds "mm-delay 28"
                  --extra-mm-link-args "$(droptail 47)") ;;
    10loss) ARGS=(--uplink-trace "$t10" --downlink-trace "$t10"
                  --prepend-mm-cmds "mm-delay 28 mm-loss uplink 0.004") ;;
    mexico) ARGS=(--emulator mexico-cellular-aws-california) ;;
    100bdp) ARGS=(--uplink-trace "$t100" --downlink-trace "$t100" --prepend-mm-cmds "mm-delay 28"
                  --extra-mm-link-args "$(droptail 467)") ;;
    *) echo "unknown emulator $1" >&2; exit 2 ;;
  esac
}

for emu in $EMULATORS; do
  set_path "$emu"
  for mode in local sim; do
    dir="$OUT/$emu-$mode" extra=()
    if [ $mode = sim ]; then dir="$OUT/$emu-$SIMTAG" extra=(--host-latency "$HOST"); fi
    [ -f "$dir/pantheon_perf.json" ] && continue
    echo ">> $emu: pantheon run $mode ($RUNS × $SECS s per scheme)" >&2
    "$PANTHEON" run "$mode" --schemes "$SCHEMES" --run-times "$RUNS" -t "$SECS" --seed 1 \
      --data-dir "$dir" --overwrite "${ARGS[@]}" "${extra[@]}" >"$dir.log" 2>&1 ||
      echo "   (some run failed: $dir.log)" >&2
  done
done

/usr/bin/python3 - "$OUT" "$SCHEMES" "$EMULATORS" "$RUNS" "$SECS" "$SIMTAG" "$HOST" <<'PY'
import json, re, statistics, sys
from scipy.stats import ks_2samp
out, schemes, emulators, runs, secs, simtag, host = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]

def values(emu, mode, scheme):
    perf = json.load(open(f"{out}/{emu}-{mode}/pantheon_perf.json"))
    t, d = [], []
    for run, flows in sorted(perf.get(scheme, {}).items(), key=lambda kv: int(kv[0])):
        a = flows.get("all") or {}
        if a.get("tput") is not None and a.get("delay") is not None:
            t.append(a["tput"]); d.append(a["delay"])
    return t, d

def cost(emu):
    runs = json.load(open(f"{out}/{emu}-{simtag}/pantheon_runs.json"))
    r = [float(m.group(1)) for rec in runs for n in rec.get("notes", [])
         for m in [re.search(r"([0-9.]+) real s per simulated s", n)] if m]
    return statistics.median(r) if r else float("nan")

print(f"{runs} runs × {secs} s per scheme and side; seed 1; simulated hosts {host}; mean ± sd; diff and spread in % of the real mean\n")
print("| emulator | scheme | stat | real | simulated | diff % | spread % | KS p | verdict |")
print("|---|---|---|---|---|---|---|---|---|")
bad = 0
for emu in emulators:
    for s in schemes:
        (rt, rd), (st, sd) = values(emu, "local", s), values(emu, simtag, s)
        for stat, r, m, unit in (("tput", rt, st, "Mbit/s"), ("p95 delay", rd, sd, "ms")):
            if len(r) < 2 or len(m) < 2:
                print(f"| {emu} | {s} | {stat} | {len(r)} runs | {len(m)} runs | | | | too few runs |"); bad += 1; continue
            mr, ms = statistics.mean(r), statistics.mean(m)
            diff = 100 * (ms - mr) / mr
            spread = 100 * max(statistics.stdev(r), statistics.stdev(m)) / mr
            p = ks_2samp(r, m).pvalue
            ok = abs(diff) <= max(5, spread) and p >= 0.05
            bad += not ok
            print(f"| {emu} | {s} | {stat} | {mr:.2f} ± {statistics.stdev(r):.2f} | {ms:.2f} ± {statistics.stdev(m):.2f} | {diff:+.1f} | {spread:.1f} | {p:.3f} | {'ok' if ok else 'OUTSIDE'} |")
print()
for emu in emulators:
    print(f"{emu}: simulated runs cost a median {cost(emu):.3f} real s per simulated s")
print(f"\n{bad} (emulator, scheme, statistic) cases outside; results in {out}")
PY
