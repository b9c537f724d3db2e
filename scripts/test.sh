#!/usr/bin/env bash
# Installs what the tests need and runs them all: unit tests of every crate (no root needed)
# and the end-to-end tests of tests/ (root: namespaces, TUN, iperf3, every scheme that must run
# here). Same build as the main job (release profile, whole workspace): after it, nothing is
# rebuilt but the test targets.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
# The Nix pins are checked with nix-instantiate.
need_packages nix-bin
# The daemon's web pages are checked in headless Chromium (tests/testbed.rs).
need_packages chromium
# The PDF report's text is read back with pdftotext (tests/competition.rs).
need_packages poppler-utils
# Captures (`--capture`) are read back with tshark, and a QUIC run's decrypted with its key log
# after mergecap joins its two directions (tests/schemes.rs, tests/local_experiment.rs).
need_packages tshark
# The remote tests run an sshd of their own inside a namespace (`pantheon node bootstrap`);
# tests/slurm.rs brings up a one-node Slurm cluster of its own (munged, slurmctld, slurmd).
# Neither package may start the system's service.
need_packages_not_started openssh-server munge slurmctld slurmd slurm-client
# The programs of the workspace, installed (pantheon, the scheme programs of schemes/), then
# what the descriptors ask for (tquic_tools from crates.io for Copa and QUIC BBRv3, their
# certificate and file).
build_and_install
pantheon schemes setup quic quic_newreno quic_bbr quic_bbr2 quic_bbr3 tquic_copa ledbat
# Vegas runs in a guest kernel (issue 51; tests/guest.rs): QEMU, busybox-static, kmod and cpio
# from apt, Debian's linux-image-6.1.0-50-amd64 unpacked into ~/.cache/pantheon-rs/kernels and
# booted once to choose KVM or TCG.
pantheon schemes setup vegas
# The source schemes (issue 28), cloned at their pins, verified, patched and built, from a
# directory of git mirrors when the machine has one ($PANTHEON_SOURCE_MIRROR, else a `.mirror`
# beside the checkout, else /work/.mirror), or over the network. One that cannot be had here
# fails its setup only; tests/source_schemes.rs then reports it as not verified, by name.
for d in "${PANTHEON_SOURCE_MIRROR:-}" "$(cd .. && pwd)/.mirror" /work/.mirror; do
  if [ -n "$d" ] && [ -d "$d" ]; then export PANTHEON_SOURCE_MIRROR=$d; break; fi
done
echo ">> source schemes (mirror: ${PANTHEON_SOURCE_MIRROR:-none})"
pantheon schemes setup $(pantheon schemes list --source --names) ||
  echo ">> some source schemes could not be set up here: tests/source_schemes.rs names them"
# tests/rootless.rs runs experiments as an ordinary user: that needs /dev/net/tun open to every
# user, as udev leaves it on desktop distributions (0666) and some containers do not.
chmod 0666 /dev/net/tun
cargo test --release --locked --workspace
# The short fault-injection soak (issue 34): at least 20 runs hit by SIGKILL, SIGTERM, a crashing
# or hanging scheme or a full disk, each followed by the invariants (nothing left, nothing lost,
# every faulted run marked); bench/soak.sh 300 is the long one.
need_packages procps
bash bench/soak.sh 20 1 rotate
