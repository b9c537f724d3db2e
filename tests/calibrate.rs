//! `pantheon calibrate`, synthetic recovery: results produced over a hidden emulator are the
//! target; a calibration with a bounded budget must find an emulator with a replication error
//! of at most 5 % and parameters near the hidden ones, write its outputs, resume from its log,
//! and leave no namespace behind. Needs root, iproute2 and iperf3 (CI installs them).
//!
//! The hidden path has no random loss: over runs as short as CI can afford (5 s), i.i.d. loss
//! makes Cubic's figures vary so much from one loss seed to the next that the *hidden emulator
//! itself* scores 5–31 % against its own results (measured: 24 Mbit/s, 30 ms, 60 packets,
//! 0.5 % loss, 6 s runs, seeds 1–3: 4.9, 31.3, 23.1 %), so no calibration could be held to
//! 5 % there. The loss dimension is still searched (0–10 %) and must come out near zero.
//!
//! The tests run one at a time ([`SERIAL`]): a calibration measures its candidates by running
//! them, and a second test's runs on the same two cores inflate the errors it measures (CI,
//! both tests at once: the found emulator 24.05 Mbit/s, 30 ms, 66 packets scored 6.1 % and
//! 4.0 %, failing the 5 %; the same emulator run by itself scores 2.7 %, and the hidden
//! emulator 0.5–0.6 % against its own results under six other seeds).

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

const PANTHEON: &str = env!("CARGO_BIN_EXE_pantheon");

/// Held by each test for its whole length: measurements must not share the CPU.
static SERIAL: Mutex<()> = Mutex::new(());

fn pantheon(args: &[&str]) -> String {
    let out = Command::new(PANTHEON)
        .args(args)
        .output()
        .expect("run pantheon");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "pantheon {args:?} failed:\n{text}");
    text
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Namespaces named like ours (`pt-<pid>-…`).
fn our_namespaces() -> Vec<String> {
    netns::list_named()
        .into_iter()
        .filter(|n| n.starts_with("pt-"))
        .collect()
}

