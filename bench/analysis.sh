#!/usr/bin/env bash
# Analysis benchmark: ingest + Pantheon's metrics of a generated run of N packets (default
# 10 M), from our binary logs and from Pantheon's merged text log, on one core
# (POLARS_MAX_THREADS=1), each in its own process; prints rates and peak memory (VmHWM).
#
#   [REPS=3] bash bench/analysis.sh [N=10000000]
#
# Targets (analysis issue): binary ≥ 5 M packets/s, text ≥ 1 M lines/s, peak memory ≤ 2× the
# binary logs' size. Needs ~2 GB of disk in $TMPDIR for 10 M packets; removed at the end.
set -euo pipefail
N=${1:-10000000}
cd "$(dirname "$0")/.."
source scripts/setup.sh
echo ">> cargo build --release --workspace --example ingestbench (Polars: long the first time)" >&2
cargo build --quiet --release --workspace --example ingestbench
BIN="$CARGO_TARGET_DIR/release/examples/ingestbench"
DIR=$(mktemp -d "${TMPDIR:-/tmp}/pantheon-ingestbench.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
echo ">> generating $N packets" >&2
"$BIN" gen "$DIR" "$N"
export POLARS_MAX_THREADS=1
REPS=${REPS:-3}
echo ">> $REPS measurements of each (separate processes); compare the medians" >&2
for _ in $(seq "$REPS"); do "$BIN" binary "$DIR"; done
for _ in $(seq "$REPS"); do "$BIN" text "$DIR"; done
