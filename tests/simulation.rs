//! Simulated time end to end (issue 30): `pantheon run sim` gives byte-identical logs from one
//! seed, logs that differ with another seed only where the path draws at random, results the
//! analysis reads as a real run's; unsimulatable schemes, workloads and shells are refused before
//! anything runs; `pantheon calibrate --simulate` recovers a hidden emulator from simulated
//! results; a sweep runs simulated. No root needed (CI runs it as root all the same).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod common;
use common::{
    captured_as_logged, pantheon, pantheon_status, read_json, refused_before_anything_runs, temp,
};

/// A constant `mbps` trace in `dir`; its path.
fn trace(dir: &Path, mbps: u32) -> String {
    let t = dir.join(format!("{mbps}mbps.trace"));
    pantheon(&[
        "trace",
        "constant",
        &mbps.to_string(),
        "-o",
        t.to_str().unwrap(),
    ]);
    t.to_str().unwrap().to_owned()
}

/// `pantheon run sim` of `schemes` over `mbps` both ways, the shells `prepend`, `seed`, 4 s,
/// into `dir/name`.
fn sim(dir: &Path, name: &str, schemes: &str, mbps: u32, prepend: &str, seed: u64) -> PathBuf {
    sim_with(dir, name, schemes, (mbps, prepend), seed, &[])
}

/// [`sim`] with the further flags `extra`.
fn sim_with(
    dir: &Path,
    name: &str,
    schemes: &str,
    (mbps, prepend): (u32, &str),
    seed: u64,
    extra: &[&str],
) -> PathBuf {
    let t = trace(dir, mbps);
    let data = dir.join(name);
    let seed = seed.to_string();
    let mut args = vec![
        "run",
        "sim",
        "--schemes",
        schemes,
        "--uplink-trace",
        &t,
        "--downlink-trace",
        &t,
        "--prepend-mm-cmds",
        prepend,
        "--runtime",
        "4",
        "--seed",
        &seed,
        "--data-dir",
        data.to_str().unwrap(),
    ];
    args.extend(extra);
    pantheon(&args);
    data
}

/// The packet logs of a results directory, by file name: the tunnel `.ptlog`s whole, the
/// mm-link logs without their `#` header lines (which name the file's own path).
fn logs(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.ends_with(".ptlog") || n.contains("_mm_")
        })
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let mut bytes = std::fs::read(&p).unwrap();
            if name.contains("_mm_") {
                let text = String::from_utf8(bytes).expect("mm-link logs are text");
                bytes = text
                    .lines()
                    .filter(|l| !l.starts_with('#'))
                    .collect::<Vec<_>>()
                    .join("\n")
                    .into_bytes();
            }
            (name, bytes)
        })
        .collect()
}

#[test]
fn a_seed_gives_the_same_logs_byte_for_byte_and_another_changes_only_the_draws() {
    let dir = temp("sim-det");
    let lossy = "mm-delay 10 mm-loss uplink 0.01";
    let a = sim(&dir.0, "a", "quic quic_bbr", 12, lossy, 3);
    let b = sim(&dir.0, "b", "quic quic_bbr", 12, lossy, 3);
    let (la, lb) = (logs(&a), logs(&b));
    // 2 schemes × (4 tunnel logs + 2 mm-link logs).
    assert_eq!(la.len(), 12, "{:?}", la.keys());
    for (name, bytes) in &la {
        assert!(bytes.len() > 100, "{name} is empty");
        assert!(
            lb[name] == *bytes,
            "{name} differs between two runs of seed 3"
        );
    }
    let c = sim(&dir.0, "c", "quic quic_bbr", 12, lossy, 4);
    let lc = logs(&c);
    let data = "quic_datalink_run1_flow1.ingress.ptlog";
    assert!(
        la[data] != lc[data],
        "seed 4 lost the same packets as seed 3"
    );
    // Without random loss the seed changes nothing.
    let fixed = "mm-delay 10";
    let (d, e) = (
        logs(&sim(&dir.0, "d", "quic", 12, fixed, 3)),
        logs(&sim(&dir.0, "e", "quic", 12, fixed, 4)),
    );
    assert!(
        d == e,
        "a seed changed the logs of a path without randomness"
    );

    // The results are a real run's to the analysis: metrics, report, the metadata saying
    // simulated; the run record says what the simulation cost.
    let perf = read_json(&a.join("pantheon_perf.json"));
    let tput = perf["quic"]["1"]["all"]["tput"].as_f64().unwrap();
    let delay = perf["quic"]["1"]["all"]["delay"].as_f64().unwrap();
    // Cubic at 1 % loss and a 20 ms RTT: the Mathis bound, 1436 B × 8 / 20 ms × 1.22 / √0.01
    // ≈ 7.0 Mbit/s, below the 12 Mbit/s link.
    assert!(
        tput > 4.0 && tput <= 12.0,
        "quic over 12 Mbit/s with 1 % loss: {tput}"
    );
    assert!(
        delay >= 10.0,
        "p95 one-way delay below the path's 10 ms: {delay}"
    );
    assert_eq!(
        read_json(&a.join("pantheon_metadata.json"))["simulated"],
        true
    );
    assert!(a.join("pantheon_report.html").exists());
    let runs = std::fs::read_to_string(a.join("pantheon_runs.json")).unwrap();
    assert!(runs.contains("real time"), "{runs}");
}