#[test]
fn calibration_recovers_a_hidden_emulator() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).display().to_string();
    let before = our_namespaces();

    // The hidden emulator: 24 Mbit/s, 30 ms one way, 60-packet uplink DropTail.
    pantheon(&["trace", "constant", "24", "-o", &d("24mbps.trace")]);
    pantheon(&[
        "run",
        "local",
        "--schemes",
        "cubic bbr",
        "--runtime",
        "5",
        "--seed",
        "5",
        "--uplink-trace",
        &d("24mbps.trace"),
        "--downlink-trace",
        &d("24mbps.trace"),
        "--prepend-mm-cmds",
        "mm-delay 30",
        "--extra-mm-link-args",
        "--uplink-queue=droptail --uplink-queue-args=packets=60",
        "--data-dir",
        &d("target"),
    ]);

    let (target, out_dir) = (d("target"), d("cal"));
    let calibrate = |extra: &[&str]| {
        let mut args = vec![
            "calibrate",
            &target,
            "--schemes",
            "cubic bbr",
            "--runtime",
            "5",
            "--delivery",
            "constant",
            "--max-evals",
            "16",
            "--initial-evals",
            "6",
            "--jobs",
            "2",
            "--seed",
            "1",
            "--out",
            &out_dir,
        ];
        args.extend_from_slice(extra);
        pantheon(&args)
    };
    let out = calibrate(&["--confirm", "2"]);
    assert!(out.contains("Best emulator:"), "{out}");

    let cal = dir.path().join("cal");
    let summary = read_json(&cal.join("calibration.json"));
    let o = &summary["outcome"];
    let best = &o["best"];
    let error = o["error_pct"].as_f64().unwrap();
    assert!(error <= 5.0, "replication error {error} % > 5 %:\n{out}");
    let rate = best["rate_mbps"].as_f64().unwrap();
    let delay = best["delay_ms"].as_u64().unwrap();
    let queue = best["queue_packets"].as_u64().unwrap();
    let loss = best["loss"].as_f64().unwrap();
    assert!(
        (rate - 24.0).abs() <= 2.4,
        "rate {rate} not within 10 % of 24:\n{out}"
    );
    // Cubic's and BBR's p95 delays pin the delay plus the full queue's drain time (30 + 60
    // packets × 0.5 ms = 60 ms) more tightly than either alone: a search may trade a few ms of
    // delay for queue along that ridge (CI once found 36 ms and 47 packets: 59.5 ms, 2.9 %).
    assert!(
        delay.abs_diff(30) <= 6,
        "delay {delay} not within 20 % of 30:\n{out}"
    );
    assert!(
        queue.abs_diff(60) <= 18,
        "queue {queue} not within 30 % of 60:\n{out}"
    );
    // Within 10 %: 6 ms is 12 packets at the right delay (stop 62's CI found 30 ms and 66
    // packets, 63 ms; 3 % of Cubic's p95 is about 1 % of replication error, below the noise
    // of 5-s runs).
    let full_queue_ms = delay as f64 + queue as f64 * 1500.0 * 8.0 / (rate * 1e3);
    eprintln!(
        "found {rate} Mbit/s, {delay} ms, {queue} packets, loss {loss}: delay + full queue \
         {full_queue_ms:.1} ms, replication error {error:.2} %"
    );
    assert!(
        (full_queue_ms - 60.0).abs() <= 6.0,
        "delay + full queue {full_queue_ms:.1} ms not within 10 % of 60:\n{out}"
    );
    assert!(
        loss <= 0.001,
        "loss {loss} where the hidden path has none:\n{out}"
    );
    assert_eq!(best["delivery"], "constant");
    // Bounds as Pantheon derived them: delay up to 2 × min one-way delay (≈ 30.5 ms).
    let delay_bound = o["bounds"]["delay_ms"][1].as_u64().unwrap();
    assert!(
        (60..=64).contains(&delay_bound),
        "delay bound {delay_bound}"
    );
    // Loss up to clamp(4 × median run loss, 0.1, 0.5); the runs' loss is the queue's drops.
    let mut losses: Vec<f64> = summary["observations"]["loss"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    losses.sort_by(f64::total_cmp);
    assert_eq!(losses.len(), 2);
    let expected = (4.0 * (losses[0] + losses[1]) / 2.0).clamp(0.1, 0.5);
    let loss_bound = o["bounds"]["loss"][1].as_f64().unwrap();
    assert!(
        (loss_bound - expected).abs() < 1e-12,
        "loss bound {loss_bound}"
    );

    // The search log: 16 evaluations and 2 confirmations, in Pantheon's key=value form.
    let log = std::fs::read_to_string(cal.join("search.log")).unwrap();
    assert_eq!(log.lines().count(), 18, "{log}");
    for line in log.lines() {
        assert!(line.starts_with("bw="), "{line}");
        assert!(line.contains(",overall_loss="), "{line}");
        assert!(
            line.contains(",cubic.tput=") && line.contains(",bbr.delay="),
            "{line}"
        );
    }
    // Leave-one-out: one entry per scheme.
    assert!(o["leave_one_out"]["cubic"]["tput_error_pct"].is_f64());
    assert!(o["leave_one_out"]["bbr"]["delay_error_pct"].is_f64());
    // Outputs a researcher opens.
    let mm = std::fs::read_to_string(cal.join("mahimahi.txt")).unwrap();
    assert!(
        mm.starts_with(&format!("mm-delay {delay}")) && mm.contains("--uplink-queue=droptail"),
        "{mm}"
    );
    for plot in ["figure3.svg", "convergence.svg"] {
        let svg = std::fs::read_to_string(cal.join(plot)).unwrap();
        assert!(
            svg.contains("TCP Cubic") || svg.contains("best so far"),
            "{plot}"
        );
    }

    // Resuming: the same command with no confirmation adds no evaluation and finds the same
    // best emulator from the log alone.
    let again = calibrate(&["--confirm", "0"]);
    let log2 = std::fs::read_to_string(cal.join("search.log")).unwrap();
    assert_eq!(
        log2, log,
        "a resumed calibration re-ran evaluations:\n{again}"
    );
    assert_eq!(
        read_json(&cal.join("calibration.json"))["outcome"]["best"],
        *best
    );

    // The preset runs.
    let run = pantheon(&[
        "run",
        "local",
        "--schemes",
        "bbr",
        "--runtime",
        "2",
        "--emulator",
        &cal.join("emulator.json").display().to_string(),
        "--data-dir",
        &d("check"),
    ]);
    let meta = read_json(&dir.path().join("check/pantheon_metadata.json"));
    assert_eq!(
        meta["prepend_mm_cmds"].as_str(),
        Some(format!("mm-delay {delay}").as_str()),
        "{run}"
    );

    // A table of the target's own medians (a path known from its report) compares with the
    // target directory at 0 % replication error.
    let mut csv = String::from("scheme,tput_mbps,delay_ms\n");
    for (scheme, t) in summary["target_schemes"].as_object().unwrap() {
        csv += &format!("{scheme},{},{}\n", t["tput_mbps"], t["delay_ms"]);
    }
    std::fs::write(dir.path().join("target.csv"), csv).unwrap();
    let cmp = pantheon(&["compare", &d("target.csv"), &target]);
    assert!(cmp.contains("overall 0.0%"), "{cmp}");

    assert_eq!(our_namespaces(), before, "namespaces left behind");
}

