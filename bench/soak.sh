#!/usr/bin/env bash
# Fault-injection soak (issue 34): short experiments of two runs each, a fault injected into
# each at a random moment, then the invariants checked once the next command has run.
#
#   bash bench/soak.sh [FAULTED_RUNS] [SEED] [rotate]
#                                   (root; default 300 faulted runs, seed 1)
#
# Faults, each experiment's drawn at random (SEED), or taken in turn with `rotate` (so that a
# short soak has every one):
#   kill   SIGKILL of `pantheon run local` during run 2 (run 1 has finished)
#   term   SIGTERM of `pantheon run local` during run 2
#   crash  a scheme whose sender exits with status 3 after a random time (both runs)
#   hang   a scheme whose sender sends nothing and ignores SIGTERM (both runs)
#   disk   the results directory on a full 100 kB tmpfs (the first run; the second never starts)
#   agent  SIGKILL of the remote node's `pantheon-agent` during run 2 of a three-run remote
#          experiment, the agent started again. These are counted as drawn and run together at
#          the end by the remote end-to-end test on its testbed of namespaces and two agents
#          (`PANTHEON_AGENT_KILLS=N cargo test --release --test remote a_killed_agent`), which
#          checks the same invariants (below) and prints their counts.
#
# After each experiment `pantheon clean` runs, then `pantheon analyze` where the experiment
# could not analyse itself (kill), and the invariants are checked:
#   leaks     no namespace of the experiment's pid, no process of its schemes (iperf3, or the
#             soak's own scheme processes), no tunnel or emulator device, no pshell NAT rule
#   lost      run 1 of a kill or term experiment, finished before the fault: its packet and
#             link logs byte for byte as when it was recorded, and `ok` in the summary
#   unmarked  every run hit by a fault: FAILED, INTERRUPTED or INVALID in the summary (or, on
#             the full disk where no summary can be written, FAILED on the command's output)
# Prints the counts per fault and the three totals (each should be 0); exits 1 if one is not.
set -euo pipefail
want=${1:-300}
RANDOM=${2:-1}
rotate=${3:-}
pantheon=${PANTHEON:-pantheon}
here=$(cd "$(dirname "$0")/.." && pwd)
trace=$here/traces/10mbps.trace
work=$(mktemp -d /tmp/pantheon-soak.XXXXXX)
marker=pantheon-soak-$$
disk=$work/disk
mkdir -p "$disk" "$work/schemes"
child=