#[test]
fn what_cannot_be_simulated_is_refused_before_anything_runs() {
    let dir = temp("sim-refuse");
    let t = trace(&dir.0, 12);
    let data = dir.0.join("data");
    let path = ["--uplink-trace", &t, "--downlink-trace", &t];
    let with = |extra: &[&'static str]| -> Vec<&str> {
        let mut v: Vec<&str> = path.to_vec();
        v.extend(extra);
        v
    };
    refused_before_anything_runs(
        "sim",
        &data,
        &[
            (
                with(&["--schemes", "quic cubic"]),
                "cubic cannot run in simulated time: kernel TCP",
            ),
            (
                with(&["--schemes", "quic_bbr2"]),
                "quiche reads the operating system's clock",
            ),
            (
                with(&["--schemes", "tquic_copa"]),
                "tquic reads the operating system's clock",
            ),
            (
                // Pantheon's name with no era: the seed reports' era's Copa, genericCC.
                with(&["--schemes", "copa"]),
                "copa_orig cannot run in simulated time",
            ),
            (
                with(&["--mix", "quic bbr@2"]),
                "bbr cannot run in simulated time",
            ),
            (
                with(&["--schemes", "quic", "--workload", "bytes=100000"]),
                "simulated runs are full throttle only",
            ),
            (
                with(&["--schemes", "quic", "--prepend-mm-cmds", "mm-meter"]),
                "mm-meter",
            ),
            (
                with(&["--schemes", "quic", "--host-latency", "fast"]),
                "expected ideal, measured or MIN+MEAN",
            ),
            (
                with(&["--schemes", "quic", "--capture", "--snaplen", "0"]),
                "--snaplen 0: the bytes kept of each packet must be 1 to 65535",
            ),
            (
                // Pantheon's Copa of 2019 (genericCC d0153f8 with δ 0.5) has no descriptor here.
                with(&["--schemes", "copa", "--pantheon-era", "2019-01-01"]),
                "Pantheon's `copa` as it ran on 2019-01-01: no scheme here reproduces it",
            ),
            (
                // The seed era's Copa is Pantheon's genericCC, which reads the system clock.
                with(&["--schemes", "copa", "--pantheon-era", "2017-08-30"]),
                "copa_orig cannot run in simulated time",
            ),
        ],
    );
}

/// Issue 54: `--capture` in simulated time writes what a real run's does: beside each tunnel
/// log a pcapng of the same packets (by UID, in order), each cut at the snap length and starting
/// with its inner IPv4 header.
#[test]
fn a_simulated_run_captures_what_its_tunnel_logs_record() {
    let dir = temp("sim-capture");
    let capture = ["--capture", "--snaplen", "60"];
    let data = sim_with(&dir.0, "data", "quic", (12, "mm-delay 10"), 1, &capture);
    for log in ["datalink", "acklink"] {
        for kind in ["egress", "ingress"] {
            let at = |ext: &str| data.join(format!("quic_{log}_run1_flow1.{kind}.{ext}"));
            let uids = captured_as_logged(&at("ptlog"), &at("pcapng"), 60);
            assert!(!uids.is_empty(), "{log} {kind}");
        }
    }
}

