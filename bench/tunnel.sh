#!/usr/bin/env bash
# Tunnel benchmark: raw veth vs pantheon-tunnel, measured side by side in one run.
#
#   bash bench/tunnel.sh [REPS=3] [SECONDS=10] [PINGS=100]   (root; creates and removes its own netns)
#
# Two namespaces joined by a veth pair (10.77.0.1 ↔ 10.77.0.2). Per repetition, in this order:
#   raw:    iperf3 TCP cubic for SECONDS over the veth, and PINGS idle pings (5 a second)
#   tunnel: a fresh pantheon-tunnel server (namespace A) / client (namespace B) pair over the same
#           veth, the same pings and iperf3 run inside the tunnel, then `pantheon-tunnel check`
#           on the client's egress and the server's ingress log: tunnel-made loss.
#   capture: the same through a tunnel pair with --capture (a pcapng of every packet's first
#           128 bytes beside each of the four logs): what capturing costs, side by side.
# Then one UDP run at 1 Gbit/s offered load through a fresh tunnel (tunnel-made loss, veth
# drops, and how many datagrams the receiving iperf3's socket buffer overflowed, inside the
# server's tunnel namespace). Prints medians and the tunnel/raw ratio. Reference (pantheon-tunnel on this kind of
# 2-vCPU machine, ../shared/reference/pantheon.md §6): 469 vs 16580 Mbit/s (2.8 %), +0.22 ms
# idle RTT, 0.37–0.50 % of packets lost inside the tunnel.
set -euo pipefail

REPS=${1:-3}
SECS=${2:-10}
PINGS=${3:-100}
cd "$(dirname "$0")/.."
if [ -n "${PANTHEON_TUNNEL_BIN:-}" ]; then
  # bench/rootless.sh: a tunnel built already, run inside a user namespace (no apt, no cargo).
  BIN=$PANTHEON_TUNNEL_BIN
else
  source scripts/setup.sh   # root check, iperf3 & ping, cargo, CARGO_TARGET_DIR
  need_packages jq
  echo ">> cargo build --release --workspace --bin pantheon-tunnel" >&2
  cargo build --quiet --release --workspace --bin pantheon-tunnel
  BIN="$CARGO_TARGET_DIR/release/pantheon-tunnel"
fi

A="ptb-$$-a"
B="ptb-$$-b"
OUT=$(mktemp -d "${TMPDIR:-/tmp}/ptbench.XXXXXX")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  if [ -z "${KEEP:-}" ]; then rm -rf "$OUT"; else echo "outputs kept in $OUT" >&2; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$A"
ip netns add "$B"
ip link add vA netns "$A" type veth peer name vB netns "$B"
ip -n "$A" addr add 10.77.0.1/24 dev vA
ip -n "$B" addr add 10.77.0.2/24 dev vB
for ns in "$A" "$B"; do
  ip -n "$ns" link set lo up
done
ip -n "$A" link set vA up
ip -n "$B" link set vB up
inA() { nsenter --net="/run/netns/$A" "$@"; }
inB() { nsenter --net="/run/netns/$B" "$@"; }