cleanup() {
  if [ -n "$child" ]; then kill -KILL "$child" 2>/dev/null || true; fi
  umount "$disk" 2>/dev/null || true
  "$pantheon" clean >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# The soak's own schemes; every process of theirs carries $marker in its command line.
cat > "$work/schemes/crasher.toml" <<EOF
name = "crasher"
label = "Crasher"
color = "red"
marker = "o"
run_first = "receiver"
[receiver]
command = ["sh", "-c", "sleep 3600; : $marker"]
[sender]
command = ["sh", "-c", "sleep 0.\$((\$\$ % 9 + 1)); echo crashed >&2; exit 3; : $marker"]
EOF
cat > "$work/schemes/hanger.toml" <<EOF
name = "hanger"
label = "Hanger"
color = "black"
marker = "x"
run_first = "receiver"
[receiver]
command = ["sh", "-c", "sleep 3600; : $marker"]
[sender]
command = ["sh", "-c", "trap '' TERM INT; while :; do sleep 1; done; : $marker"]
EOF

iperf3_before=$(pgrep -x iperf3 | sort || true)
new_iperf3() { comm -13 <(echo "$iperf3_before") <(pgrep -x iperf3 | sort || true) | grep -c . || true; }
# (The pattern does not match itself: grep's own command line holds `[-]`.)
marked_processes() { grep -l -a -- "pantheon-soak[-]$$" /proc/[0-9]*/cmdline 2>/dev/null | grep -c . || true; }

# Runs `pantheon run local` into $1 (2 runs of 2 s of scheme $2) in the background; its
# output goes to $work/<name of $1>.out.
start() {
  local dir=$1 scheme=$2
  "$pantheon" run local --schemes "$scheme" --run-times 2 --runtime 2 --seed "$RANDOM" \
    --uplink-trace "$trace" --downlink-trace "$trace" --prepend-mm-cmds "mm-delay 5" \
    --schemes-dir "$work/schemes" --data-dir "$dir" >"$work/$(basename "$dir").out" 2>&1 &
  child=$!
}

# Waits until run 1 of $1 is recorded (at most 60 s); returns 1 if the command ended first.
wait_for_run1() {
  local dir=$1
  for _ in $(seq 600); do
    [ -f "$dir/pantheon_runs.json" ] && return 0
    kill -0 "$child" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# The summary's status of run $2 in results directory $1 (empty if none).
status_of() { awk -F'|' -v r="$2" '$3+0 == r && $4 ~ /ok|FAILED|INTERRUPTED|INVALID/ {gsub(/ /, "", $4); print $4; exit}' "$1/pantheon_summary.md" 2>/dev/null || true; }

# Hash of run 1's packet and link logs in $1.
run1_logs() { (cd "$1" && sha256sum ./*_run1_*.ptlog ./*_mm_*_run1.log 2>/dev/null | sort); }

declare -A faulted=() missed=()
leaks=0 lost=0 unmarked=0 total=0 i=0
faults=(kill term crash hang disk agent)
agent_kills=0
started=$(date +%s)
while [ "$total" -lt "$want" ]; do
  i=$((i + 1))
  if [ "$rotate" = rotate ]; then
    fault=${faults[$(((i - 1) % ${#faults[@]}))]}
  else
    fault=${faults[$((RANDOM % ${#faults[@]}))]}
  fi
  dir=$work/r$i
  hit=()   # the runs this fault hit
  case $fault in
    agent)
      agent_kills=$((agent_kills + 1)); total=$((total + 1)); faulted[$fault]=$((${faulted[$fault]:-0} + 1))
      continue
      ;;
    kill | term)
      start "$dir" cubic
      if ! wait_for_run1 "$dir"; then
        wait "$child" || true; child=
        echo "iteration $i ($fault): run 1 was not recorded:" >&2
        tail -3 "$work/r$i.out" >&2
        lost=$((lost + 1))
        continue
      fi
      before=$(run1_logs "$dir")
      # A random moment of run 2: 0.1 to 3.5 s after run 1 was recorded (it lasts about 4 s).
      r=$((RANDOM % 35 + 1))
      sleep "$((r / 10)).$((r % 10))"
      signal=TERM
      [ "$fault" = kill ] && signal=KILL
      kill -s "$signal" "$child" 2>/dev/null || true   # (it may have ended already)
      wait "$child" || true; child=
      "$pantheon" clean >/dev/null
      [ "$fault" = kill ] && { "$pantheon" analyze "$dir" >"$work/a$i.out" 2>&1 || true; }
      if ! { [ "$(run1_logs "$dir")" = "$before" ] && [ "$(status_of "$dir" 1)" = ok ]; }; then
        echo "iteration $i ($fault, after $r/10 s): run 1 lost or altered" >&2
        lost=$((lost + 1))
        # What the run, the analysis and the directory say, for whoever reads the log.
        { echo "-- run's output:"; tail -5 "$work/r$i.out"
          [ -f "$work/a$i.out" ] && { echo "-- analyze:"; tail -5 "$work/a$i.out"; }
          echo "-- run 1's logs before / now:"; echo "$before"; run1_logs "$dir"
          echo "-- directory:"; ls -la "$dir"; } >&2 || true
      fi
      if [ "$(status_of "$dir" 2)" = ok ]; then
        missed[$fault]=$((${missed[$fault]:-0} + 1))   # the fault came after run 2 ended
      else
        hit=(2)
      fi
      ;;
    crash | hang)
      if [ "$fault" = crash ]; then start "$dir" crasher; else start "$dir" hanger; fi
      wait "$child" || true; child=
      "$pantheon" clean >/dev/null
      hit=(1 2)
      ;;
    disk)
      mount -t tmpfs -o size=100k tmpfs "$disk"
      dir=$disk/r$i
      start "$dir" cubic
      wait "$child" || true; child=
      "$pantheon" clean >/dev/null
      grep -q "run 1: FAILED" "$work/r$i.out" || { echo "iteration $i (disk): run 1 not FAILED" >&2; unmarked=$((unmarked + 1)); }
      umount "$disk"
      total=$((total + 1)); faulted[$fault]=$((${faulted[$fault]:-0} + 1))
      ;;
  esac
  for r in "${hit[@]}"; do
    total=$((total + 1)); faulted[$fault]=$((${faulted[$fault]:-0} + 1))
    case $(status_of "$dir" "$r") in
      FAILED | INTERRUPTED | INVALID) ;;
      *) echo "iteration $i ($fault): run $r is '$(status_of "$dir" "$r")'" >&2; unmarked=$((unmarked + 1)) ;;
    esac
  done
  # Leaks, once the next command (pantheon clean) has run. Its SIGKILLs are delivered
  # asynchronously: processes get up to 5 s to be gone.
  for _ in $(seq 50); do
    [ "$(new_iperf3)" -eq 0 ] && [ "$(marked_processes)" -eq 0 ] && break
    sleep 0.1
  done
  left_ns=$(ip netns list | grep -c "^pt-" || true)
  left_links=$(ip -o link | grep -cE " (tunnel|emu)[0-9]" || true)
  left_nat=$(iptables-save 2>/dev/null | grep -c pshell || true)
  n=$((left_ns + $(new_iperf3) + $(marked_processes) + left_links + left_nat))
  if [ "$n" -gt 0 ]; then
    echo "iteration $i ($fault): $left_ns namespaces, $(new_iperf3) iperf3, $(marked_processes) scheme processes, $left_links devices, $left_nat NAT rules left" >&2
    leaks=$((leaks + n))
  fi
  rm -rf "$work/r$i" "$work/r$i.out"
  printf '\r%d faulted runs of %d (%s s)' "$total" "$want" "$(($(date +%s) - started))" >&2
done
echo >&2
if [ "$agent_kills" -gt 0 ]; then
  echo "remote experiments with a killed agent: $agent_kills (tests/remote.rs)…" >&2
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/pantheon-rs/target}
  if (cd "$here" && PANTHEON_AGENT_KILLS=$agent_kills PANTHEON_AGENT_SEED=$RANDOM \
        cargo test --release --locked --test remote -- --exact --nocapture \
        a_killed_agent_fails_its_run_only_and_serves_again_after_a_restart) >"$work/agent.out" 2>&1; then
    :
  else
    tail -40 "$work/agent.out" >&2
  fi
  counts=$(grep -o "agent soak: .*" "$work/agent.out" || true)
  if [ -z "$counts" ]; then
    echo "the killed-agent test printed no counts" >&2
    unmarked=$((unmarked + agent_kills))
  else
    read -r a_leaks a_lost a_unmarked < <(sed -E 's/.*runs, ([0-9]+) leaks, ([0-9]+) finished.*, ([0-9]+) faulted runs not marked/\1 \2 \3/' <<<"$counts")
    leaks=$((leaks + a_leaks)); lost=$((lost + a_lost)); unmarked=$((unmarked + a_unmarked))
  fi
fi
echo "faulted runs: $total in $i experiments, $(($(date +%s) - started)) s"
for f in "${faults[@]}"; do
  echo "  $f: ${faulted[$f]:-0} faulted runs${missed[$f]:+ (${missed[$f]} more faults came after the run ended)}"
done
echo "leaks: $leaks"
echo "finished runs lost or altered: $lost"
echo "faulted runs not marked: $unmarked"
[ "$leaks" -eq 0 ] && [ "$lost" -eq 0 ] && [ "$unmarked" -eq 0 ]