#[test]
fn measured_host_latency_makes_runs_differ_over_a_fixed_path_and_is_recorded() {
    let dir = temp("sim-host");
    let t = trace(&dir.0, 12);
    let run = |name: &str, seed: &str| -> PathBuf {
        let data = dir.0.join(name);
        pantheon(&[
            "run",
            "sim",
            "--schemes",
            "quic",
            "--uplink-trace",
            &t,
            "--downlink-trace",
            &t,
            "--prepend-mm-cmds",
            "mm-delay 10",
            "--runtime",
            "3",
            "--run-times",
            "2",
            "--seed",
            seed,
            "--host-latency",
            "measured",
            "--data-dir",
            data.to_str().unwrap(),
        ]);
        data
    };
    let (a, b) = (run("a", "1"), run("b", "2"));
    let (la, lb) = (logs(&a), logs(&b));
    // What the sender sends when (its packets leave a full queue on the trace's grid alike).
    let data = |n: u32| format!("quic_datalink_run{n}_flow1.egress.ptlog");
    // The hosts' draws follow the run's number: run 2 differs from run 1 over a path without
    // randomness, and another seed changes nothing there.
    assert!(
        la[&data(1)] != la[&data(2)],
        "two runs drew the same host latencies"
    );
    assert!(
        la == lb,
        "a seed changed the logs of a path without randomness"
    );
    let meta = read_json(&a.join("pantheon_metadata.json"));
    assert_eq!(meta["host_latency"], "measured");
    // One-way delays are no longer whole milliseconds of the path: the uplink's packets are
    // sent 45 µs or more after the ACK that let them go.
    let perf = read_json(&a.join("pantheon_perf.json"));
    let delay = perf["quic"]["1"]["all"]["delay"].as_f64().unwrap();
    assert!(delay >= 10.0, "p95 one-way delay {delay} ms");
}