#[test]
fn known_end_hosts_ride_on_every_candidate_and_on_the_result() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).display().to_string();
    // A table target (no logs): the bounds are given.
    std::fs::write(d("t.csv"), "scheme,tput_mbps,delay_ms\ncubic,8,30\n").unwrap();
    let hosts = "pt-host sender tcp_wmem=4096,16384,131072";
    // A search of `evals` evaluations within given bounds, `extra` added.
    let target = d("t.csv");
    let bounded_args = |evals: &str, extra: &[&str]| {
        let mut args = vec![
            "calibrate",
            &target,
            "--schemes",
            "cubic",
            "--runtime",
            "3",
            "--delivery",
            "constant",
            "--max-evals",
            evals,
            "--initial-evals",
            evals,
            "--confirm",
            "0",
            "--rate-mbps",
            "10,20",
            "--delay-ms",
            "10,20",
            "--queue-packets",
            "20,40",
            "--loss",
            "0,0.01",
        ];
        args.extend_from_slice(extra);
        args.into_iter().map(str::to_owned).collect::<Vec<String>>()
    };
    let bounded = |evals: &str, extra: &[&str]| {
        let args = bounded_args(evals, extra);
        pantheon(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let out = bounded("2", &["--hosts", hosts, "--keep-runs", "--out", &d("cal")]);
    let cal = dir.path().join("cal");
    // Every evaluation ran with them …
    for n in 0..2 {
        let runs =
            std::fs::read_to_string(cal.join(format!("evals/{n}/pantheon_runs.json"))).unwrap();
        assert!(
            runs.contains("end hosts (pt-host): sender net.ipv4.tcp_wmem = 4096 16384 131072"),
            "{runs}"
        );
    }
    // … and the result carries them: the preset, the record, the Mahimahi line's caveat.
    let preset = read_json(&cal.join("emulator.json"));
    assert!(
        preset["prepend"].as_str().unwrap().starts_with(hosts),
        "{preset}"
    );
    assert_eq!(read_json(&cal.join("calibration.json"))["hosts"], hosts);
    let mm = std::fs::read_to_string(cal.join("mahimahi.txt")).unwrap();
    assert!(mm.contains("# pt-host is Pantheon-rs's"), "{mm}\n{out}");

    // A Pantheon report's "System info" (its text) gives them too; one that states none is
    // refused.
    std::fs::write(
        d("report.txt"),
        "System info:\n\nLinux 4.15.0-1020-aws\n\nnet.ipv4.tcp_rmem = 4096 16777216 536870912\n\n\
         net.ipv4.tcp_wmem = 4096 16777216 536870912\n",
    )
    .unwrap();
    bounded(
        "1",
        &[
            "--hosts-from-report",
            &d("report.txt"),
            "--out",
            &d("cal-report"),
        ],
    );
    assert_eq!(
        read_json(&dir.path().join("cal-report/calibration.json"))["hosts"],
        "pt-host both tcp_rmem=4096,16777216,536870912 tcp_wmem=4096,16777216,536870912"
    );
    // `calibrate` with `args` fails saying `why`.
    let refused = |args: &[&str], why: &str| {
        let bad = Command::new(PANTHEON)
            .arg("calibrate")
            .arg(d("t.csv"))
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&bad.stderr);
        assert!(!bad.status.success() && err.contains(why), "{err}");
    };
    refused(
        &["--hosts-from-report", &d("t.csv"), "--out", &d("c3")],
        "states no net.ipv4.tcp_rmem",
    );
    // Only pt-host shells: the path is the search's.
    refused(
        &["--hosts", "mm-delay 3", "--out", &d("c2")],
        "--hosts takes pt-host shells only",
    );
    // Resuming the first search without its end hosts would mix two searches' figures.
    let other_hosts = Command::new(PANTHEON)
        .args(bounded_args("3", &["--out", &d("cal")]))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&other_hosts.stderr);
    assert!(
        !other_hosts.status.success()
            && err.contains(&format!("started with hosts = \"{hosts}\", now \"\"")),
        "{err}"
    );
}

