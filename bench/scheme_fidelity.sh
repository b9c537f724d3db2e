#!/usr/bin/env bash
# Scheme fidelity (issue 55): every scheme that stands for one of Pantheon's, over the three
# settings of the main job's Nepal replication — the settings Pantheon users ran with real
# Mahimahi — so that anyone holding Pantheon's own runs of them can compare, scheme by scheme:
#
#   infinite   10 Mbit/s constant both ways (traces/10mbps.trace), mm-delay 28, Mahimahi's
#              default infinite queues
#   loss       the same + mm-loss uplink 0.004 + mm-loss downlink 0.004 (0.4 % i.i.d. each way)
#   droptail50 the same as loss + a 50-packet DropTail uplink queue
#
#   bash bench/scheme_fidelity.sh [RUNS=10] [SECS=30]     (root)
#   FIDELITY_SCHEMES="cubic quic copa_orig"   (default: every runnable scheme with a [pantheon]
#                                              table, as `pantheon schemes list --json` says)
#   FIDELITY_SETTINGS="infinite loss droptail50"  FIDELITY_OUT=DIR (kept; default a temporary one)
#   FIDELITY_UNTIL=EPOCH_SECONDS   start no run after then (the table covers what was run)
#   FIDELITY_FIRST=K               the first run id (default 1): run ids K..RUNS, e.g. to add runs
#                                  6-10 to a table of five whose directory was not kept
#
# Run id by run id, each setting in turn: one `pantheon run local --start-run-id K` of the
# schemes (interleaved, as Pantheon's harness) into DIR/<setting>, so that a table at any moment
# has every scheme and setting with the same number of runs. A run id already in
# DIR/<setting>/pantheon_perf.json for a scheme is not run again: with a kept FIDELITY_OUT the
# benchmark resumes where it stopped (across days; the binary is the same while the schemes'
# code is). Then a Markdown table: per scheme and setting the mean over runs and the sample
# standard deviation of throughput (Mbit/s) and p95 one-way delay (ms), and the mean loss (%),
# from each run's pantheon_perf.json (Pantheon's own definitions); and every run's figures in
# DIR/runs.csv (setting, scheme, run, tput_mbps, p95_delay_ms, loss_pct: what
# bench/scheme_fidelity_runs.csv keeps of the runs measured so far). Pantheon's own runs of a
# setting are judged against ours with `pantheon compare THEIRS DIR/<setting>` (Pantheon's names
# read as ours: copa → copa_orig; docs/analysis.md).
set -euo pipefail
RUNS=${1:-10}
SECS=${2:-30}
cd "$(dirname "$0")/.."
source scripts/setup.sh   # root check, iperf3, cargo, CARGO_TARGET_DIR, $PANTHEON
build_and_install >&2
if [[ -z "${FIDELITY_SCHEMES:-}" ]]; then
  FIDELITY_SCHEMES=$("$PANTHEON" schemes list --json | python3 -c '
import json, sys
print(" ".join(s["name"] for s in json.load(sys.stdin)
               if s.get("pantheon") and s["runnable"]
               and s["pantheon"]["fidelity"] != "not_reproduced"))')
fi
SETTINGS=${FIDELITY_SETTINGS:-infinite loss droptail50}
OUT=${FIDELITY_OUT:-$(mktemp -d /tmp/pscheme_fidelity.XXXXXX)}
[[ -n "${FIDELITY_OUT:-}" ]] || trap 'rm -rf "$OUT"' EXIT
mkdir -p "$OUT"
trace=traces/10mbps.trace
# The schemes of $1 that have no run id $2 in $OUT/$1/pantheon_perf.json.
missing() {
  python3 - "$OUT/$1/pantheon_perf.json" "$2" $FIDELITY_SCHEMES <<'PY'
import json, sys
path, run, schemes = sys.argv[1], sys.argv[2], sys.argv[3:]
try:
    perf = json.load(open(path))
except (OSError, ValueError):
    perf = {}
print(" ".join(s for s in schemes if not (perf.get(s) or {}).get(run, {}).get("all")))
PY
}
for run in $(seq "${FIDELITY_FIRST:-1}" "$RUNS"); do
  for setting in $SETTINGS; do
    mm="mm-delay 28"
    link=()
    case "$setting" in
      infinite) ;;
      loss) mm="$mm mm-loss uplink 0.004 mm-loss downlink 0.004" ;;
      droptail50) mm="$mm mm-loss uplink 0.004 mm-loss downlink 0.004"
        link=(--extra-mm-link-args "--uplink-queue=droptail --uplink-queue-args=packets=50") ;;
      *) echo "unknown setting $setting (infinite, loss, droptail50)" >&2; exit 2 ;;
    esac
    todo=$(missing "$setting" "$run")
    [[ -n "$todo" ]] || continue
    if [[ -n "${FIDELITY_UNTIL:-}" ]] && (( $(date +%s) >= FIDELITY_UNTIL )); then
      echo ">> stopped before run $run of $setting (FIDELITY_UNTIL)" >&2
      break 2
    fi
    echo ">> run $run of $RUNS, $setting: $todo ($SECS s)" >&2
    # A scheme that fails leaves its run out; the table counts the runs it has.
    "$PANTHEON" run local --append --schemes "$todo" --start-run-id "$run" --run-times 1 \
      --runtime "$SECS" --data-dir "$OUT/$setting" --uplink-trace "$trace" \
      --downlink-trace "$trace" --prepend-mm-cmds "$mm" "${link[@]}" >/dev/null || true
  done
done
python3 - "$OUT" "$SETTINGS" $FIDELITY_SCHEMES <<'PY'
import json, statistics, sys
out, settings, schemes = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
def runs(setting, scheme):
    try:
        perf = json.load(open(f"{out}/{setting}/pantheon_perf.json"))[scheme]
    except (OSError, KeyError):
        return []
    return [r["all"] for r in perf.values() if r and r.get("all")]
def ms(xs, f):
    if not xs:
        return "–"
    m = statistics.mean(xs)
    return f"{m:{f}} ± {statistics.stdev(xs):{f}}" if len(xs) > 1 else f"{m:{f}}"
with open(f"{out}/runs.csv", "w") as f:
    f.write("setting,scheme,run,tput_mbps,p95_delay_ms,loss_pct\n")
    for st in settings:
        try:
            perf = json.load(open(f"{out}/{st}/pantheon_perf.json"))
        except (OSError, ValueError):
            continue
        for s in sorted(perf):
            for run in sorted(perf[s] or {}, key=int):
                r = (perf[s][run] or {}).get("all")
                if r:
                    f.write(f"{st},{s},{run},{r['tput']:.4f},{r['delay']:.3f},"
                            f"{r['loss'] * 100:.4f}\n")
print("| scheme | setting | runs | throughput (Mbit/s) | p95 one-way delay (ms) | loss (%) |")
print("|---|---|---|---|---|---|")
for s in schemes:
    for st in settings:
        r = runs(st, s)
        loss = f"{statistics.mean(x['loss'] for x in r) * 100:.2f}" if r else "–"
        print(f"| {s} | {st} | {len(r)} | {ms([x['tput'] for x in r], '.2f')} "
              f"| {ms([x['delay'] for x in r], '.1f')} | {loss} |")
PY