#[test]
fn calibration_in_simulated_time_recovers_a_hidden_emulator() {
    let dir = temp("sim-calib");
    let d = |n: &str| dir.0.join(n).display().to_string();
    // The hidden emulator: 24 Mbit/s, 30 ms one way, a 60-packet uplink DropTail.
    let t = trace(&dir.0, 24);
    pantheon(&[
        "run",
        "sim",
        "--schemes",
        "quic quic_bbr",
        "--uplink-trace",
        &t,
        "--downlink-trace",
        &t,
        "--prepend-mm-cmds",
        "mm-delay 30",
        "--extra-mm-link-args",
        "--uplink-queue=droptail --uplink-queue-args=packets=60",
        "--runtime",
        "8",
        "--seed",
        "5",
        "--data-dir",
        &d("target"),
    ]);
    // A calibration of a non-simulatable scheme is refused before it starts.
    let (code, out) = pantheon_status(&[
        "calibrate",
        &d("target"),
        "--simulate",
        "--schemes",
        "quic cubic",
        "--out",
        &d("refused"),
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("cubic cannot run in simulated time"), "{out}");
    assert!(!Path::new(&d("refused")).exists());

    let out = pantheon(&[
        "calibrate",
        &d("target"),
        "--simulate",
        "--runtime",
        "8",
        "--max-evals",
        "14",
        "--initial-evals",
        "6",
        "--confirm",
        "1",
        "--delivery",
        "constant",
        "--jobs",
        "2",
        "--out",
        &d("calibration"),
    ]);
    let result = read_json(&dir.0.join("calibration").join("calibration.json"));
    let o = &result["outcome"];
    let error = o["error_pct"].as_f64().unwrap();
    assert!(error <= 5.0, "replication error {error} %:\n{out}");
    let best = &o["best"];
    let rate = best["rate_mbps"].as_f64().unwrap();
    let delay = best["delay_ms"].as_u64().unwrap();
    assert!((18.0..=30.0).contains(&rate), "rate {rate}:\n{out}");
    assert!((25..=35).contains(&delay), "delay {delay}:\n{out}");
}

#[test]
fn a_sweep_runs_in_simulated_time() {
    let dir = temp("sim-sweep");
    let file = dir.0.join("s.toml");
    std::fs::write(
        &file,
        "name = \"simsweep\"\nruntime = 3\nruns = 3\nsimulate = true\n[environments]\nrate_mbps \
         = [12, 24]\nrtt_ms = [20]\nbuffer_bdp = [1]\n[mixes]\nlist = [\"quic quic_bbr\"]\nsolo = \
         false\n",
    )
    .unwrap();
    let out = dir.0.join("out");
    pantheon(&[
        "sweep",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--jobs",
        "2",
    ]);
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    // Two environments × one mix of two flows × three runs.
    assert_eq!(csv.lines().count(), 1 + 12, "{csv}");
    // Issue 54: sweep_means.csv gives each (environment, flow) its mean over the three runs
    // with the ends of its 95 % interval (Student's t for throughput), as computed here from
    // sweep.csv's rows.
    let means = std::fs::read_to_string(out.join("sweep_means.csv")).unwrap();
    assert_eq!(means.lines().count(), 1 + 4, "{means}");
    let (rows, mean_rows) = (csv_rows(&csv), csv_rows(&means));
    for m in &mean_rows {
        let tputs: Vec<f64> = rows
            .iter()
            .filter(|r| r["env"] == m["env"] && r["flow"] == m["flow"])
            .map(|r| r["tput_mbps"].parse().unwrap())
            .collect();
        assert_eq!((m["runs"].as_str(), tputs.len()), ("3", 3), "{means}");
        let mean = tputs.iter().sum::<f64>() / 3.0;
        let sd = (tputs.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
        let half = 4.302_652_7 * sd / 3f64.sqrt(); // Student's t, 0.975, 2 degrees of freedom
        let got = |c: &str| m[c].parse::<f64>().unwrap();
        assert!((got("tput_mbps") - mean).abs() < 1e-6, "{means}");
        assert!(
            (got("tput_mbps_ci95_low") - (mean - half)).abs() < 1e-6,
            "{means}"
        );
        assert!(
            (got("tput_mbps_ci95_high") - (mean + half)).abs() < 1e-6,
            "{means}"
        );
    }
    let summary = std::fs::read_to_string(out.join("sweep_summary.md")).unwrap();
    assert!(
        summary.contains("## Means over the runs of each point"),
        "{summary}"
    );
    let point = out.join("points").join("p0001").join("results");
    assert_eq!(
        read_json(&point.join("pantheon_metadata.json"))["simulated"],
        true
    );
    // Refused: a simulated sweep of a scheme that cannot be simulated.
    std::fs::write(
        &file,
        "name = \"bad\"\nsimulate = true\n[environments]\nrate_mbps = [12]\nrtt_ms = \
         [20]\nbuffer_bdp = [1]\n[mixes]\nlist = [\"cubic\"]\n",
    )
    .unwrap();
    let (code, text) = pantheon_status(&[
        "sweep",
        file.to_str().unwrap(),
        "--out",
        &format!("{}/bad", dir.0.display()),
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("cubic cannot run in simulated time"),
        "{text}"
    );
}

/// The rows of a CSV file without quoted fields, each a map from column to cell.
fn csv_rows(csv: &str) -> Vec<std::collections::HashMap<String, String>> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            let cells = l.split(',').map(str::to_owned);
            header.iter().map(|h| h.to_string()).zip(cells).collect()
        })
        .collect()
}

/// `pantheon analyze --stats-only` (issue 53) writes the figures — each run's stats log,
/// `pantheon_perf.json`, the summary — and no plot or report; the figures are the full
/// analysis's.
#[test]
fn stats_only_analysis_writes_the_figures_and_no_plot() {
    let dir = temp("stats-only");
    let data = sim(&dir.0, "data", "quic", 12, "mm-delay 10", 1);
    let perf = std::fs::read(data.join("pantheon_perf.json")).unwrap();
    let drawn = |d: &Path| {
        std::fs::read_dir(d)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| {
                [".png", ".pdf", ".html", ".svg"]
                    .iter()
                    .any(|x| n.ends_with(x))
            })
            .collect::<Vec<_>>()
    };
    assert!(!drawn(&data).is_empty(), "the run's own analysis draws");
    for f in drawn(&data) {
        std::fs::remove_file(data.join(f)).unwrap();
    }
    for f in [
        "pantheon_perf.json",
        "pantheon_summary.md",
        "quic_stats_run1.log",
    ] {
        std::fs::remove_file(data.join(f)).unwrap();
    }
    let out = pantheon(&["analyze", "--stats-only", data.to_str().unwrap()]);
    assert!(out.contains("| quic |"), "{out}");
    assert!(data.join("quic_stats_run1.log").is_file());
    assert!(data.join("pantheon_summary.md").is_file());
    assert_eq!(
        std::fs::read(data.join("pantheon_perf.json")).unwrap(),
        perf
    );
    assert_eq!(drawn(&data), Vec::<String>::new());
}
