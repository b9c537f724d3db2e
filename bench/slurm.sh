#!/usr/bin/env bash
# One sweep file, run with the local executor and as a Slurm job array, side by side (issue 33).
#
#   bash bench/slurm.sh [RUNTIME=10] [JOBS=2]   (root)
#
# Brings up a one-node Slurm cluster of its own (as tests/slurm.rs does: Debian's munge and
# slurm packages, a munge key and socket and a slurm.conf in a temporary directory, daemons
# stopped by pid on exit), then runs the same 8-point sweep (2 rates × 2 RTTs × cubic × 2 runs,
# RUNTIME-s points, JOBS at a time) with `--executor local` and with `--executor slurm`, and
# prints:
#   - both tables, row by row (throughput, p95 delay), with the difference and the spread of
#     the two runs of each cell within one executor;
#   - wall time of each sweep; per point, Slurm's overhead: submission → first point started,
#     the slot gap (a point ends → the next point starts in its slot) and last point ended →
#     the command returned (collection included), against the local executor's.
set -euo pipefail
RUNTIME=${1:-10}
JOBS=${2:-2}
cd "$(dirname "$0")/.."
source scripts/setup.sh   # root check, packages, cargo, CARGO_TARGET_DIR
need_packages_not_started munge slurmctld slurmd slurm-client
need_packages python3
echo ">> cargo build --release --workspace --bin pantheon" >&2
cargo build --quiet --release --workspace --bin pantheon
PANTHEON="$CARGO_TARGET_DIR/release/pantheon"

D=$(mktemp -d /tmp/pantheon-slurm-bench.XXXXXX)
chmod 755 "$D"
PIDS=()
cleanup() {
  if [ -f "$D/slurm.conf" ]; then
    SLURM_CONF="$D/slurm.conf" scancel --user=root 2>/dev/null || true
  fi
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill "${PIDS[$i]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$D"/{munge,state,spool,log,work}
chmod 755 "$D"/*
chown munge:munge "$D/munge"
runuser -u munge -- /usr/sbin/mungekey --create --keyfile="$D/munge/munge.key"
host=$(hostname -s)
port=$((20000 + ($$ % 10000) * 2))
cat >"$D/slurm.conf" <<EOF
ClusterName=pantheon
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
SlurmctldPort=$port
SlurmdPort=$((port + 1))
NodeName=$host NodeAddr=127.0.0.1 CPUs=$((2 * JOBS)) State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$D/slurm.conf"
runuser -u munge -- /usr/sbin/munged --foreground --key-file="$D/munge/munge.key" \
  --socket="$D/munge/munge.socket" --log-file="$D/munge/munged.log" \
  --pid-file="$D/munge/munged.pid" --seed-file="$D/munge/munged.seed" &
PIDS+=($!)
for _ in $(seq 100); do [ -S "$D/munge/munge.socket" ] && break; sleep 0.1; done
slurmctld -D >"$D/log/ctld.out" 2>&1 &
PIDS+=($!)
slurmd -D >"$D/log/d.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 120); do [ "$(sinfo -h -o %T 2>/dev/null)" = idle ] && break; sleep 0.5; done
[ "$(sinfo -h -o %T)" = idle ] || { echo "the node did not come up" >&2; cat "$D/log/slurmctld.log" >&2; exit 1; }

cat >"$D/work/bench.toml" <<EOF
name = "slurm-bench"
runtime = $RUNTIME
runs = 2
[environments]
rate_mbps = [10, 20]
rtt_ms = [20, 60]
[mixes]
list = ["cubic"]
EOF
cd "$D/work"
for ex in local slurm; do
  echo ">> sweep, --executor $ex, $JOBS at a time" >&2
  s=$(date +%s.%N)
  "$PANTHEON" sweep bench.toml --out "$D/work/$ex" --executor "$ex" --jobs "$JOBS" >/dev/null 2>"$D/work/$ex.err"
  e=$(date +%s.%N)
  echo "{\"start\": $s, \"end\": $e}" >"$D/work/$ex.time"
done

python3 - "$D/work" "$JOBS" <<'EOF'
import csv, glob, json, os, statistics as st, sys
work, jobs = sys.argv[1], int(sys.argv[2])
def points(ex):
    recs = [json.load(open(p)) for p in glob.glob(f"{work}/{ex}/points/p*/point.json")]
    return sorted(recs, key=lambda r: r["started_unix_s"])
def table(ex):
    rows = {}
    for r in csv.DictReader(open(f"{work}/{ex}/sweep.csv")):
        key = (r["env"], r["run"])
        rows[key] = (float(r["tput_mbps"]), float(r["p95_delay_ms"]))
    return rows
tl, ts = table("local"), table("slurm")
print(f"{'environment':24} {'run':>3} {'tput local':>10} {'slurm':>8} {'p95 local':>10} {'slurm':>8}")
for k in sorted(tl):
    (a, b), (c, d) = tl[k], ts.get(k, (float('nan'),) * 2)
    print(f"{k[0]:24} {k[1]:>3} {a:10.2f} {c:8.2f} {b:10.1f} {d:8.1f}")
envs = sorted({k[0] for k in tl})
print("\nper environment: |local − slurm| of the mean of 2 runs vs the spread of the 2 runs (max − min) within each")
for e in envs:
    for i, what in ((0, "tput Mbit/s"), (1, "p95 ms")):
        l = [tl[k][i] for k in tl if k[0] == e]; s = [ts[k][i] for k in ts if k[0] == e]
        print(f"  {e:24} {what:12} diff {abs(st.mean(l) - st.mean(s)):7.2f}   spread local {max(l) - min(l):6.2f}  slurm {max(s) - min(s):6.2f}")
print()
for ex in ("local", "slurm"):
    t = json.load(open(f"{work}/{ex}.time"))
    recs = points(ex)
    ends = sorted(r["started_unix_s"] + r["wall_s"] for r in recs)
    gaps = []
    starts = [r["started_unix_s"] for r in recs]
    for i in range(jobs, len(starts)):
        gaps.append(starts[i] - ends[i - jobs])
    line = f"{ex:6}: wall {t['end'] - t['start']:6.1f} s for {len(recs)} points; mean point wall {st.mean(r['wall_s'] for r in recs):5.2f} s; slot gap mean {st.mean(gaps):5.2f} s (max {max(gaps):5.2f}); last end → returned {t['end'] - ends[-1]:5.2f} s"
    if ex == "slurm":
        sub = min(json.load(open(p))["submitted_unix_s"] for p in glob.glob(f"{work}/slurm/slurm/*.json"))
        line += f"; submitted → first start {starts[0] - sub:5.2f} s"
    else:
        line += f"; command start → first start {starts[0] - t['start']:5.2f} s"
    print(line)
EOF
