#!/usr/bin/env bash
# Fuzzes every log parser (cargo-fuzz / libFuzzer, nightly) for SECONDS each, two targets at
# a time, and prints each target's last status line: "Done … runs in N second(s)" means it ran
# clean; a crash stops that target and leaves the input in fuzz/artifacts/<target>/.
#
#   bash bench/fuzz.sh [SECONDS=600]
#
# Targets (fuzz/fuzz_targets/): tunnel_binary_log (*.ptlog), pantheon_tunnel_text_log
# (mm-tunnel* text logs), link_text_log (Pantheon merged and Mahimahi mm-link logs),
# mm_link_binary_log (--log-format=binary), trace (Mahimahi traces). Seeds come from
# tests/fixtures/logs and small files written here.
set -euo pipefail
SECS=${1:-600}
cd "$(dirname "$0")/.."
source scripts/setup.sh   # cargo on PATH
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
export CARGO_TARGET_DIR="$HOME/.cache/pantheon-rs/fuzz-target"
cd fuzz
TARGETS=(tunnel_binary_log pantheon_tunnel_text_log link_text_log mm_link_binary_log trace)

# Seeds.
for t in "${TARGETS[@]}"; do mkdir -p "corpus/$t"; done
head -50 ../tests/fixtures/logs/pantheon-tunnel_client_egress.log > corpus/pantheon_tunnel_text_log/client_egress
head -120 ../tests/fixtures/logs/mahimahi_mm-link_uplink_droptail50.log > corpus/link_text_log/mahimahi
printf '# init timestamp: 1500000000000.000\n0.000 # 1500\n0.500 + 1536 1\n12.500 - 1536 12.000 1\n' \
  > corpus/link_text_log/merged
printf '1\n2\n3\n4\n6\n' > corpus/trace/10mbps
/usr/bin/python3 - <<'PY'
import struct
hdr = b"PANTHLOG" + struct.pack("<HBBHBBH", 1, 1, 1, 1, 0, 1, 24) + b"\0" * 6
hdr += struct.pack("<qq", 1795311354099748000, -250000) + b"\0" * 24
recs = b"".join(struct.pack("<QQIHBx", i * 1000000, i, 1536, 1, 1) for i in range(8))
open("corpus/tunnel_binary_log/seed", "wb").write(hdr + recs)
text = b"# mahimahi mm-link (Uplink) [t] > l\n# queue: infinite\n# init timestamp: 1\n"
head = b"PTMMLOG\0" + struct.pack("<IB3xQI", 1, 0, 1000000, len(text)) + text
ev = [(1000000, 0, 1504, b"#"), (1500000, 0, 88, b"+"), (2000000, 1500000, 88, b"-"),
      (2000000, 1, 88, b"d")]
body = b"".join(struct.pack("<QQI", t, x, n) + k + b"\0\0\0" for t, x, n, k in ev)
open("corpus/mm_link_binary_log/seed", "wb").write(head + body)
PY

echo ">> cargo +nightly fuzz build -O (no sanitizer: the parsers are safe Rust; panics are the bugs)" >&2
cargo +nightly fuzz build -O -s none >/dev/null
run() {
  local t=$1
  cargo +nightly fuzz run -O -s none "$t" -- -max_total_time="$SECS" -rss_limit_mb=2048 \
    -print_final_stats=1 > "/tmp/pantheon-fuzz-$t.log" 2>&1 && status=clean || status=FAILED
  printf '%-26s %-7s %s\n' "$t" "$status" \
    "$(grep -E '^Done|stat::number_of_executed_units' "/tmp/pantheon-fuzz-$t.log" | tr '\n' ' ')"
}
printf '%-26s %-7s %s\n' target result "libFuzzer's summary ($SECS s each)"
i=0
for t in "${TARGETS[@]}"; do
  run "$t" &
  i=$((i + 1))
  if [ $((i % 2)) -eq 0 ]; then wait; fi
done
wait
