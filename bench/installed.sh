#!/usr/bin/env bash
# The installed programs against the benchmarks of docs/performance.md, side by side in one run:
#
#   bash bench/installed.sh [SECS=10] [REPS=3] [N=10000000]     (root)
#
# 1. emulator: iperf3 TCP cubic through a 2000 Mbit/s trace link, REPS × SECS s, with the
#    installed `pantheon shell mm-link` and with the emulator benchmark (emubench tcp, release
#    build) — docs/performance.md: median 1 914 Mbit/s;
# 2. analysis: a generated run of N packets (ingestbench gen), read and measured by the
#    installed `pantheon analyze` (its per-run "read and measured" line) and by ingestbench
#    binary, one Polars thread each — docs/performance.md: 6.74 M packets/s.
# Prints each figure and the ratio installed ÷ benchmark. Namespaces: pib-<pid> (ours) and
# emb-<pid>-* (emubench's); removed on every exit path, with the iperf3 server we start.
set -euo pipefail
SECS=${1:-10}
REPS=${2:-3}
N=${3:-10000000}
cd "$(dirname "$0")/.."
source scripts/setup.sh
build_and_install >&2
echo ">> cargo build --release --workspace --example emubench --example ingestbench" >&2
cargo build --quiet --release --locked --workspace --example emubench --example ingestbench
EMUBENCH="$CARGO_TARGET_DIR/release/examples/emubench"
INGESTBENCH="$CARGO_TARGET_DIR/release/examples/ingestbench"
PANTHEON=$(command -v pantheon)
echo ">> installed pantheon: $PANTHEON ($(pantheon --version))" >&2

DIR=$(mktemp -d "${TMPDIR:-/tmp}/pantheon-installed.XXXXXX")
NS="pib-$$"
SERVER= CHILD=
cleanup() {
  for p in $SERVER $CHILD; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  ip netns del "$NS" 2>/dev/null || true
  if [ -n "$CHILD" ]; then
    for ns in $(ip netns list | awk '{print $1}' | grep "^emb-$CHILD-" || true); do
      ip netns del "$ns" || true
    done
  fi
  rm -rf "$DIR"
}
trap cleanup EXIT INT TERM
median() { sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

echo ">> 1. TCP cubic through a 2000 Mbit/s trace link, $REPS × $SECS s" >&2
pantheon trace constant 2000 -o "$DIR/2000.trace" >/dev/null
ip netns add "$NS"
ip -n "$NS" link set lo up
shell_rates=()
for _ in $(seq "$REPS"); do
  ip netns exec "$NS" iperf3 -s -1 -p 5402 >/dev/null 2>&1 &
  SERVER=$!
  sleep 0.3
  rate=$(ip netns exec "$NS" pantheon shell mm-link "$DIR/2000.trace" "$DIR/2000.trace" -- \
    iperf3 -c '$MAHIMAHI_BASE' -p 5402 -C cubic -t "$SECS" -f m | awk '/receiver/ {print $(NF-2)}')
  wait "$SERVER" 2>/dev/null || true
  SERVER=
  shell_rates+=("$rate")
done
ip netns del "$NS"
"$EMUBENCH" tcp 2000 "$SECS" "$REPS" > "$DIR/emubench.txt" &
CHILD=$!
wait "$CHILD"
CHILD=
bench_rates=$(grep -E '^ *rep ' "$DIR/emubench.txt" | grep -oE '[0-9]+ Mbit/s' | awk '{print $1}')
shell_median=$(printf '%s\n' "${shell_rates[@]}" | median)
bench_median=$(echo "$bench_rates" | median)
echo "emulator  installed pantheon shell: ${shell_rates[*]} Mbit/s (median $shell_median)"
echo "emulator  emubench (release):       $(echo $bench_rates) Mbit/s (median $bench_median)"
awk -v a="$shell_median" -v b="$bench_median" \
  'BEGIN {printf "emulator  installed / benchmark = %.3f  (docs/performance.md: 1914 Mbit/s; installed / docs = %.3f)\n", a/b, a/1914}'

echo ">> 2. analysis of a generated run of $N packets" >&2
"$INGESTBENCH" gen "$DIR/gen" "$N"
RES="$DIR/results"
mkdir -p "$RES"
for f in "$DIR"/gen/bin/*; do ln -s "$f" "$RES/"; done
printf '{"cc_schemes": ["cubic"], "run_times": 1, "runtime": %s, "flows": 1}\n' \
  "$(awk -v n="$N" 'BEGIN {print n / 1e6}')" > "$RES/pantheon_metadata.json"
export POLARS_MAX_THREADS=1
analyze_rates=() ingest_rates=()
for _ in $(seq "$REPS"); do
  r=$(pantheon analyze "$RES" 2>&1 >/dev/null | grep -oE '\(([0-9.]+) M packets/s\)' | tr -d '(' | awk '{print $1}')
  analyze_rates+=("$r")
  r=$("$INGESTBENCH" binary "$DIR/gen" | grep -oE '[0-9.]+ M packets/s' | awk '{print $1}')
  ingest_rates+=("$r")
done
a_median=$(printf '%s\n' "${analyze_rates[@]}" | median)
i_median=$(printf '%s\n' "${ingest_rates[@]}" | median)
echo "analysis  installed pantheon analyze: ${analyze_rates[*]} M packets/s (median $a_median)"
echo "analysis  ingestbench (release):      ${ingest_rates[*]} M packets/s (median $i_median)"
awk -v a="$a_median" -v b="$i_median" \
  'BEGIN {printf "analysis  installed / benchmark = %.3f  (docs/performance.md: 6.74 M packets/s; installed / docs = %.3f)\n", a/b, a/6.74}'
