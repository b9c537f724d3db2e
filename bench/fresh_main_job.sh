#!/usr/bin/env bash
# How long a newcomer waits: the README's first command (scripts/main-job.sh) from a new clone
# with an empty cargo registry (a CARGO_HOME of its own), an empty build directory and its own
# install prefix, as on a fresh machine — except the Debian packages, which stay installed
# (their install took about 30 s on a fresh machine: iperf3, iptables, ping, gcc).
# Prints, in seconds from the start: the build's end, the first results (the `base`
# experiment's summary) and the end; `--timings` of the build in $OUT/target/cargo-timings/.
#
#   bash bench/fresh_main_job.sh [OUT]      (as root; OUT default /tmp/fresh-main-job)
#
# It removes OUT first. Nothing it makes is left outside OUT (results are in OUT/clone/results).
set -euo pipefail
out=${1:-/tmp/fresh-main-job}
src=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$out"
mkdir -p "$out"
git clone --quiet "$src" "$out/clone"
# rustup's proxies stay where they are; the registry and git caches start empty.
export CARGO_HOME="$out/cargo-home"
mkdir -p "$CARGO_HOME"
export RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}"
export PATH="$out/prefix/bin:$HOME/.cargo/bin:$PATH"
export CARGO_TARGET_DIR="$out/target" PANTHEON_PREFIX="$out/prefix"
start=$(date +%s.%N)
cd "$out/clone"
PANTHEON_BUILD_FLAGS="--timings" bash scripts/main-job.sh 2>&1 | while IFS= read -r line; do
  printf '%7.1f %s\n' "$(awk "BEGIN { print $(date +%s.%N) - $start }")" "$line"
done | tee "$out/main-job.log"
end=$(date +%s.%N)
built=$(grep -m1 '>> install pantheon' "$out/main-job.log" | awk '{print $1}')
first=$(grep -m1 '^ *[0-9.]* >> loss' "$out/main-job.log" | awk '{print $1}')
printf 'build and install: %s s\nfirst results (base experiment summarised): %s s\nwhole main job: %.1f s\n' \
  "$built" "$first" "$(awk "BEGIN { print $end - $start }")"
