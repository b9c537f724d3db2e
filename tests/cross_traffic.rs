//! Non-reactive cross traffic on the emulated bottleneck (`mm-link --uplink-cross-traffic=`,
//! issue 50): a constant X Mbit/s of other users' packets on an R Mbit/s link leaves a Cubic
//! flow about R − X, in a real run (kernel Cubic through the tunnel) and in simulated time
//! (QUIC Cubic); the cross packets are in the link log, marked (`c+`, `c-`), and in none of the
//! scheme's figures. A reactive cross flow (Reno, in the emulator) takes a share and leaves the
//! rest. An iBoxNet network profile runs as an emulator, with its cross traffic and its
//! one-direction delay; the published set's format imports into the emulator library. Needs
//! root and iperf3 (CI installs them).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

mod common;
use common::{pantheon, pantheon_status, refused_before_anything_runs, temp, Dir};

/// Held by each test that runs: a real run's throughput is measured, so runs do not share the
/// two cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// The link, Mbit/s each way, and the cross traffic on its uplink.
const LINK_MBPS: f64 = 24.0;
const CROSS_MBPS: f64 = 8.0;

/// What an mm-link log says of one direction: Mbit/s of the scheme's departures and of the
/// cross traffic's, over `[from_ms, to_ms)`, and the count of cross arrivals.
struct LinkFigures {
    scheme_mbps: f64,
    cross_mbps: f64,
    cross_arrivals: usize,
}

fn link_figures(log: &Path, from_ms: u64, to_ms: u64) -> LinkFigures {
    let text = std::fs::read_to_string(log).unwrap();
    let (mut scheme, mut cross, mut cross_arrivals) = (0u64, 0u64, 0);
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let t: u64 = f[0].parse().unwrap();
        match f[1] {
            "c+" => cross_arrivals += 1,
            "-" if (from_ms..to_ms).contains(&t) => scheme += f[2].parse::<u64>().unwrap(),
            "c-" if (from_ms..to_ms).contains(&t) => cross += f[2].parse::<u64>().unwrap(),
            "+" | "-" | "#" | "d" | "c-" | "cd" => {}
            other => panic!("{}: unknown event `{other}` in `{line}`", log.display()),
        }
    }
    let mbps = |bytes: u64| bytes as f64 * 8.0 / ((to_ms - from_ms) as f64 * 1e3);
    LinkFigures {
        scheme_mbps: mbps(scheme),
        cross_mbps: mbps(cross),
        cross_arrivals,
    }
}

/// Run 1's `tput` (Mbit/s) or `delay` (p95 one-way, ms), from `pantheon_perf.json`.
fn run_figure(data: &Path, scheme: &str, figure: &str) -> f64 {
    let perf: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("pantheon_perf.json")).unwrap()).unwrap();
    perf[scheme]["1"]["all"][figure]
        .as_f64()
        .unwrap_or_else(|| panic!("no {figure} in {perf}"))
}

/// An iBoxNet network profile (the published format; made-up figures): 12 Mbit/s up with a
/// 60-packet buffer, 20 ms one way up and none down, 4 Mbit/s of cross traffic up; iBoxNet's
/// defaults down.
const PROFILE: &str = r#"{
    "measurement_node": "testland", "peer_cloud_server": "aws testland",
    "data_flow_direction": "upload", "link_type": "cellular",
    "data_source_url": "https://pantheon.stanford.edu/result/0/",
    "config": {
        "uplink": {"bottleneck_bandwidth": 12000, "buffer_size_bytes": 90000,
                   "buffer_size_packets": 60, "propagation_delay": 20,
                   "cross_traffic_pattern": [4000, 4000, 4000]},
        "downlink": {"bottleneck_bandwidth": 100000, "buffer_size_bytes": 15000000,
                     "buffer_size_packets": 10000, "propagation_delay": 0,
                     "cross_traffic_pattern": []}
    }
}"#;

/// How a run's path is given, and the uplink's rate and cross traffic, Mbit/s.
struct PathUnderTest {
    args: Vec<String>,
    link_mbps: f64,
    cross_mbps: f64,
}

/// 24 Mbit/s each way, `mm-delay 20`, a 150-packet DropTail uplink, 8 Mbit/s of cross traffic
/// up; the trace is written into `dir`.
fn flags_path(dir: &Path) -> PathUnderTest {
    let trace = dir.join("24mbps.trace");
    let t = trace.to_str().unwrap().to_owned();
    pantheon(&["trace", "constant", &LINK_MBPS.to_string(), "-o", &t]);
    let extra = format!(
        "--uplink-cross-traffic={CROSS_MBPS} --uplink-queue=droptail --uplink-queue-args=packets=150"
    );
    PathUnderTest {
        args: [
            "--uplink-trace",
            &t,
            "--downlink-trace",
            &t,
            "--prepend-mm-cmds",
            "mm-delay 20",
            "--extra-mm-link-args",
            &extra,
        ]
        .map(str::to_owned)
        .to_vec(),
        link_mbps: LINK_MBPS,
        cross_mbps: CROSS_MBPS,
    }
}

