//! ECN end to end (issue 52): the tunnel carries each packet's ECN field across (RFC 6040: the
//! outer header copies the inner one, a CE mark on the outer header is carried into the inner)
//! and logs it, the emulator's CoDel in ECN mode marks instead of dropping, and the analysis
//! counts the codepoints in `pantheon_perf.json`, the stats log and the report, and draws the
//! marks in the delay plot; the link log has a line per mark. Kernel Cubic with ECN on (`cubic_ecn`: `net.ipv4.tcp_ecn = 1` in
//! its namespaces) and without (`cubic`) over the same CoDel-ECN path: the first is marked and
//! loses nothing, the second is dropped; and quinn's QUIC, ECN-capable, in simulated time.
//! L4S: QUIC Prague (ECT(1)) beside Cubic through DualPI2, each in its own queue, real and
//! simulated. Needs root and iperf3 (CI installs them).

use std::path::PathBuf;

use serde_json::Value;

mod common;
use common::{pantheon, read_json, temp, Dir};

/// The real runs measure: one at a time (the test harness runs tests in parallel).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One flow's `"ecn"` object from run 1 of `scheme`.
fn ecn<'a>(perf: &'a Value, scheme: &str) -> &'a Value {
    let e = &perf[scheme]["1"]["1"]["ecn"];
    assert!(e.is_object(), "{scheme}: no ecn object in {perf}");
    e
}

/// An emulated path of the tests: a constant rate each way (Mbit/s), the `mm-delay`, and
/// mm-link's queue and delivery arguments.
struct Path {
    mbps: &'static str,
    delay: &'static str,
    link_args: &'static str,
}

/// 10 Mbit/s each way, `mm-delay 14`, a CoDel uplink queue in ECN mode (target 5 ms, interval
/// 100 ms, 1000 packets).
const CODEL_ECN: Path = Path {
    mbps: "10",
    delay: "mm-delay 14",
    link_args: "--uplink-queue=codel --uplink-queue-args=target=5,interval=100,packets=1000,ecn=1",
};

/// 50 Mbit/s each way, `mm-delay 10` (20 ms base RTT), DualPI2 on the uplink with Linux's
/// defaults (1 ms step in the L queue, 15 ms target of the classic one, k = 2) and a
/// 1000-packet limit, delivery opportunities evenly spaced (a 1 ms step is finer than a
/// Mahimahi trace's whole milliseconds).
const DUALPI2: Path = Path {
    mbps: "50",
    delay: "mm-delay 10",
    link_args: "--uplink-queue=dualpi2 --uplink-queue-args=limit=1000 \
                --uplink-delivery=even --downlink-delivery=even",
};

/// `pantheon run MODE SELECT FLOWS` (`--schemes` or `--mix`; one 20-s run) over `path` into
/// `dir/MODE`. Returns the data directory.
fn run_over(mode: &str, select: &str, flows: &str, path: &Path, dir: &Dir) -> PathBuf {
    let data = dir.0.join(mode);
    let trace = dir.0.join(format!("{}mbps.trace", path.mbps));
    let t = trace.to_str().unwrap();
    pantheon(&["trace", "constant", path.mbps, "-o", t]);
    pantheon(&[
        "run",
        mode,
        select,
        flows,
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
        path.delay,
        "--extra-mm-link-args",
        path.link_args,
    ]);
    data
}

/// The link log's `T m LEN` lines: departures that left carrying CE.
fn link_log_marks(file: &std::path::Path) -> u64 {
    let link = std::fs::read_to_string(file).unwrap();
    link.lines().filter(|l| l.contains(" m ")).count() as u64
}

fn count(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

#[test]
fn an_ecn_flow_over_codel_ecn_is_marked_not_dropped_and_the_marks_are_counted() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp("ecn");
    let data = run_over("local", "--schemes", "cubic cubic_ecn", &CODEL_ECN, &dir);
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
    let marks = link_log_marks(&data.join("cubic_ecn_mm_datalink_run1.log"));
    assert!(
        marks.abs_diff(ce) <= 2,
        "link log: {marks} marks, tunnel: {ce} CE"
    );
    assert_eq!(
        link_log_marks(&data.join("cubic_mm_datalink_run1.log")),
        0,
        "Not-ECT is never marked"
    );
}

