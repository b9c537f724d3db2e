#!/usr/bin/env bash
# Builds and installs everything: `pantheon` with every feature (testbed, Indigo training,
# calibration, sweeps), `pantheon-agent`, `pantheon-tunnel` and the scheme programs
# (`pantheon-quinn`, `pantheon-quiche`, `pantheon-ledbat`, `pantheon-webrtc`, `pantheon-tcp`),
# into $PANTHEON_PREFIX/bin (default /usr/local/bin). The main job (scripts/main-job.sh)
# builds only what local experiments need; the test command (scripts/test.sh) runs this too.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
build_and_install
echo ">> installed: $(tr '\n' ' ' < "$PANTHEON_MANIFEST")"