/// [`PROFILE`] written into `dir`, run with `--emulator PROFILE.json`.
fn profile_path(dir: &Path) -> PathUnderTest {
    let file = dir.join("network-profile-1.json");
    std::fs::write(&file, PROFILE).unwrap();
    PathUnderTest {
        args: vec!["--emulator".into(), file.display().to_string()],
        link_mbps: 12.0,
        cross_mbps: 4.0,
    }
}

/// Runs `scheme` for `runtime` s (`mode`: `local` or `sim`) over the path and checks that the
/// cross traffic ran, took its share and is not in the scheme's figures. Returns the results
/// directory (removed with `dir`).
fn cross_traffic_leaves_the_rest(
    dir: &Dir,
    mode: &str,
    scheme: &str,
    runtime: u64,
    path: &PathUnderTest,
) -> PathBuf {
    let data = dir.0.join(format!("data-{mode}"));
    let mut args: Vec<String> = ["run", mode, "--schemes", scheme, "--runtime"]
        .map(str::to_owned)
        .to_vec();
    args.push(runtime.to_string());
    args.extend(path.args.iter().cloned());
    args.extend(["--data-dir".into(), data.display().to_string()]);
    pantheon(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let (link_mbps, cross_mbps) = (path.link_mbps, path.cross_mbps);
    let log = data.join(format!("{scheme}_mm_datalink_run1.log"));
    // The cross traffic runs from the link's start, at its rate throughout.
    let whole = link_figures(&log, 0, runtime * 1000);
    let expected_arrivals = cross_mbps * 1e6 / 12_000.0 * runtime as f64;
    assert!(
        whole.cross_arrivals as f64 >= 0.95 * expected_arrivals,
        "{mode}: {} cross arrivals, expected about {expected_arrivals}",
        whole.cross_arrivals
    );
    // After slow start, the link is full: the scheme's share and the cross traffic's make R.
    let late = link_figures(&log, 5_000, runtime * 1000 - 500);
    let delivered = late.scheme_mbps + late.cross_mbps;
    assert!(
        (0.9 * link_mbps..=1.01 * link_mbps).contains(&delivered),
        "{mode}: the link carried {delivered:.2} Mbit/s ({:.2} scheme + {:.2} cross)",
        late.scheme_mbps,
        late.cross_mbps
    );
    // Non-reactive: it keeps its rate but for the packets a full queue drops.
    assert!(
        (0.85 * cross_mbps..=1.01 * cross_mbps).contains(&late.cross_mbps),
        "{mode}: cross traffic delivered {:.2} Mbit/s",
        late.cross_mbps
    );
    // The scheme's throughput (from its own tunnel logs) is what the cross traffic left,
    // never the cross traffic's packets.
    let tput = run_figure(&data, scheme, "tput");
    let left = link_mbps - late.cross_mbps;
    assert!(
        (0.8 * left..=1.02 * left).contains(&tput),
        "{mode}: {scheme} got {tput:.2} Mbit/s where the cross traffic left {left:.2}"
    );
    data
}

#[test]
fn constant_cross_traffic_leaves_a_cubic_flow_the_rest_of_the_link() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp("cross-local");
    let path = flags_path(&dir.0);
    cross_traffic_leaves_the_rest(&dir, "local", "cubic", 20, &path);
}

#[test]
fn constant_cross_traffic_leaves_the_rest_in_simulated_time_too() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp("cross-sim");
    let path = flags_path(&dir.0);
    cross_traffic_leaves_the_rest(&dir, "sim", "quic", 20, &path);
}

/// An iBoxNet profile runs as it is (`--emulator FILE.json`), locally and in simulated time:
/// its cross traffic is in the link log and not in the scheme's figures, and its one-way delay
/// is the uplink's alone (20 ms up, none down: a symmetric split would show 10).
#[test]
fn an_ibox_profile_runs_with_its_cross_traffic_local_and_simulated() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp("cross-ibox");
    let path = profile_path(&dir.0);
    for (mode, scheme) in [("local", "cubic"), ("sim", "quic")] {
        let data = cross_traffic_leaves_the_rest(&dir, mode, scheme, 15, &path);
        let delay = run_figure(&data, scheme, "delay");
        assert!(
            delay >= 20.0,
            "{mode}: p95 one-way delay {delay} ms under 20 ms"
        );
        let meta = std::fs::read_to_string(data.join("pantheon_metadata.json")).unwrap();
        assert!(meta.contains("pt-delay uplink 20"), "{meta}");
    }
}

