//! ECN end to end (issue 52): the tunnel carries each packet's ECN field across (RFC 6040: the
//! outer header copies the inner one, a CE mark on the outer header is carried into the inner)
//! and logs it, the emulator's CoDel in ECN mode marks instead of dropping, and the analysis
//! counts the codepoints in `pantheon_perf.json`, the stats log and the report, and draws the
//! marks in the delay plot; the link log has a line per mark. Kernel Cubic with ECN on (`cubic_ecn`: `net.ipv4.tcp_ecn = 1` in
//! its namespaces) and without (`cubic`) over the same CoDel-ECN path: the first is marked and
//! loses nothing, the second is dropped; and quinn's QUIC, ECN-capable, in simulated time.
//! Needs root and iperf3 (CI installs them).

use std::path::PathBuf;

use serde_json::Value;

mod common;
use common::{pantheon, read_json, temp, Dir};

/// One flow's `"ecn"` object from run 1 of `scheme`.
fn ecn<'a>(perf: &'a Value, scheme: &str) -> &'a Value {
    let e = &perf[scheme]["1"]["1"]["ecn"];
    assert!(e.is_object(), "{scheme}: no ecn object in {perf}");
    e
}

/// `pantheon run MODE --schemes SCHEMES` (one 20-s run each) into `dir/data` over the path both
/// tests use: 10 Mbit/s each way, `mm-delay 14`, a CoDel uplink queue in ECN mode (target 5 ms,
/// interval 100 ms, 1000 packets). Returns the data directory.
fn run_over_codel_ecn(mode: &str, schemes: &str, dir: &Dir) -> PathBuf {
    let data = dir.0.join("data");
    let trace = dir.0.join("10mbps.trace");
    let t = trace.to_str().unwrap();
    pantheon(&["trace", "constant", "10", "-o", t]);
    pantheon(&[
        "run",
        mode,
        "--schemes",
        schemes,
        "--run-times",
        "1",
        "--runtime",
        "20",
        "--data-dir",
        data.to_str().unwrap(),
        "--uplink-trace",
        t,
        "--downlink-trace",
        t,
        "--prepend-mm-cmds",
        "mm-delay 14",
        "--extra-mm-link-args",
        "--uplink-queue=codel --uplink-queue-args=target=5,interval=100,packets=1000,ecn=1",
    ]);
    data
}

fn count(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

#[test]
fn an_ecn_flow_over_codel_ecn_is_marked_not_dropped_and_the_marks_are_counted() {
    let dir = temp("ecn");
    let data = run_over_codel_ecn("local", "cubic cubic_ecn", &dir);
    let perf = read_json(&data.join("pantheon_perf.json"));

    // Cubic with ECN: its data packets leave ECT(0), CoDel marks some CE, none is dropped.
    let e = ecn(&perf, "cubic_ecn");
    let sent = &e["sent"];
    let sent_ect0 = count(sent, "ect0");
    let sent_all = sent_ect0 + count(sent, "not_ect") + count(sent, "ect1") + count(sent, "ce");
    assert!(
        sent_ect0 as f64 >= 0.99 * sent_all as f64 && sent_ect0 > 10_000,
        "cubic_ecn sent {sent}"
    );
    let ce = count(e, "ce");
    assert!(ce > 0, "CoDel-ECN marked nothing: {e}");
    assert_eq!(count(e, "bleached"), 0, "{e}");
    let frac = e["ce_fraction"].as_f64().unwrap();
    assert!(
        (frac - ce as f64 / (ce + count(e, "ect0")) as f64).abs() < 1e-12,
        "{e}"
    );
    let flow = &perf["cubic_ecn"]["1"]["1"];
    let loss = flow["loss"].as_f64().unwrap();
    assert!(
        loss < 1e-4,
        "an ECN flow through CoDel-ECN lost {loss}: {flow}"
    );
    assert!(flow["tput"].as_f64().unwrap() > 8.0, "{flow}");
    // CoDel keeps the queue short by marks alone: p95 queueing delay well under Cubic's
    // 1000-packet (1.2 s) buffer.
    assert!(flow["queueing_delay"].as_f64().unwrap() < 50.0, "{flow}");

    // Cubic without ECN over the same queue: Not-ECT, never marked, dropped instead.
    let e = ecn(&perf, "cubic");
    assert_eq!(
        count(&e["sent"], "ect0") + count(&e["sent"], "ect1"),
        0,
        "{e}"
    );
    assert_eq!(count(e, "ce"), 0, "{e}");
    let loss = perf["cubic"]["1"]["1"]["loss"].as_f64().unwrap();
    assert!(loss > 1e-4, "CoDel dropped nothing of Cubic: {loss}");

    // The stats log and the report say it; the sysctl is in the run's notes; the delay plot
    // (with the marks) is drawn.
    let stats = std::fs::read_to_string(data.join("cubic_ecn_stats_run1.log")).unwrap();
    assert!(
        stats.contains("ECN (delivered): ") && stats.contains(&format!(" {ce} CE (")),
        "{stats}"
    );
    let plain = std::fs::read_to_string(data.join("cubic_stats_run1.log")).unwrap();
    assert!(
        !plain.contains("ECN"),
        "a Not-ECT flow's stats say nothing of ECN: {plain}"
    );
    let report = std::fs::read_to_string(data.join("pantheon_report.html")).unwrap();
    assert!(
        report.contains(&format!(" {ce} CE (")),
        "the report's statistics"
    );
    let runs = std::fs::read_to_string(data.join("pantheon_runs.json")).unwrap();
    assert!(runs.contains("cubic_ecn net.ipv4.tcp_ecn = 1"), "{runs}");
    assert!(data.join("cubic_ecn_datalink_delay_run1.png").is_file());
    // The emulator's link log says the same: a `T m LEN` line after each CE departure.
    let link = std::fs::read_to_string(data.join("cubic_ecn_mm_datalink_run1.log")).unwrap();
    let marks = link.lines().filter(|l| l.contains(" m ")).count() as u64;
    assert!(
        marks.abs_diff(ce) <= 2,
        "link log: {marks} marks, tunnel: {ce} CE"
    );
    let plain = std::fs::read_to_string(data.join("cubic_mm_datalink_run1.log")).unwrap();
    assert!(
        !plain.lines().any(|l| l.contains(" m ")),
        "Not-ECT is never marked"
    );
}

/// Simulated time carries ECN as a real run does: quinn's QUIC sends ECT(0), the simulated
/// tunnel copies it to the outer header, CoDel-ECN marks it, and the marks are answered.
#[test]
fn simulated_quic_is_marked_through_codel_ecn_as_in_a_real_run() {
    let dir = temp("ecn-sim");
    let data = run_over_codel_ecn("sim", "quic_newreno", &dir);
    let perf = read_json(&data.join("pantheon_perf.json"));
    let e = ecn(&perf, "quic_newreno");
    assert_eq!(
        count(&e["sent"], "not_ect"),
        0,
        "quinn sends every packet ECT(0): {e}"
    );
    assert!(count(e, "ce") > 0, "{e}");
    let flow = &perf["quic_newreno"]["1"]["1"];
    assert!(flow["loss"].as_f64().unwrap() < 1e-4, "{flow}");
    assert!(flow["tput"].as_f64().unwrap() > 8.0, "{flow}");
}