# Starts "$@" in namespace A in its own process group; sets LAST to its pid (= pgid).
bgA() {
  setsid nsenter --net="/run/netns/$A" "$@" &
  LAST=$!
  PIDS+=("$LAST")
}
wait_for() { # FILE PATTERN: wait up to 10 s for a line
  for _ in $(seq 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  echo "error: no '$2' in $1" >&2
  cat "$1" >&2
  exit 1
}
wait_listen() { # port 5201 listening in A
  for _ in $(seq 200); do inA ss -ltn | grep -q ':5201 ' && return 0; sleep 0.05; done
  echo "error: iperf3 server did not start" >&2
  exit 1
}
mbps() { awk '/receiver/ { print $(NF-2) }' "$1" | tail -1; }
rtt() { awk -F/ '/^rtt|^round-trip/ { print $5 }' "$1"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
veth_drops() {
  local a b
  a=$(ip -n "$A" -s -j link show vA | jq '.[0].stats64.rx.dropped + .[0].stats64.tx.dropped')
  b=$(ip -n "$B" -s -j link show vB | jq '.[0].stats64.rx.dropped + .[0].stats64.tx.dropped')
  echo $((a + b))
}

# A tunnel pair; the server runs SERVER_CMD in A's tunnel, the client CLIENT_CMD in B's; both
# endpoints get the further arguments (e.g. --capture).
# Logs: $OUT/$1.{s,c}.{in,eg}.ptlog (captures: .pcapng beside them).
tunnel_run() {
  local tag=$1 server_cmd=$2 client_cmd=$3
  local extra=("${@:4}")
  : >"$OUT/$tag.server.out"
  bgA "$BIN" server --ingress-log "$OUT/$tag.s.in.ptlog" --egress-log "$OUT/$tag.s.eg.ptlog" \
    "${extra[@]}" -- sh -c "$server_cmd" >"$OUT/$tag.server.out" 2>"$OUT/$tag.server.err"
  local server=$LAST
  wait_for "$OUT/$tag.server.out" mm-tunnelclient
  read -r _ _ port cpriv spriv <"$OUT/$tag.server.out"
  inB "$BIN" client 10.77.0.1 "$port" "$cpriv" "$spriv" --sender-side \
    --egress-log "$OUT/$tag.c.eg.ptlog" --ingress-log "$OUT/$tag.c.in.ptlog" "${extra[@]}" \
    -- sh -c "${client_cmd//@SERVER@/$spriv}" >"$OUT/$tag.client.out" 2>"$OUT/$tag.client.err"
  wait "$server" || true
}

echo ">> $REPS repetitions of ${SECS} s: raw veth, then tunnel" >&2
for i in $(seq "$REPS"); do
  bgA iperf3 -s -1 >/dev/null 2>&1
  wait_listen
  inB ping -q -c "$PINGS" -i 0.2 10.77.0.1 >"$OUT/raw$i.ping"
  inB iperf3 -c 10.77.0.1 -C cubic -t "$SECS" -f m >"$OUT/raw$i.iperf"
  wait "$LAST" || true

  tunnel_run "tun$i" "iperf3 -s -1 >/dev/null 2>&1" \
    "ping -q -c $PINGS -i 0.2 @SERVER@ >$OUT/tun$i.ping; sleep 0.5; iperf3 -c @SERVER@ -C cubic -t $SECS -f m >$OUT/tun$i.iperf"
  "$BIN" check "$OUT/tun$i.c.eg.ptlog" "$OUT/tun$i.s.in.ptlog" --json >"$OUT/tun$i.check"

  tunnel_run "cap$i" "iperf3 -s -1 >/dev/null 2>&1" \
    "ping -q -c $PINGS -i 0.2 @SERVER@ >$OUT/cap$i.ping; sleep 0.5; iperf3 -c @SERVER@ -C cubic -t $SECS -f m >$OUT/cap$i.iperf" \
    --capture
  "$BIN" check "$OUT/cap$i.c.eg.ptlog" "$OUT/cap$i.s.in.ptlog" --json >"$OUT/cap$i.check"
  printf '   rep %d: raw %8.1f Mbit/s %6.3f ms | tunnel %8.1f Mbit/s %6.3f ms, lost %s of %s packets | --capture %8.1f Mbit/s %6.3f ms\n' \
    "$i" "$(mbps "$OUT/raw$i.iperf")" "$(rtt "$OUT/raw$i.ping")" \
    "$(mbps "$OUT/tun$i.iperf")" "$(rtt "$OUT/tun$i.ping")" \
    "$(jq .lost "$OUT/tun$i.check")" "$(jq .sent "$OUT/tun$i.check")" \
    "$(mbps "$OUT/cap$i.iperf")" "$(rtt "$OUT/cap$i.ping")" >&2
done

echo ">> UDP at 1 Gbit/s offered load through the tunnel, ${SECS} s" >&2
drops0=$(veth_drops)
tunnel_run udp "iperf3 -s -1 >/dev/null 2>&1; nstat -asz UdpRcvbufErrors >$OUT/udp.nstat" \
  "iperf3 -c @SERVER@ -u -b 1G -l 1400 -t $SECS -f m >$OUT/udp.iperf"
drops1=$(veth_drops)
"$BIN" check "$OUT/udp.c.eg.ptlog" "$OUT/udp.s.in.ptlog" --json >"$OUT/udp.check"

raw_tput=$(for i in $(seq "$REPS"); do mbps "$OUT/raw$i.iperf"; done | median)
tun_tput=$(for i in $(seq "$REPS"); do mbps "$OUT/tun$i.iperf"; done | median)
raw_rtt=$(for i in $(seq "$REPS"); do rtt "$OUT/raw$i.ping"; done | median)
tun_rtt=$(for i in $(seq "$REPS"); do rtt "$OUT/tun$i.ping"; done | median)
cap_tput=$(for i in $(seq "$REPS"); do mbps "$OUT/cap$i.iperf"; done | median)
cap_rtt=$(for i in $(seq "$REPS"); do rtt "$OUT/cap$i.ping"; done | median)
# Capture bytes written per packet the logs recorded (all four captures of the last repetition).
cap_bytes=$(cat "$OUT/cap$REPS".*.pcapng | wc -c)
cap_packets=$(( ($(cat "$OUT/cap$REPS".*.ptlog | wc -c) - 4 * 64) / 24 ))
tcp_lost=$(cat "$OUT"/tun*.check | jq -s 'map(.lost) | add')
tcp_sent=$(cat "$OUT"/tun*.check | jq -s 'map(.sent) | add')
udp_line=$(awk '/receiver/' "$OUT/udp.iperf" | tail -1)

echo
echo "pantheon-tunnel benchmark ($(nproc) CPUs, $(uname -r), $REPS × ${SECS} s, medians)"
printf '%-34s %12s %12s %10s\n' "" "raw veth" "tunnel" "tunnel/raw"
printf '%-34s %12.1f %12.1f %9.1f %%\n' "TCP cubic throughput (Mbit/s)" "$raw_tput" "$tun_tput" \
  "$(awk "BEGIN { print 100 * $tun_tput / $raw_tput }")"
printf '%-34s %12.3f %12.3f %+9.3f ms\n' "idle RTT, $PINGS pings (ms)" "$raw_rtt" "$tun_rtt" \
  "$(awk "BEGIN { print $tun_rtt - $raw_rtt }")"
printf '%-34s %25s\n' "tunnel-made loss, TCP runs" "$tcp_lost of $tcp_sent packets"
printf '%-34s %25s\n' "tunnel-made loss, UDP 1 Gbit/s" \
  "$(jq -r '"\(.lost) of \(.sent) packets"' "$OUT/udp.check")"
printf '%-34s %25s\n' "veth drops during the UDP run" "$((drops1 - drops0))"
printf '%-34s %12.1f %12.1f %9.1f %%\n' "TCP throughput, tunnel | --capture" "$tun_tput" "$cap_tput" \
  "$(awk "BEGIN { print 100 * $cap_tput / $tun_tput }")"
printf '%-34s %12.3f %12.3f %+9.3f ms\n' "idle RTT, tunnel | --capture (ms)" "$tun_rtt" "$cap_rtt" \
  "$(awk "BEGIN { print $cap_rtt - $tun_rtt }")"
printf '%-34s %25s\n' "capture bytes per logged packet" \
  "$(awk "BEGIN { printf \"%.1f\", $cap_bytes / ($cap_packets > 0 ? $cap_packets : 1) }")"
echo "UDP iperf3 receiver: ${udp_line}"
printf '%-34s %25s\n' "  of which receiver socket overflow" \
  "$(awk '/UdpRcvbufErrors/ { print $2 }' "$OUT/udp.nstat") datagrams (UdpRcvbufErrors)"
echo "(reference pantheon-tunnel: 469 vs 16580 Mbit/s = 2.8 %, +0.22 ms, 0.37-0.50 % lost)"