/// A reactive cross flow (`--uplink-cross-flows=1,40`: one Reno flow, 40 ms round trip beyond
/// the link) and a Cubic flow share 24 Mbit/s: together they fill it, the cross flow takes a
/// real share (it backs off, so not all of it; it is not a fixed rate), and the scheme's own
/// figures are what is left — in a real run and in simulated time. Measured by hand: 13.4 +
/// 10.7 Mbit/s locally (kernel Cubic), 13.5 + 10.6 simulated (QUIC Cubic).
#[test]
fn a_reactive_cross_flow_shares_the_link_local_and_simulated() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp("cross-reactive");
    let mut path = flags_path(&dir.0);
    let at = path.args.len() - 1;
    path.args[at] = "--uplink-cross-flows=1,40 --uplink-queue=droptail \
                     --uplink-queue-args=packets=150"
        .into();
    for (mode, scheme) in [("local", "cubic"), ("sim", "quic")] {
        let data = dir.0.join(format!("data-{mode}"));
        let mut args: Vec<&str> = vec!["run", mode, "--schemes", scheme, "--runtime", "20"];
        args.extend(path.args.iter().map(String::as_str));
        let d = data.display().to_string();
        args.extend(["--data-dir", &d]);
        pantheon(&args);
        let late = link_figures(
            &data.join(format!("{scheme}_mm_datalink_run1.log")),
            5_000,
            19_500,
        );
        let delivered = late.scheme_mbps + late.cross_mbps;
        assert!(
            (0.9 * LINK_MBPS..=1.01 * LINK_MBPS).contains(&delivered),
            "{mode}: {:.2} scheme + {:.2} cross",
            late.scheme_mbps,
            late.cross_mbps
        );
        assert!(
            (0.2 * LINK_MBPS..=0.7 * LINK_MBPS).contains(&late.cross_mbps),
            "{mode}: the cross flow delivered {:.2} Mbit/s",
            late.cross_mbps
        );
        let tput = run_figure(&data, scheme, "tput");
        let left = LINK_MBPS - late.cross_mbps;
        assert!(
            (0.8 * left..=1.05 * left).contains(&tput),
            "{mode}: {scheme} got {tput:.2} Mbit/s where the cross flow left {left:.2}"
        );
    }
}

/// `pantheon emulators import DIR` makes a tree of profiles (the published layout) presets in
/// the library: a malformed one is refused naming file and key (exit status 1) and the rest
/// imported; `pantheon emulators --country C` lists them; `--emulator NAME` runs one (here in
/// simulated time) with its cross traffic in the link log.
#[test]
fn profiles_import_into_the_library_list_by_country_and_run_by_name() {
    let dir = temp("ibox-library");
    let tree = dir.0.join("network-profiles/testland/cellular");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("network-profile-1.json"), PROFILE).unwrap();
    std::fs::write(
        tree.join("network-profile-2.json"),
        PROFILE.replace(
            "\"bottleneck_bandwidth\": 12000",
            "\"bottleneck_bandwidth\": \"fast\"",
        ),
    )
    .unwrap();
    let library = dir.0.join("library");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pantheon"))
            .args(args)
            .env("PANTHEON_EMULATORS_HOME", &library)
            .output()
            .unwrap();
        (out.status.code(), common::text(&out))
    };
    let (code, out) = run(&[
        "emulators",
        "import",
        dir.0.join("network-profiles").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("imported 1 iBoxNet profiles"), "{out}");
    assert!(
        out.contains("network-profile-2.json: config.uplink.bottleneck_bandwidth: `\"fast\"`"),
        "{out}"
    );
    let (code, out) = run(&["emulators", "--country", "testland", "--names"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("ibox-testland-cellular-1\n"), "{out}");
    assert!(out.contains("1 emulators shown of"), "{out}");
    let (_, out) = run(&["emulators", "--country", "elsewhere", "--names"]);
    assert!(
        out.starts_with("\n0 emulators shown"),
        "nothing on stdout: {out}"
    );
    let data = dir.0.join("data");
    let (code, out) = run(&[
        "run",
        "sim",
        "--schemes",
        "quic",
        "--runtime",
        "5",
        "--emulator",
        "ibox-testland-cellular-1",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{out}");
    let log = link_figures(&data.join("quic_mm_datalink_run1.log"), 0, 5000);
    assert!(
        log.cross_arrivals > 1000,
        "{} cross arrivals",
        log.cross_arrivals
    );
}

/// A malformed profile names the file and the key.
#[test]
fn a_malformed_ibox_profile_names_file_and_key() {
    let dir = temp("cross-bad");
    let file = dir.0.join("network-profile-2.json");
    std::fs::write(
        &file,
        PROFILE.replace("\"propagation_delay\": 20", "\"propagation_delay\": -3"),
    )
    .unwrap();
    refused_before_anything_runs(
        "local",
        &dir.0.join("data"),
        &[(
            vec!["--schemes", "cubic", "--emulator", file.to_str().unwrap()],
            "network-profile-2.json: config.uplink.propagation_delay: `-3`",
        )],
    );
}

/// A malformed rate is refused before anything runs, naming the flag and the value.
#[test]
fn a_malformed_cross_traffic_rate_is_named() {
    let (code, text) = pantheon_status(&[
        "shell",
        "mm-link",
        "/nonexistent.trace",
        "/nonexistent.trace",
        "--uplink-cross-traffic=8,fast",
        "--",
        "true",
    ]);
    assert_ne!(code, 0);
    assert!(
        text.contains("--uplink-cross-traffic") && text.contains("value 2 (`fast`)"),
        "{text}"
    );
}
