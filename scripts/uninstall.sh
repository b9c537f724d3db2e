#!/usr/bin/env bash
# Removes what scripts/setup.sh installed: the programs in $PANTHEON_PREFIX/bin (default
# /usr/local/bin, as listed in $PANTHEON_PREFIX/share/pantheon-rs/installed-files), the build
# directory and the scheme tools (~/.cache/pantheon-rs). Debian packages, Nix and the clone
# itself are left in place (other software may use them).
set -euo pipefail
PANTHEON_PREFIX="${PANTHEON_PREFIX:-/usr/local}"
manifest="$PANTHEON_PREFIX/share/pantheon-rs/installed-files"
if [ -f "$manifest" ]; then
  while IFS= read -r f; do
    [ -n "$f" ] && rm -fv "$f"
  done < "$manifest"
  rm -rf "$(dirname "$manifest")"
else
  echo "no $manifest: no programs installed under $PANTHEON_PREFIX"
fi
cache="${CARGO_TARGET_DIR:-$HOME/.cache/pantheon-rs/target}"
rm -rf "$cache" "${PANTHEON_SCHEMES_HOME:-$HOME/.cache/pantheon-rs/schemes}"
rmdir "$HOME/.cache/pantheon-rs" 2>/dev/null || true
echo ">> removed the programs, the build directory and the scheme tools"