/// Simulated time carries ECN as a real run does: quinn's QUIC sends ECT(0), the simulated
/// tunnel copies it to the outer header, CoDel-ECN marks it, and the marks are answered.
#[test]
fn simulated_quic_is_marked_through_codel_ecn_as_in_a_real_run() {
    let dir = temp("ecn-sim");
    let data = run_over("sim", "--schemes", "quic_newreno", &CODEL_ECN, &dir);
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

/// L4S without a guest kernel: QUIC Prague (quinn with our Prague controller, ECT(1)) and
/// kernel Cubic (Not-ECT) started together through DualPI2. Each flow is in its own queue:
/// Prague's packets leave ECT(1), are marked CE in the L queue and never dropped, and queue
/// about a millisecond; Cubic's wait in the classic queue near its 15 ms target. Both move
/// data (docs/ecn.md has the ratio; here only that neither starves). Simulated time runs the
/// same scheme with the same codepoints and marks.
#[test]
fn quic_prague_and_cubic_share_dualpi2_each_in_its_own_queue() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp("ecn-l4s");
    let data = run_over("local", "--mix", "quic_prague cubic", &DUALPI2, &dir);
    let perf = read_json(&data.join("pantheon_perf.json"));
    let run = &perf["quic_prague-cubic"]["1"];
    let (prague, cubic) = (&run["1"], &run["2"]);
    assert_eq!(prague["scheme"], "quic_prague", "{run}");
    assert_eq!(cubic["scheme"], "cubic", "{run}");

    let e = &prague["ecn"];
    let sent_ect1 = count(&e["sent"], "ect1");
    assert!(
        sent_ect1 > 10_000 && count(&e["sent"], "ect0") + count(&e["sent"], "not_ect") == 0,
        "Prague sends ECT(1) only: {e}"
    );
    let ce = count(e, "ce");
    assert!(ce > 0, "the L queue marked nothing: {e}");
    assert_eq!(count(e, "bleached"), 0, "{e}");
    let f = |flow: &Value, key: &str| {
        flow[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key}: {flow}"))
    };
    assert!(f(prague, "loss") < 1e-3, "Prague in the L queue: {prague}");
    assert!(f(prague, "queueing_delay") < 5.0, "L queue: {prague}");
    assert!(
        f(cubic, "queueing_delay") > 3.0 * f(prague, "queueing_delay"),
        "the classic queue holds Cubic's standing queue, the L queue does not: {run}"
    );
    let e = &cubic["ecn"];
    assert_eq!(count(e, "ce") + count(&e["sent"], "ect1"), 0, "{e}");
    let (tp, tc) = (f(prague, "tput"), f(cubic, "tput"));
    assert!(
        tp > 5.0 && tc > 5.0 && tp + tc > 40.0,
        "{tp} + {tc} of 50 Mbit/s"
    );
    assert!(
        link_log_marks(&data.join("quic_prague-cubic_mm_datalink_run1.log")).abs_diff(ce) <= 2,
        "link log marks vs {ce} CE"
    );
    let stats = std::fs::read_to_string(data.join("quic_prague-cubic_stats_run1.log")).unwrap();
    assert!(stats.contains(&format!(" {ce} CE (")), "{stats}");

    let sim = run_over("sim", "--schemes", "quic_prague", &DUALPI2, &dir);
    let perf = read_json(&sim.join("pantheon_perf.json"));
    let e = ecn(&perf, "quic_prague");
    assert_eq!(
        count(&e["sent"], "ect0") + count(&e["sent"], "not_ect"),
        0,
        "simulated Prague sends ECT(1): {e}"
    );
    assert!(count(e, "ce") > 0, "{e}");
    let flow = &perf["quic_prague"]["1"]["1"];
    assert!(
        f(flow, "loss") < 1e-3 && f(flow, "queueing_delay") < 5.0,
        "{flow}"
    );
    assert!(f(flow, "tput") > 40.0, "{flow}");
}
