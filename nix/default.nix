# Pantheon-rs and the Pantheon schemes no package registry offers, pinned.
#
#   nix-build nix -A pantheon-rs         # the workspace: pantheon, pantheon-tunnel, scheme programs
#   nix-build nix -A schemes.pcc         # one external scheme (see nix/schemes/default.nix)
#   nix-env -f nix -iA schemes.pcc       # … installed on PATH, where `pantheon` finds it
#
# Every source is pinned by commit (builtins.fetchGit with `rev`): the commits are the ones
# Pantheon's own reports recorded for its third_party submodules (git_summary of 2018-09).
{ pkgs ? import <nixpkgs> { } }:
{
  pantheon-rs = pkgs.rustPlatform.buildRustPackage {
    pname = "pantheon-rs";
    version = "0.1.0";
    src = pkgs.lib.cleanSource ../.;
    cargoLock.lockFile = ../Cargo.lock;
    # quiche's and tquic's BoringSSL builds (cmake, bindgen through libclang).
    nativeBuildInputs = [ pkgs.pkg-config pkgs.cmake pkgs.perl pkgs.go pkgs.rustPlatform.bindgenHook ];
    # The end-to-end tests need root (namespaces, TUN): run them with scripts/test.sh.
    doCheck = false;
    meta.description = "Pantheon-rs: a testbed for Internet congestion control";
  };

  schemes = import ./schemes { inherit pkgs; };
}
