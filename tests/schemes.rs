//! The scheme library end to end: one scheme of each program family that must run here passes
//! `pantheon schemes check`, a `--all` experiment (with `--capture`) gives every runnable scheme
//! an ok report row over 10 Mbit/s + 28 ms and each that must run here its throughput and a
//! capture of its packets, and the Nix pins of the schemes no registry offers parse and cover
//! their descriptors.
//!
//! Needs root, the workspace's scheme programs built next to `pantheon` (`cargo build
//! --workspace --bins`) and `pantheon schemes setup tquic_copa quic_bbr3` done (tquic_tools, its
//! certificate and file): `scripts/test.sh` does both, and installs `nix-bin`.

use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

mod common;
use common::{captured_as_logged, sh, temp, tshark};

static SERIAL: Mutex<()> = Mutex::new(());

const TRACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../traces/10mbps.trace");
const NIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../nix");
const SCHEMES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../schemes");

/// The schemes issue 6 requires to run on this machine's kernel, and Indigo with its committed
/// models (issue 31). TCP Vegas, absent from this kernel, runs in a guest's (tests/guest.rs).
const MUST_RUN: [&str; 13] = [
    "cubic",
    "bbr",
    "reno",
    "quic",
    "quic_newreno",
    "quic_bbr",
    "quic_bbr2",
    "quic_bbr3",
    "tquic_copa",
    "ledbat",
    "webrtc",
    "indigo",
    "indigo_nocalib",
];

/// One scheme of [`MUST_RUN`] per program that runs it: the host kernel's TCP (`pantheon-tcp`),
/// quinn, quiche, tquic, our LEDBAT, our WebRTC media and Indigo. `schemes check` adds to a
/// `--all` run a loopback run and its verdict; the other schemes of a family differ from these
/// only in arguments, and `--all` runs each of them with its throughput checked.
const CHECKED: [&str; 7] = [
    "cubic",
    "quic",
    "quic_bbr2",
    "quic_bbr3",
    "ledbat",
    "webrtc",
    "indigo",
];

/// Issue 55: `pantheon schemes era DAY` names, for each of Pantheon's schemes, the scheme here
/// that runs it as Pantheon did that day — seed 001's day gives the seed era's Copa (genericCC
/// with δ 0.5) and Pantheon's own SCReAM programs; Copa's last era is `copa_orig_2020`; a
/// scheme Pantheon had not yet is none.
#[test]
fn schemes_era_names_each_pantheon_scheme_s_descriptor_of_the_day() {
    let era = |day: &str| -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_pantheon"))
            .args(["schemes", "era", day, "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let of = |rows: &Value, name: &str| -> Value {
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["pantheon"] == name);
        row.unwrap_or_else(|| panic!("no row for {name}"))["scheme"].clone()
    };
    let seed_001 = era("2017-08-30");
    assert_eq!(of(&seed_001, "copa"), "copa_orig");
    assert_eq!(of(&seed_001, "scream"), "scream");
    assert_eq!(of(&seed_001, "default_tcp"), "cubic");
    assert_eq!(of(&seed_001, "vivace"), Value::Null);
    assert_eq!(of(&era("2024-06-01"), "copa"), "copa_orig_2020");
    let bad = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .args(["schemes", "era", "2017-8-30"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("write YYYY-MM-DD"));
}

#[test]
fn one_scheme_of_each_family_that_must_run_here_passes_schemes_check() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .args(["schemes", "check", "--json", "--runtime", "5"])
        .args(CHECKED)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let verdicts = v.as_array().unwrap();
    assert_eq!(verdicts.len(), CHECKED.len(), "{v}");
    for (name, verdict) in CHECKED.iter().zip(verdicts) {
        assert_eq!(verdict["scheme"], *name);
        assert_eq!(verdict["ok"], true, "{name}: {}", verdict["detail"]);
    }
    assert!(out.status.success());
}

