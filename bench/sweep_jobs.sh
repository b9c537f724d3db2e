#!/usr/bin/env bash
# How many sweep points fit on this machine at once without changing results (issue 27):
# the same small sweep — the heaviest environments of sweeps/scavenger.toml (50 and 100 Mbit/s,
# 60 ms, 2 BDP) with the user-space QUIC BBRv3 and kernel Cubic, each against LEDBAT and alone,
# 2 runs each — run with --jobs 1 and then --jobs 2, side by side: wall time, and each flow's
# throughput and p95 one-way delay under both (mean of the runs, and the runs' own spread).
#
#   bash bench/sweep_jobs.sh [RUNTIME_S]      (root; default 20 s runs: about 10 minutes)
set -euo pipefail
runtime=${1:-20}
pantheon=${PANTHEON:-pantheon}
out=$(mktemp -d /tmp/pantheon-sweep-jobs.XXXXXX)
cat >"$out/jobs.toml" <<TOML
name = "jobs"
runtime = $runtime
runs = 2
[environments]
rate_mbps = [50, 100]
rtt_ms = [60]
buffer_bdp = [2]
[mixes]
primaries = ["quic_bbr3", "cubic"]
contenders = ["ledbat"]
TOML
for jobs in 1 2; do
  start=$(date +%s)
  "$pantheon" sweep "$out/jobs.toml" --out "$out/jobs$jobs" --jobs "$jobs" >/dev/null 2>"$out/jobs$jobs.log"
  echo "jobs $jobs: $(($(date +%s) - start)) s wall" | tee -a "$out/walls"
done
python3 - "$out" <<'PY'
import csv, statistics, sys
out = sys.argv[1]
def rows(j):
    by = {}
    for r in csv.DictReader(open(f"{out}/jobs{j}/sweep.csv")):
        by.setdefault((r["env"], r["mix"], r["flow"], r["scheme"]), []).append(
            (float(r["tput_mbps"]), float(r["p95_delay_ms"])))
    return by
a, b = rows(1), rows(2)
print("env | mix | flow | tput jobs 1 (runs) | tput jobs 2 (runs) | Δ mean | p95 delay jobs 1 | jobs 2")
for k in sorted(a):
    ta = [x[0] for x in a[k]]; tb = [x[0] for x in b.get(k, [])]
    da = [x[1] for x in a[k]]; db = [x[1] for x in b.get(k, [])]
    if not tb:
        continue
    d = (statistics.mean(tb) - statistics.mean(ta)) / statistics.mean(ta) * 100 if statistics.mean(ta) else float("nan")
    f = lambda v: "/".join(f"{x:.2f}" for x in v)
    print(f"{k[0]} | {k[1]} | {k[2]} {k[3]} | {f(ta)} | {f(tb)} | {d:+.1f} % | {f(da)} | {f(db)}")
PY
cat "$out/walls"
echo "results in $out" >&2
