# The Pantheon schemes that no registry (crates.io, PyPI, Debian) offers, built from the
# commits Pantheon pinned, with Pantheon's MTU fixes: the tunnel carries IP packets of at most
# 1464 bytes, so every hard-coded 1500-byte packet shrinks by the tunnel's 36 bytes
# (reference pantheon.md §1.2).
#
# Each scheme installs two programs that follow Pantheon's wrapper convention (the side that
# runs first gets PORT, the other IP PORT): bin/<name>-receiver and bin/<name>-sender. The
# descriptors schemes/<name>.toml call them; `pantheon schemes setup <name>` runs
# `nix-env -f nix -iA schemes.<name>` when Nix is installed.
#
# NOT verified here: the CI machine has no network, so these are only checked to parse
# (`nix-instantiate --parse`) — see docs/schemes.md.
{ pkgs ? import <nixpkgs> { } }:
let
  inherit (pkgs) lib stdenv;

  # A source pinned by commit.
  github = owner: repo: rev: builtins.fetchGit {
    url = "https://github.com/${owner}/${repo}";
    inherit rev;
    submodules = true;
  };

  # bin/NAME-{receiver,sender}: `exec` the built programs with Pantheon's positionals.
  # `receiver`/`sender` are shell lines run with the wrapper's "$@"; @tree@ is the installed
  # build tree.
  mkScheme = { name, src, nativeBuildInputs ? [ ], buildInputs ? [ ], postPatch ? "",
               buildPhase, receiver, sender, extraInstall ? "" }:
    let
      tree = "${placeholder "out"}/share/${name}/tree";
      fill = builtins.replaceStrings [ "@tree@" ] [ tree ];
    in
    stdenv.mkDerivation {
      pname = "pantheon-scheme-${name}";
      version = builtins.substring 0 7 src.rev;
      inherit src nativeBuildInputs buildInputs postPatch buildPhase;
      dontConfigure = true;
      installPhase = ''
        runHook preInstall
        mkdir -p $out/bin $out/share/${name}
        cp -r . $out/share/${name}/tree
        ${extraInstall}
        cat > $out/bin/${name}-receiver <<'WRAP'
        #!${pkgs.runtimeShell}
        ${fill receiver}
        WRAP
        cat > $out/bin/${name}-sender <<'WRAP'
        #!${pkgs.runtimeShell}
        ${fill sender}
        WRAP
        chmod +x $out/bin/${name}-receiver $out/bin/${name}-sender
        runHook postInstall
      '';
      meta.description = "Pantheon scheme ${name}, pinned at ${src.rev}";
    };

  autotools = [ pkgs.autoconf pkgs.automake pkgs.libtool pkgs.pkg-config ];

  # genericCC (Copa's and TaoVA's original implementation), built once for both.
  genericCC = github "venkatarun95" "genericCC" "d0153f8e594aa89e93b032143cedbdfe58e562f4";