#[test]
fn all_gives_every_runnable_scheme_a_report_row() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("pantheon-all-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .args([
            "run",
            "local",
            "--all",
            "--runtime",
            "10",
            "--seed",
            "7",
            "--capture",
        ])
        .args(["--uplink-trace", TRACE, "--downlink-trace", TRACE])
        .args(["--prepend-mm-cmds", "mm-delay 28", "--data-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let perf: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("pantheon_perf.json"))
            .unwrap_or_else(|e| panic!("{e}: {stderr}")),
    )
    .unwrap();
    let html = std::fs::read_to_string(dir.join("pantheon_report.html")).unwrap();
    let summary = std::fs::read_to_string(dir.join("pantheon_summary.md")).unwrap();
    // Issue 54, `--capture`: every scheme's sender-side capture holds what its log records;
    // the QUIC programs (quinn's rustls, quiche's BoringSSL) wrote their TLS secrets.
    let captures: Vec<(String, usize)> = MUST_RUN
        .iter()
        .map(|name| {
            let at = |ext: &str| dir.join(format!("{name}_datalink_run1_flow1.egress.{ext}"));
            let uids = captured_as_logged(&at("ptlog"), &at("pcapng"), 128);
            (name.to_string(), uids.len())
        })
        .collect();
    let keys: Vec<(String, String)> = ["quic", "quic_bbr2"]
        .iter()
        .flat_map(|name| ["sender", "receiver"].map(|side| (name.to_string(), side)))
        .map(|(name, side)| {
            let file = dir.join(format!("{name}_run1_flow1.{side}.keys"));
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            (format!("{name} {side}"), text)
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    for (name, packets) in &captures {
        assert!(*packets > 100, "{name}: {packets} packets captured");
    }
    for (side, text) in &keys {
        assert!(
            text.lines()
                .any(|l| l.starts_with("CLIENT_TRAFFIC_SECRET_0 ")),
            "{side}: no TLS 1.3 traffic secret in its key log:\n{text}"
        );
    }
    assert!(out.status.success(), "{stderr}");
    // Every runnable scheme ran to an ok row: the source schemes' variants among them, which
    // tests/source_schemes.rs checks one per build.
    let listed = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .args(["schemes", "list", "--json"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let runnable: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["runnable"] == true)
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(runnable.len() > MUST_RUN.len() + 16, "{runnable:?}");
    for name in &runnable {
        let row = format!("| {name} | 1 | ok |");
        assert!(summary.contains(&row), "{name} has no ok row:\n{summary}");
    }
    // Schemes that cannot run here are named with the reason, not run.
    assert!(stderr.contains("--all: skipping fillp ("), "{stderr}");
    // TCP Vegas is absent from this host's kernel; `--all` runs it in its guest kernel
    // (issue 51), with the kernel schemes that share it.
    assert!(!stderr.contains("skipping vegas"), "{stderr}");
    for name in MUST_RUN.iter().chain(&["vegas", "dctcp", "cubic_guest"]) {
        let tput = perf[name]["1"]["all"]["tput"]
            .as_f64()
            .unwrap_or_else(|| panic!("{name} has no throughput in {perf}"));
        // Full-throttle over a 10 Mbit/s path (the 80 % figures over 30 s runs are in the
        // benchmark bench/schemes.sh; 10 s leaves LEDBAT's slow window growth ~70 %). An
        // application-limited scheme, 40 % of its declared ceiling (WebRTC media: 2.5 Mbit/s,
        // starting at 0.3, so 1 Mbit/s on average).
        // Indigo's committed models, 2 Mbit/s: they were trained in simulated time without the
        // hosts' jitter, and in real time over this path they filled 45–70 % of it in 10 s
        // (session 24's CI rehearsal; 95–99 % in simulation). How far they are from the
        // frontier in real time is what docs/indigo.md's Figures 6 and 7 measure; here they
        // must run and move data.
        let least = if name.starts_with("indigo") {
            2.0
        } else {
            descriptor(name)
                .get("app_limited_mbps")
                .and_then(|c| c.as_float())
                .map_or(5.0, |c| (0.4 * c).min(5.0))
        };
        assert!(tput > least, "{name}: {tput} Mbit/s\n{summary}");
    }
    for label in ["QUIC BBRv2", "QUIC BBRv3", "Copa", "LEDBAT", "QUIC NewReno"] {
        assert!(html.contains(label), "{label} missing from the HTML report");
    }
}

/// Issue 54: with `--capture --snaplen 1500`, a QUIC scheme's sides leave a qlog (JSON-SEQ:
/// an RS before each JSON record, the first the file's header) and a key log with which tshark
/// decrypts the STREAM frames of the sender's two directions merged into one capture — and
/// without which it decrypts none. One scheme over quinn (quic), one over quiche (quic_bbr2),
/// one over tquic (quic_bbr3: key log and qlog directory from its descriptor's `capture_args`).
#[test]
fn quic_captures_decrypt_with_their_key_logs_and_qlogs_parse() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp("quic-capture");
    let d = &dir.0;
    common::pantheon(&[
        "run",
        "local",
        "--schemes",
        "quic quic_bbr2 quic_bbr3",
        "--runtime",
        "3",
        "--capture",
        "--snaplen",
        "1500",
        "--data-dir",
        d.to_str().unwrap(),
    ]);
    for name in ["quic", "quic_bbr2", "quic_bbr3"] {
        let qlog_dir = d.join(format!("{name}_run1_flow1.sender.qlog.d"));
        assert!(!qlog_dir.exists(), "{}: left behind", qlog_dir.display());
        for side in ["sender", "receiver"] {
            let file = d.join(format!("{name}_run1_flow1.{side}.sqlog"));
            let sent = qlog_packets_sent(&file);
            assert!(sent > 100, "{}: {sent} packet_sent events", file.display());
        }
        let at = |link: &str, dir: &str| d.join(format!("{name}_{link}_run1_flow1.{dir}.pcapng"));
        let merged = d.join(format!("{name}.sender.pcapng"));
        let (egress, ingress) = (at("datalink", "egress"), at("acklink", "ingress"));
        sh(&[
            "mergecap",
            "-w",
            merged.to_str().unwrap(),
            egress.to_str().unwrap(),
            ingress.to_str().unwrap(),
        ]);
        let keys = d.join(format!("{name}_run1_flow1.sender.keys"));
        let keylog = format!("tls.keylog_file:{}", keys.display());
        let stream = ["-Y", "quic.stream.stream_id"];
        let decrypted = tshark(&merged, &[&["-o", &keylog][..], &stream].concat()).len();
        let without = tshark(&merged, &stream).len();
        let sent = tshark(&egress, &[]).len();
        assert!(
            decrypted * 2 > sent && without == 0,
            "{name}: {decrypted} of {sent} sent packets decrypted into STREAM frames with the \
             key log, {without} without"
        );
    }
}

/// The `packet_sent` events of a qlog JSON-SEQ file, after checking that every record parses
/// as JSON and that the first is a qlog header naming JSON-SEQ (qlog 0.3, as quinn writes, or
/// the later drafts' `serialization_format`, as quiche does; tquic writes qlog 0.4's
/// `qlog_format`).
fn qlog_packets_sent(file: &std::path::Path) -> usize {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    assert!(text.starts_with('\x1e'), "{}: not JSON-SEQ", file.display());
    let records: Vec<Value> = text
        .split('\x1e')
        .filter(|r| !r.trim().is_empty())
        .map(|r| serde_json::from_str(r).unwrap_or_else(|e| panic!("{}: {e}: {r}", file.display())))
        .collect();
    let header = &records[0];
    let format = header
        .get("qlog_format")
        .or(header.get("serialization_format"));
    assert_eq!(
        format,
        Some(&Value::from("JSON-SEQ")),
        "{}: {header}",
        file.display()
    );
    records[1..]
        .iter()
        .filter(|e| {
            e["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("packet_sent"))
        })
        .count()
}

#[test]
fn nix_pins_parse_and_name_every_nix_descriptor() {
    for file in ["default.nix", "schemes/default.nix"] {
        nix_instantiate(&["--parse".to_owned(), format!("{NIX}/{file}")]);
    }
    // The attribute names of nix/schemes, evaluated without nixpkgs (names only: nothing is
    // fetched or built).
    let out = nix_instantiate(&[
        "--eval".to_owned(),
        "--strict".to_owned(),
        "--json".to_owned(),
        "-E".to_owned(),
        format!("builtins.attrNames (import {NIX}/schemes/default.nix {{ pkgs = {{ }}; }})"),
    ]);
    let attrs: Vec<String> = serde_json::from_slice(&out).unwrap();
    let mut nix_schemes = Vec::new();
    for entry in std::fs::read_dir(SCHEMES).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let d = descriptor(path.file_stem().unwrap().to_str().unwrap());
        for attr in d["dependencies"]
            .get("nix")
            .and_then(|n| n.as_array())
            .into_iter()
            .flatten()
        {
            let attr = attr.as_str().unwrap();
            let name = attr.strip_prefix("schemes.").unwrap_or(attr);
            assert!(
                attrs.iter().any(|a| a == name),
                "{}: {attr} is not in nix/schemes ({attrs:?})",
                path.display()
            );
            nix_schemes.push(name.to_owned());
        }
    }
    nix_schemes.sort();
    // The others are source schemes now (tests/source_schemes.rs); nix/ still builds them.
    let mut expected = vec!["fillp", "indigo"];
    expected.sort();
    assert_eq!(nix_schemes, expected);
}

/// Runs `nix-instantiate ARGS`, asserts it succeeded (naming its stderr) and returns its stdout.
fn nix_instantiate(args: &[String]) -> Vec<u8> {
    let out = Command::new("nix-instantiate")
        .args(args)
        .output()
        .expect("nix-instantiate (Debian nix-bin; scripts/test.sh installs it)");
    assert!(
        out.status.success(),
        "nix-instantiate {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The built-in descriptor `schemes/<name>.toml`, parsed.
fn descriptor(name: &str) -> toml::Value {
    let path = format!("{SCHEMES}/{name}.toml");
    toml::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")))
        .unwrap()
}
