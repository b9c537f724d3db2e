#!/usr/bin/env bash
# Kernel schemes in a guest kernel (issue 51): the seeds' Vegas row and the guest's fidelity.
# Over the main job's three Nepal replication settings (scripts/main-job.sh), RUNS runs of SECS
# seconds each:
#   base      10 Mbit/s each way, mm-delay 28, Mahimahi's infinite queues;
#   loss      the same with 0.4 % i.i.d. loss each way;
#   droptail  the same with a 50-packet DropTail uplink.
# Per setting, one experiment of GUESTFID_SCHEMES (default "vegas cubic cubic_guest bbr bbr_fq":
# Vegas, whose sender runs in Debian's Linux 6.1 under QEMU; the host's Cubic and BBR and the
# same algorithms in the guest). Prints each scheme's mean ± sd of Pantheon's throughput,
# 95th-percentile one-way delay and loss per setting (pantheon_perf.json, "all"), then host
# against guest (cubic vs cubic_guest, bbr vs bbr_fq): the difference of the means in % of the
# host's, the runs' spread (the larger sd, % of the host's mean) and the two-sample
# Kolmogorov–Smirnov p-value (scipy); "ok" when |difference| ≤ max(5 %, spread) and p ≥ 0.05.
# (BBR on this host runs without fq — its kernel has no sch_fq — and bbr_fq with it: a
# difference there is the qdisc's as much as the guest's.)
#
# GUESTFID_SETTINGS narrows the settings (default "base loss droptail").
#
#   bash bench/guest_fidelity.sh [RUNS=10] [SECS=30]          (root; after `pantheon schemes
#   setup vegas`: the guest kernel)
set -euo pipefail
RUNS=${1:-10}
SECS=${2:-30}
SCHEMES=${GUESTFID_SCHEMES:-vegas cubic cubic_guest bbr bbr_fq}
SETTINGS=${GUESTFID_SETTINGS:-base loss droptail}
cd "$(dirname "$0")/.."
source scripts/setup.sh   # root check, cargo, CARGO_TARGET_DIR, $PANTHEON
need_packages python3-scipy
[ -n "${GUESTFID_NO_BUILD:-}" ] || build_and_install >&2
OUT=${GUESTFID_OUT:-$(mktemp -d /tmp/pguestfid.XXXXXX)}
mkdir -p "$OUT"
T=$PWD/traces/10mbps.trace
for setting in $SETTINGS; do
  case $setting in
    base) ARGS=(--prepend-mm-cmds "mm-delay 28") ;;
    loss) ARGS=(--prepend-mm-cmds "mm-delay 28 mm-loss uplink 0.004 mm-loss downlink 0.004") ;;
    droptail) ARGS=(--prepend-mm-cmds "mm-delay 28"
                    --extra-mm-link-args "--uplink-queue=droptail --uplink-queue-args=packets=50") ;;
  esac
  dir=$OUT/$setting
  [ -f "$dir/pantheon_perf.json" ] && continue
  echo ">> $setting: $SCHEMES, $RUNS × $SECS s" >&2
  "$PANTHEON" run local --schemes "$SCHEMES" --run-times "$RUNS" -t "$SECS" --seed 1 \
    --uplink-trace "$T" --downlink-trace "$T" "${ARGS[@]}" --data-dir "$dir" --overwrite \
    >"$dir.log" 2>&1 || echo "   (some run failed: $dir.log)" >&2
done

/usr/bin/python3 - "$OUT" "$SCHEMES" "$RUNS" "$SECS" "$SETTINGS" <<'PY'
import json, statistics, sys
from scipy.stats import ks_2samp
out, schemes, runs, secs = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4]
settings = sys.argv[5].split()

def values(setting, scheme):
    perf = json.load(open(f"{out}/{setting}/pantheon_perf.json"))
    v = {"tput": [], "delay": [], "loss": []}
    for run, flows in sorted(perf.get(scheme, {}).items(), key=lambda kv: int(kv[0])):
        a = flows.get("all") or {}
        if all(a.get(k) is not None for k in v):
            for k in v:
                v[k].append(a[k])
    return v

def ms(x):
    return f"{statistics.mean(x):.2f} ± {statistics.stdev(x):.2f}" if len(x) > 1 else "—"

print(f"{runs} runs × {secs} s per scheme and setting, seed 1; mean ± sd\n")
print("| setting | scheme | runs | tput (Mbit/s) | p95 one-way delay (ms) | loss (%) |")
print("|---|---|---|---|---|---|")
for st in settings:
    for s in schemes:
        v = values(st, s)
        loss = [100 * x for x in v["loss"]]
        print(f"| {st} | {s} | {len(v['tput'])} | {ms(v['tput'])} | {ms(v['delay'])} | {ms(loss)} |")
print()
pairs = [(h, g) for h, g in (("cubic", "cubic_guest"), ("bbr", "bbr_fq")) if h in schemes and g in schemes]
print("| setting | host | guest | stat | diff % | spread % | KS p | verdict |")
print("|---|---|---|---|---|---|---|---|")
bad = 0
for st in settings:
    for h, g in pairs:
        vh, vg = values(st, h), values(st, g)
        for stat in ("tput", "delay"):
            a, b = vh[stat], vg[stat]
            if len(a) < 2 or len(b) < 2:
                print(f"| {st} | {h} | {g} | {stat} | | | | too few runs |"); bad += 1; continue
            m = statistics.mean(a)
            diff = 100 * (statistics.mean(b) - m) / m
            spread = 100 * max(statistics.stdev(a), statistics.stdev(b)) / m
            p = ks_2samp(a, b).pvalue
            ok = abs(diff) <= max(5, spread) and p >= 0.05
            bad += not ok
            print(f"| {st} | {h} | {g} | {stat} | {diff:+.1f} | {spread:.1f} | {p:.3f} | {'ok' if ok else 'OUTSIDE'} |")
print(f"\n{bad} (setting, pair, statistic) cases outside; results in {out}")
PY