in
{
  # PCC-Allegro (modong/pcc, UDT-based): MSS 1500 → 1464 in both halves' buffer.h and core.cpp.
  pcc = mkScheme {
    name = "pcc";
    src = github "modong" "pcc" "1afc958fa0d66d18b623c091a55fec872b4981e1";
    postPatch = ''
      for side in sender receiver; do
        substituteInPlace $side/src/buffer.h --replace-fail "mss = 1500" "mss = 1464"
        substituteInPlace $side/src/core.cpp --replace-fail "m_iMSS = 1500;" "m_iMSS = 1464;"
      done
    '';
    buildPhase = "make -C sender && make -C receiver";
    receiver = ''LD_LIBRARY_PATH=@tree@/receiver/src exec @tree@/receiver/app/appserver "$@"'';
    sender = ''LD_LIBRARY_PATH=@tree@/sender/src exec @tree@/sender/app/appclient "$@" 2>/dev/null'';
  };

  # PCC-Vivace (StanfordSNR/vivace).
  vivace = mkScheme {
    name = "vivace";
    src = github "StanfordSNR" "vivace" "2baf86211435ae071a32f96b7d8c504587f5d7f4";
    buildPhase = "make -C sender && make -C receiver";
    receiver = ''LD_LIBRARY_PATH=@tree@/receiver/src exec @tree@/receiver/vivace_receiver "$@"'';
    sender = ''LD_LIBRARY_PATH=@tree@/sender/src exec @tree@/sender/vivace_sender "$@"'';
  };

  # PCC-Expr (PCCproject/PCC-Uspace).
  pcc_experimental = mkScheme {
    name = "pcc_experimental";
    src = github "PCCproject" "PCC-Uspace" "cd43e34e3f5f5613e8acd08fab92c4eb24f974ab";
    buildPhase = "make -C src";
    receiver = ''LD_LIBRARY_PATH=@tree@/src/core exec @tree@/src/app/pccserver recv "$@"'';
    sender = ''LD_LIBRARY_PATH=@tree@/src/core exec @tree@/src/app/pccclient send "$@"'';
  };

  # Sprout (keithw/sprout): packets 1500 → 1464 and payload 1440 → 1400, as Pantheon's patch.
  sprout = mkScheme {
    name = "sprout";
    src = github "keithw" "sprout" "366e35c6178b01e31d4a46ad18c74f9415f19a26";
    nativeBuildInputs = autotools;
    buildInputs = [ pkgs.protobuf pkgs.boost pkgs.openssl pkgs.zlib pkgs.ncurses ];
    postPatch = ''
      substituteInPlace src/examples/cellsim.cc \
        --replace-fail "SERVICE_PACKET_SIZE = 1500" "SERVICE_PACKET_SIZE = 1464"
      substituteInPlace src/examples/sproutbt2.cc --replace-fail "std::min( 1440," "std::min( 1400,"
      substituteInPlace src/network/sproutconn.cc --replace-fail "1440 *" "1400 *"
    '';
    buildPhase = "./autogen.sh && ./configure --enable-examples && make -j$NIX_BUILD_CORES";
    receiver = ''SPROUT_MODEL_IN=@tree@/src/examples/sprout.model exec @tree@/src/examples/sproutbt2 "$@"'';
    sender = ''SPROUT_MODEL_IN=@tree@/src/examples/sprout.model exec @tree@/src/examples/sproutbt2 "$@"'';
  };

  # Verus (yzaki/verus): MTU 1450 → 1414. Verus runs sender first (its server sends).
  verus = mkScheme {
    name = "verus";
    src = github "yzaki" "verus" "d4b447ea74c6c60a261149af2629562939f9a494";
    nativeBuildInputs = autotools;
    buildInputs = [ pkgs.tbb pkgs.asio pkgs.alglib pkgs.boost ];
    postPatch = ''
      substituteInPlace src/verus.hpp --replace-fail "#define  MTU 1450" "#define  MTU 1414"
    '';
    buildPhase = "./bootstrap.sh && ./configure && make -j$NIX_BUILD_CORES";
    # First side: `verus-sender PORT`; second: `verus-receiver IP PORT`.
    sender = ''d=$(mktemp -d); cd "$d" && exec @tree@/src/verus_server -name "$d" -p "$1" -t 86400'';
    receiver = ''d=$(mktemp -d); cd "$d" && exec @tree@/src/verus_client "$1" -p "$2"'';
  };

  # SCReAM (StanfordSNR/scream-reproduce).
  scream = mkScheme {
    name = "scream";
    src = github "StanfordSNR" "scream-reproduce" "f099118d1421aa3131bf11ff1964974e1da3bdb2";
    nativeBuildInputs = autotools;
    buildPhase = "./autogen.sh && ./configure && make -j$NIX_BUILD_CORES";
    receiver = ''exec @tree@/src/ScreamServer "$@"'';
    sender = ''exec @tree@/src/ScreamClient "$@"'';
  };

  # FillP (StanfordSNR/fill-the-pipe, Huawei's FillP binaries).
  fillp = mkScheme {
    name = "fillp";
    src = github "StanfordSNR" "fill-the-pipe" "d47f4fa1b454a5e3c0537115c5a28436dbd4b834";
    buildPhase = "true";
    receiver = ''d=$(mktemp -d); cd "$d" && exec @tree@/server/server -s 0.0.0.0 -p "$1" -r testcase001'';
    sender = ''d=$(mktemp -d); cd "$d" && exec @tree@/client/client -c "$1" -p "$2" -r testcase001'';
  };

  # TaoVA-100x (genericCC with the RemyCC-2014-100x rule table).
  taova = mkScheme {
    name = "taova";
    src = genericCC;
    nativeBuildInputs = [ pkgs.makepp ];
    buildInputs = [ pkgs.protobuf pkgs.boost pkgs.jemalloc ];
    buildPhase = "makepp";
    receiver = ''exec @tree@/receiver "$@"'';
    sender = ''exec @tree@/sender serverip="$1" serverport="$2" offduration=1 onduration=1000000 traffic_params=deterministic,num_cycles=1 if=@tree@/RemyCC-2014-100x.dna'';
  };

  # Indigo (StanfordSNR/indigo, TensorFlow 1.14 under Python 2.7 as Pantheon pinned it).
  # Sender runs first.
  indigo = mkScheme {
    name = "indigo";
    src = github "StanfordSNR" "indigo" "2601c92e4aa9d58d38dc4dfe0ecdbf90c077e64d";
    buildPhase = "true";
    sender = ''exec ${pkgs.python2}/bin/python @tree@/dagger/run_sender.py "$@"'';
    receiver = ''exec ${pkgs.python2}/bin/python @tree@/env/run_receiver.py "$@"'';
  };
}
