#!/usr/bin/env bash
# Calibration against real paths (issue 8): Pantheon's reports of two wired paths as targets.
#
#   bash bench/calibrate.sh PATH [MAX_EVALS=20] [RUNTIME=30] [DELIVERY=both]   (root)
#
# PATH: california-mexico (BBR, Cubic), brazil-colombia (BBR, Copa, Cubic, LEDBAT, QUIC Cubic)
# or brazil-colombia-all (those and PCC, Sprout, TaoVA, Verus, WebRTC media: every scheme of
# that report that runs here but SCReAM, see the .csv); the targets are bench/calibrate/PATH.csv
# (medians from shared/seeds/000 and 001). For brazil-colombia-all, first the five-scheme fit
# (bench/calibrate/brazil-colombia-5.json) is run with every scheme (SCReAM too), 2 × 30 s, and
# scored per scheme: does an emulator fitted on five polite schemes predict the others?
# One candidate at a time (--jobs 1: at ~100 Mbit/s two at once would share the 2 CPUs), one
# RUNTIME-second run per scheme and candidate, MAX_EVALS evaluations per delivery process, the
# 2 best measured again. Prints the best emulator, its replication error and the wall time;
# for California → Mexico also Pantheon's published emulator of the path, run with the same
# schemes and scored the same way. Results stay in results/calibrate-PATH/ (delete it to start
# over; otherwise the search resumes from its log).
#
# california-mexico-quic (issue 30): the same target with the QUIC schemes (quic, quic_bbr;
# bench/calibrate/california-mexico-quic.csv). SIMULATE=1 evaluates the candidates in simulated
# time (`--simulate`, two at a time, results in results/calibrate-PATH-sim/), then runs the emulator it found
# in real time (run local, 3 runs per scheme) and scores that too: the error that counts is the
# real-time one. Run it with and without SIMULATE=1 to compare wall time and error.
set -euo pipefail
path=${1:?usage: [SIMULATE=1] bash bench/calibrate.sh california-mexico|california-mexico-quic|brazil-colombia|brazil-colombia-all [MAX_EVALS] [RUNTIME] [DELIVERY]}
MAX=${2:-20}
RUNTIME=${3:-30}
DELIVERY=${4:-both}
cd "$(dirname "$0")/.."
source scripts/setup.sh   # root check, iperf3, cargo, CARGO_TARGET_DIR, $PANTHEON
case $path in
  california-mexico) schemes="bbr cubic" ;;
  brazil-colombia) schemes="bbr copa_orig cubic ledbat quic" ;;
  brazil-colombia-all) schemes="bbr calibrated_koho copa_orig cubic koho_cc ledbat quic pcc sprout taova verus webrtc" ;;
  california-mexico-quic) schemes="quic quic_bbr" ;;
  *) echo "unknown path $path" >&2; exit 2 ;;
esac
build_and_install >&2
"$PANTHEON" schemes setup $schemes >/dev/null
out=results/calibrate-$path
simulate=()
jobs=1
# A simulated evaluation uses one core: two at a time on this 2-core machine.
if [ "${SIMULATE:-0}" = 1 ]; then simulate=(--simulate); out=$out-sim; jobs=2; fi
if [ "$path" = brazil-colombia-all ] && [ ! -e "$out-five/pantheon_perf.json" ]; then
  echo ">> the five-scheme fit of this path, every scheme of the report that runs here" >&2
  "$PANTHEON" schemes setup scream >/dev/null
  "$PANTHEON" run local --schemes "$schemes scream" --runtime 30 --run-times 2 --seed 1 \
    --emulator bench/calibrate/brazil-colombia-5.json --data-dir "$out-five" >/dev/null
fi
if [ -e "$out-five/pantheon_perf.json" ]; then
  "$PANTHEON" compare "bench/calibrate/$path.csv" "$out-five" | grep -E "throughput|95th|Replication"
fi
start=$(date +%s)
"$PANTHEON" calibrate "bench/calibrate/$path.csv" --schemes "$schemes" --runtime "$RUNTIME" \
  --max-evals "$MAX" --initial-evals 6 --confirm 2 --jobs "$jobs" --delivery "$DELIVERY" --out "$out" \
  "${simulate[@]}"
echo "wall time of this invocation: $(( $(date +%s) - start )) s"
if [ "${#simulate[@]}" -gt 0 ] && [ ! -e "$out/real-time/pantheon_perf.json" ]; then
  echo ">> the emulator found in simulated time, run in real time (3 runs per scheme)" >&2
  "$PANTHEON" run local --schemes "$schemes" --runtime "$RUNTIME" --run-times 3 --seed 1 \
    --emulator "$out/emulator.json" --data-dir "$out/real-time" >/dev/null
fi
if [ -e "$out/real-time/pantheon_perf.json" ]; then
  echo "the simulated calibration's emulator, measured in real time:"
  "$PANTHEON" compare "bench/calibrate/$path.csv" "$out/real-time" | grep -E "throughput|95th|Replication"
fi
if [ "$path" = california-mexico ] && [ ! -e "$out/pantheon-emulator/pantheon_perf.json" ]; then
  echo ">> Pantheon's own calibrated emulator of this path, same schemes and runtime" >&2
  "$PANTHEON" run local --schemes "$schemes" --runtime "$RUNTIME" --seed 1 \
    --emulator aws-california-mexico --data-dir "$out/pantheon-emulator" >/dev/null
fi
if [ -e "$out/pantheon-emulator/pantheon_perf.json" ]; then
  "$PANTHEON" compare "bench/calibrate/$path.csv" "$out/pantheon-emulator" | tail -1
fi
python3 - "$out" "$path" <<'PY'
import json, sys
out, path = sys.argv[1], sys.argv[2]
c = json.load(open(f"{out}/calibration.json"))
o = c["outcome"]; b = o["best"]
print(f"\n{path}: {c['schemes']}, {o['evaluations']} evaluations, {c['wall_time_s']:.0f} s "
      f"(this invocation, resumed ones excluded)")
print(f"best: {b['rate_mbps']} Mbit/s {b['delivery']}, {b['delay_ms']} ms, "
      f"{b['queue_packets']} packets, loss {b['loss'] * 100:.4f} %")
print(f"replication error {o['error_pct']:.1f} % (throughput {o['tput_error_pct']:.1f} %, "
      f"delay {o['delay_error_pct']:.1f} %)")
if path == "california-mexico":
    print("Pantheon's calibrated emulator: 114.68 Mbit/s constant, 45 ms, 450 packets, no loss")
for s, l in o["leave_one_out"].items():
    print(f"leave-one-out {s}: fit {l['fit_error_pct']:.1f} %, predicts throughput within "
          f"{l['tput_error_pct']:.1f} %, delay within {l['delay_error_pct']:.1f} %")
PY
