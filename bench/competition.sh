#!/usr/bin/env bash
# Competition physics (issue 27): mixed experiments whose outcome the literature predicts,
# run with the installed `pantheon` and summarised from their pantheon_perf.json.
#
#   bash bench/competition.sh [RUNS] [RUNTIME_S]      (root; default 3 runs of 60 s each)
#
# Path: 20 Mbit/s both ways, 40 ms RTT (mm-delay 20), DropTail queues of 1 BDP (66 packets of
# 1500 B) unless said otherwise.
# CASES (space-separated) runs only some cases, e.g. CASES="cubic-cubic-rtt".
#   1. two Cubic flows, equal RTT: Jain's index over the last 30 s (expected ≥ 0.9); then the
#      same with the second flow given 60 ms of extra one-way delay (`cubic+60`: RTT 160 ms
#      against 40 ms): the shorter-RTT flow gets more (RTT unfairness)
#   2. BBR vs Cubic with 0.5-BDP (33 packets) and 16-BDP (1066 packets) buffers: each one's
#      share (BBR dominates shallow buffers and loses ground in deep ones: Ware et al., IMC 2019)
#   3. LEDBAT vs Cubic, both from the start: Cubic's throughput ratio (competing ÷ alone, from
#      solo runs of each over the same path) and LEDBAT's share
# Prints one line per run and per-case medians; the results directories stay in the
# directory it prints.
set -euo pipefail
runs=${1:-3}
runtime=${2:-60}
pantheon=${PANTHEON:-pantheon}
out=$(mktemp -d /tmp/pantheon-competition.XXXXXX)
trace=$out/20mbps.trace
"$pantheon" trace constant 20 -o "$trace" >/dev/null
queue() { echo "--uplink-queue=droptail --uplink-queue-args=packets=$1 --downlink-queue=droptail --downlink-queue-args=packets=$1"; }
cases=${CASES:-cubic-cubic cubic-cubic-rtt bbr-cubic-shallow bbr-cubic-deep solo cubic-ledbat}
run() { # run DIR QUEUE_PACKETS ARGS…
  local dir=$1 packets=$2
  shift 2
  [[ " $cases " == *" $dir "* ]] || return 0
  echo ">> $dir: $* (queue $packets packets)" >&2
  "$pantheon" run local --runtime "$runtime" --run-times "$runs" --seed 1 \
    --uplink-trace "$trace" --downlink-trace "$trace" --prepend-mm-cmds "mm-delay 20" \
    --extra-mm-link-args "$(queue "$packets")" --data-dir "$out/$dir" "$@" >"$out/$dir.log" 2>&1 \
    || { echo "$dir failed: see $out/$dir.log" >&2; tail -5 "$out/$dir.log" >&2; }
}
run cubic-cubic 66 --mix "cubic cubic"
run cubic-cubic-rtt 66 --mix "cubic cubic+60"
run bbr-cubic-shallow 33 --mix "bbr cubic"
run bbr-cubic-deep 1066 --mix "bbr cubic"
run solo 66 --schemes "cubic ledbat"
run cubic-ledbat 66 --mix "cubic ledbat" --baseline "$out/solo"
echo "results in $out" >&2

python3 - "$out" "$cases" <<'EOF'
import json, statistics, sys
out = sys.argv[1]
cases = sys.argv[2].split()

def runs(case):
    perf = json.load(open(f"{out}/{case}/pantheon_perf.json"))
    (name, by_run), = perf.items()
    return [(rid, r) for rid, r in sorted(by_run.items(), key=lambda x: int(x[0])) if "competition" in r]

def jain(x):
    return sum(x) ** 2 / (len(x) * sum(v * v for v in x)) if any(x) else float("nan")

print("case | run | flow tput (Mbit/s) | shares | Jain (all active) | Jain (last 30 s) | convergence (s)")
med = {}
for case in [c for c in ["cubic-cubic", "cubic-cubic-rtt", "bbr-cubic-shallow", "bbr-cubic-deep", "cubic-ledbat"] if c in cases]:
    for rid, r in runs(case):
        c = r["competition"]
        flows = [r[k] for k in sorted((k for k in r if k.isdigit()), key=int)]
        tputs = [f["tput"] for f in flows]
        per_s = c["tput_per_s"]
        last = [sum(s[-30:]) / len(s[-30:]) for s in per_s]
        shares = [t / sum(last) for t in last]
        names = [f["scheme"] for f in flows]
        ratio = [f.get("tput_ratio") for f in flows]
        med.setdefault(case, []).append((shares, jain(last), c["jain"], ratio, names))
        conv = c["convergence_time"]
        print(f"{case} | {rid} | " + ", ".join(f"{n} {t:.2f}" for n, t in zip(names, tputs))
              + " | " + ", ".join(f"{n} {s:.2f}" for n, s in zip(names, shares))
              + f" | {c['jain']:.3f} | {jain(last):.3f} | {conv if conv is None else round(conv, 1)}"
              + ("" if ratio[0] is None else " | ratios " + ", ".join(f"{n} {x:.3f}" for n, x in zip(names, ratio) if x is not None)))
print()
for case, rows in med.items():
    names = rows[0][4]
    shares = [statistics.median(r[0][i] for r in rows) for i in range(len(names))]
    line = f"{case}: median shares (last 30 s) " + ", ".join(f"{n} {s:.2f}" for n, s in zip(names, shares))
    line += f"; median Jain (last 30 s) {statistics.median(r[1] for r in rows):.3f}"
    ratios = [r[3][0] for r in rows if r[3][0] is not None]
    if ratios:
        line += f"; {names[0]}'s median throughput ratio {statistics.median(ratios):.3f}"
    print(line)
EOF