/// Cross traffic as a fifth parameter (`--cross-traffic LOW,HIGH`), in simulated time: the
/// target is QUIC Cubic and NewReno over 24 Mbit/s with 8 Mbit/s of other users' traffic
/// (30 ms, 60 packets). Given the link's rate (as a capacity measured by other means fixes
/// it), the search recovers the cross traffic; left free, it recovers the capacity the cross
/// traffic leaves (rate − cross ≈ 16 Mbit/s) — how that splits into a faster link with
/// cross traffic or a slower one without is not told apart by loss-based schemes' median
/// throughput and p95 delay (both fill the queue; a 16 Mbit/s link with 40 packets has the
/// same queueing delay as 24 Mbit/s with 60 packets a third of which are cross traffic).
/// Measured by hand: rate known, 8.03 Mbit/s of cross traffic at 0.3 %; free, 23.42 Mbit/s with
/// 7.02 of cross traffic (16.4 left) at 1.8 %.
#[test]
fn calibration_recovers_hidden_cross_traffic() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).display().to_string();
    pantheon(&["trace", "constant", "24", "-o", &d("24mbps.trace")]);
    let schemes = "quic quic_newreno";
    pantheon(&[
        "run",
        "sim",
        "--schemes",
        schemes,
        "--runtime",
        "5",
        "--uplink-trace",
        &d("24mbps.trace"),
        "--downlink-trace",
        &d("24mbps.trace"),
        "--prepend-mm-cmds",
        "mm-delay 30",
        "--extra-mm-link-args",
        "--uplink-queue=droptail --uplink-queue-args=packets=60 --uplink-cross-traffic=8",
        "--data-dir",
        &d("target"),
    ]);
    let calibrate = |out: &str, extra: &[&str]| {
        let target = d("target");
        let out = d(out);
        let mut args = vec![
            "calibrate",
            &target,
            "--simulate",
            "--schemes",
            schemes,
            "--runtime",
            "5",
            "--delivery",
            "constant",
            "--max-evals",
            "50",
            "--initial-evals",
            "10",
            "--cross-traffic",
            "0,12",
            "--delay-ms",
            "26,32",
            "--loss",
            "0,0.01",
            "--seed",
            "1",
            "--out",
            &out,
        ];
        args.extend_from_slice(extra);
        let text = pantheon(&args);
        let summary = read_json(&Path::new(&out).join("calibration.json"));
        let best = &summary["outcome"]["best"];
        let error = summary["outcome"]["error_pct"].as_f64().unwrap();
        let rate = best["rate_mbps"].as_f64().unwrap();
        let cross = best["cross_mbps"].as_f64().unwrap_or(0.0);
        (error, rate, cross, text)
    };
    let (error, rate, cross, out) = calibrate("known-rate", &["--rate-mbps", "23.9,24.1"]);
    assert!(error <= 5.0, "replication error {error} %:\n{out}");
    assert!(
        (cross - 8.0).abs() <= 1.0,
        "cross traffic {cross} Mbit/s at rate {rate}, hidden 8:\n{out}"
    );
    assert!(
        out.contains("cross traffic"),
        "the best emulator says it has cross traffic:\n{out}"
    );
    let (error, rate, cross, out) = calibrate("free", &[]);
    assert!(error <= 5.0, "replication error {error} %:\n{out}");
    assert!(
        (rate - cross - 16.0).abs() <= 1.6,
        "{rate} Mbit/s with {cross} Mbit/s of cross traffic leaves {}, hidden 16:\n{out}",
        rate - cross
    );
}

