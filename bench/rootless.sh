#!/usr/bin/env bash
# The tunnel as root and without root, measured side by side in one run (issue 33).
#
#   bash bench/rootless.sh [REPS=3] [SECONDS=10] [PINGS=100]   (root: it creates the user)
#
# Runs bench/tunnel.sh twice: as root, then as an unprivileged user (created for the run and
# removed after) inside a user namespace of its own with its own mount and network namespaces
# and a private /run/netns — what `pantheon run local` does for an ordinary user
# (crates/engine/src/rootless.rs). Rootless, the tunnel cannot force its 8 MiB socket buffers
# (SO_RCVBUFFORCE needs the machine's root): they are clamped to net.core.rmem_max/wmem_max,
# printed here. Compare the two tables' throughput and idle RTT lines.
set -euo pipefail
REPS=${1:-3}
SECS=${2:-10}
PINGS=${3:-100}
cd "$(dirname "$0")/.."
source scripts/setup.sh   # root check, iperf3 & ping, cargo, CARGO_TARGET_DIR
need_packages jq
echo ">> cargo build --release --workspace --bin pantheon-tunnel" >&2
cargo build --quiet --release --workspace --bin pantheon-tunnel
user="ptrl$$"
DIR=$(mktemp -d /tmp/pantheon-rootless-bench.XXXXXX)
cleanup() {
  userdel "$user" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
cp "$CARGO_TARGET_DIR/release/pantheon-tunnel" bench/tunnel.sh "$DIR/"
mkdir -p "$DIR/bench" && mv "$DIR/tunnel.sh" "$DIR/bench/"
chmod -R a+rX "$DIR" && chown "$user" "$DIR"
echo "net.core.rmem_max = $(cat /proc/sys/net/core/rmem_max), net.core.wmem_max = $(cat /proc/sys/net/core/wmem_max)"
echo "== as root"
PANTHEON_TUNNEL_BIN="$DIR/pantheon-tunnel" bash bench/tunnel.sh "$REPS" "$SECS" "$PINGS" 2>&1 | sed -n '/^pantheon-tunnel benchmark/,$p'
echo "== rootless (user $user in a user namespace of its own)"
runuser -u "$user" -- unshare --user --map-root-user --mount --net -- sh -c \
  "mount --make-rprivate / && mount -t tmpfs tmpfs /run/netns && ip link set lo up && \
   cd '$DIR' && TMPDIR='$DIR' PANTHEON_TUNNEL_BIN='$DIR/pantheon-tunnel' bash bench/tunnel.sh $REPS $SECS $PINGS" 2>&1 |
  sed -n '/^pantheon-tunnel benchmark/,$p'
