//! End hosts' TCP buffer limits on the emulated path (`pt-host`, issue 50): a Cubic flow whose
//! send buffer is capped below the path's bandwidth-delay product gets the rate its bytes in
//! flight allow — bytes in flight as the kernel reports them during the run (`ss -ti` in the
//! sender's namespace: `unacked` × `mss`, over its smoothed `rtt`), not as assumed from the
//! cap — and the same flow with the machine's default buffers fills the link.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// 40 Mbit/s each way, 40 ms each way: an 80-ms RTT, a BDP of 400 kB.
const MBPS: u32 = 40;
const PREPEND: &str = "mm-delay 40";
/// The sender's send buffer may grow to 128 KiB of socket memory (payload is part of it).
const CAP: &str = "pt-host sender tcp_wmem=4096,16384,131072";
const RUNTIME_S: u64 = 20;

mod common;
use common::temp;

/// What the kernel said of the bulk connection in one `ss -tim` sample: payload bytes in
/// flight (`unacked` × `mss`), smoothed RTT (ms) and the send buffer's size (`tb`, bytes).
#[derive(Debug, Clone, Copy)]
struct Sample {
    in_flight: f64,
    rtt_ms: f64,
    sndbuf: f64,
}

fn field(line: &str, key: &str) -> Option<f64> {
    let at = line.find(key)? + key.len();
    let rest = &line[at..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The connection with the most bytes in flight in `ss -tim` output (iperf3 also has a
/// control connection), if any.
fn parse_ss(text: &str) -> Option<Sample> {
    text.lines()
        .filter_map(|l| {
            Some(Sample {
                in_flight: field(l, " unacked:")? * field(l, " mss:")?,
                rtt_ms: field(l, " rtt:")?,
                sndbuf: field(l, ",tb")?,
            })
        })
        .max_by(|a, b| a.in_flight.total_cmp(&b.in_flight))
}

/// Runs cubic for RUNTIME_S over the path (`prepend` before mm-link) into `data`, sampling
/// the sender namespace's connection every 250 ms from 5 s into the run. Returns the flow's
/// throughput (Mbit/s, from pantheon_perf.json) and the samples.
fn run(dir: &Path, name: &str, prepend: &str) -> (f64, Vec<Sample>) {
    let trace = dir.join("link.trace");
    let status = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .args(["trace", "constant", &MBPS.to_string(), "-o"])
        .arg(&trace)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let data = dir.join(name);
    let mut child = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .args(["run", "local", "--schemes", "cubic", "--runtime"])
        .arg(RUNTIME_S.to_string())
        .arg("--uplink-trace")
        .arg(&trace)
        .arg("--downlink-trace")
        .arg(&trace)
        .args(["--prepend-mm-cmds", prepend, "--data-dir"])
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The run's sender namespace: `pt-<pid>-<n>-tx1`, n = 0 for the first run.
    let ns = format!("pt-{}-0-tx1", child.id());
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut seen_at = None;
    while started.elapsed() < Duration::from_secs(60) && child.try_wait().unwrap().is_none() {
        let out = Command::new("ip")
            .args(["netns", "exec", &ns, "ss", "-tim", "state", "established"])
            .stderr(Stdio::null())
            .output()
            .unwrap();
        if let Some(s) = parse_ss(&String::from_utf8_lossy(&out.stdout)) {
            let first = *seen_at.get_or_insert_with(Instant::now);
            let t = first.elapsed().as_secs();
            if (5..RUNTIME_S - 2).contains(&t) && s.in_flight > 0.0 {
                samples.push(s);
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let perf: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("pantheon_perf.json")).unwrap()).unwrap();
    let tput = perf["cubic"]["1"]["all"]["tput"].as_f64().unwrap();
    (tput, samples)
}

#[test]
fn a_send_buffer_below_the_bdp_holds_cubic_to_what_its_bytes_in_flight_allow() {
    let dir = temp("hosts");

    let (capped, samples) = run(&dir.0, "capped", &format!("{PREPEND} {CAP}"));
    assert!(
        samples.len() >= 20,
        "too few samples of the sender: {samples:?}"
    );
    // The limit was set in the sender's namespace: its send buffer never grew past the cap.
    for s in &samples {
        assert!(
            s.sndbuf <= 131_072.0,
            "send buffer {} B: {samples:?}",
            s.sndbuf
        );
    }
    // The rate the kernel's bytes in flight allow, Mbit/s.
    let allowed = samples
        .iter()
        .map(|s| s.in_flight * 8.0 / (s.rtt_ms * 1e3))
        .sum::<f64>()
        / samples.len() as f64;
    eprintln!(
        "capped: {capped:.2} Mbit/s measured, {allowed:.2} Mbit/s allowed by the kernel's bytes \
         in flight ({} samples, first {:?})",
        samples.len(),
        samples[0]
    );
    assert!(
        allowed < 0.7 * f64::from(MBPS),
        "capped at 128 KiB, the kernel still kept {allowed:.1} Mbit/s in flight: {samples:?}"
    );
    assert!(
        (capped - allowed).abs() < 0.2 * allowed,
        "capped flow: {capped:.2} Mbit/s measured, {allowed:.2} Mbit/s allowed by its bytes in \
         flight: {samples:?}"
    );

    // The machine's defaults (Linux's tcp_wmem max is 4 MiB): the flow fills the link.
    let (free, free_samples) = run(&dir.0, "default", PREPEND);
    eprintln!(
        "default buffers: {free:.2} Mbit/s; {:?}",
        free_samples.last()
    );
    assert!(
        free > 0.85 * f64::from(MBPS) && free > 1.3 * capped,
        "default buffers: {free:.2} Mbit/s; capped: {capped:.2} Mbit/s"
    );

    // The limit is part of the emulator: in the metadata and the run record.
    let meta = std::fs::read_to_string(dir.0.join("capped/pantheon_metadata.json")).unwrap();
    assert!(
        meta.contains("pt-host sender tcp_wmem=4096,16384,131072"),
        "{meta}"
    );
    let runs = std::fs::read_to_string(dir.0.join("capped/pantheon_runs.json")).unwrap();
    assert!(
        runs.contains("end hosts (pt-host): sender net.ipv4.tcp_wmem = 4096 16384 131072"),
        "{runs}"
    );
}

#[test]
fn pt_host_errors_name_the_word_and_simulated_runs_refuse_it() {
    let pantheon = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_pantheon"))
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = pantheon(&[
        "run",
        "local",
        "--schemes",
        "cubic",
        "--prepend-mm-cmds",
        "mm-delay 10 pt-host sender tcp_wmem=3,2,1",
    ]);
    assert!(e.contains("got `3,2,1`"), "{e}");
    let e = pantheon(&[
        "run",
        "sim",
        "--schemes",
        "quic",
        "--prepend-mm-cmds",
        "mm-delay 10 pt-host both tcp_rmem=4096,87380,6291456",
    ]);
    assert!(e.contains("simulated runs have no kernel TCP"), "{e}");
}