/// End hosts as a searched parameter (`--host-buffers LOW,HIGH`): a Cubic flow over 100 Mbit/s
/// with 40 ms each way and a deep queue, held by hidden end hosts whose TCP buffers stop at
/// 512 KiB (≈ 30 Mbit/s: the flow neither loses nor queues). With the network's four parameters
/// bounded near the hidden ones, the search finds the buffer. Measured by hand: 537 KiB at
/// 4.1 % (seed 1), 528 KiB at 1.4 % (seed 2); before suggestions already measured were
/// replaced, the same search measured one candidate five times and stopped at 585 KiB, 9.9 %.
#[test]
fn calibration_recovers_hidden_end_host_buffers() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).display().to_string();
    pantheon(&["trace", "constant", "100", "-o", &d("100mbps.trace")]);
    pantheon(&[
        "run",
        "local",
        "--schemes",
        "cubic",
        "--runtime",
        "5",
        "--uplink-trace",
        &d("100mbps.trace"),
        "--downlink-trace",
        &d("100mbps.trace"),
        "--prepend-mm-cmds",
        "pt-host both tcp_rmem=4096,87380,524288 tcp_wmem=4096,16384,524288 mm-delay 40",
        "--extra-mm-link-args",
        "--uplink-queue=droptail --uplink-queue-args=packets=500",
        "--data-dir",
        &d("target"),
    ]);
    let out = pantheon(&[
        "calibrate",
        &d("target"),
        "--schemes",
        "cubic",
        "--runtime",
        "5",
        "--delivery",
        "constant",
        "--max-evals",
        "8",
        "--initial-evals",
        "4",
        "--confirm",
        "1",
        "--rate-mbps",
        "99,101",
        "--delay-ms",
        "39,41",
        "--queue-packets",
        "480,520",
        "--loss",
        "0,0.0001",
        "--host-buffers",
        "131072,16777216",
        "--out",
        &d("cal"),
    ]);
    let summary = read_json(&dir.path().join("cal/calibration.json"));
    let error = summary["outcome"]["error_pct"].as_f64().unwrap();
    let bytes = summary["outcome"]["best"]["host_buffer_bytes"]
        .as_u64()
        .unwrap();
    assert!(error <= 10.0, "replication error {error} %:\n{out}");
    assert!(
        (512 << 10) * 2 / 3 <= bytes && bytes <= (512 << 10) * 3 / 2,
        "host buffers {bytes} bytes, hidden 524288:\n{out}"
    );
    let preset = read_json(&dir.path().join("cal/emulator.json"));
    assert!(
        preset["prepend"]
            .as_str()
            .unwrap()
            .starts_with(&format!("pt-host both tcp_rmem=4096,87380,{bytes}")),
        "{preset}"
    );
}
