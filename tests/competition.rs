//! End-to-end mixed experiments (issue 27): flows of different schemes on one emulated
//! bottleneck, started at their own times. Needs root, iproute2, iperf3, our LEDBAT program
//! (`pantheon schemes setup ledbat`) and pdftotext (poppler-utils); CI installs them.

use std::path::PathBuf;
use std::process::Command;

mod common;
use common::{pantheon_status as pantheon, read_json, refused_before_anything_runs, Dir};

/// `pantheon run local ARGS…` over a 20 Mbit/s link into `dir` (made afresh); returns its
/// results directory once it ended well.
fn run_mix(dir: &Dir, args: &[&str]) -> PathBuf {
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(&dir.0).unwrap();
    let trace = dir.0.join("20mbps.trace");
    let trace = trace.to_str().unwrap();
    let (code, out) = pantheon(&["trace", "constant", "20", "-o", trace]);
    assert_eq!(code, 0, "{out}");
    let data = dir.0.join("results");
    let mut all = vec![
        "run",
        "local",
        "--uplink-trace",
        trace,
        "--downlink-trace",
        trace,
    ];
    all.extend(args);
    all.extend(["--data-dir", data.to_str().unwrap()]);
    let (code, out) = pantheon(&all);
    assert_eq!(code, 0, "{out}");
    data
}

#[test]
fn cubic_bbr_and_ledbat_join_one_bottleneck_at_0_10_and_20_s() {
    let dir = Dir(std::env::temp_dir().join(format!("pantheon-mix-{}", std::process::id())));
    // 20 Mbit/s, 40 ms RTT, a one-BDP DropTail queue (100 kB: 66 packets) each way.
    let data = run_mix(
        &dir,
        &[
            "--mix",
            "cubic bbr@10 ledbat@20",
            "--runtime",
            "30",
            "--prepend-mm-cmds",
            "mm-delay 20",
            "--extra-mm-link-args",
            "--uplink-queue=droptail --uplink-queue-args=packets=66 \
             --downlink-queue=droptail --downlink-queue-args=packets=66",
        ],
    );

    // The flows and their schemes are in the metadata; the run is filed under the mix's name.
    let meta = read_json(&data.join("pantheon_metadata.json"));
    assert_eq!(meta["cc_schemes"], serde_json::json!(["cubic-bbr-ledbat"]));
    assert_eq!(meta["flows"], 3);
    let schemes: Vec<&str> = meta["mix"]["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["scheme"].as_str().unwrap())
        .collect();
    assert_eq!(schemes, ["cubic", "bbr", "ledbat"]);

    // Each flow's scheme, start (from the logs, within 50 ms of the asked time) and metrics.
    // The measured start is the flow's first packet against flow 1's: it includes each
    // program's own start-up (exec in its namespace, its first connect), which on this 2-core
    // machine was up to 16.7 ms late in 10 runs of the mix before issue 48's changes and up to
    // 11.9 ms in 10 runs after (a 10 ms bound failed in CI once either way), and 25.3 ms once
    // in a clean-clone CI rehearsal (a 25 ms bound failed). A start mis-scheduled by the
    // harness is off by seconds (the flows are 10 s apart).
    let perf = read_json(&data.join("pantheon_perf.json"));
    let run = &perf["cubic-bbr-ledbat"]["1"];
    for (flow, scheme, start) in [
        ("1", "cubic", 0.0),
        ("2", "bbr", 10.0),
        ("3", "ledbat", 20.0),
    ] {
        let f = &run[flow];
        assert_eq!(f["scheme"], scheme, "{run}");
        assert_eq!(f["start"], start, "{run}");
        let measured = f["measured_start"].as_f64().unwrap();
        assert!(
            (measured - start).abs() < 0.050,
            "flow {flow} ({scheme}) started at {measured} s, asked {start} s"
        );
        let tput = f["tput"].as_f64().unwrap();
        assert!(tput > 0.5 && tput < 20.5, "flow {flow}: {tput} Mbit/s");
        assert!(f["delay"].as_f64().unwrap() >= 20.0, "{f}");
    }
    // Together they fill the link; Jain's index over the 10 s all three shared it.
    let total = run["all"]["tput"].as_f64().unwrap();
    assert!(total > 17.0, "total {total} Mbit/s");
    let c = &run["competition"];
    let jain = c["jain"].as_f64().unwrap();
    assert!((1.0 / 3.0..=1.0).contains(&jain), "{c}");
    let active = c["all_active"].as_array().unwrap();
    let (from, to) = (active[0].as_f64().unwrap(), active[1].as_f64().unwrap());
    assert!((20.0..21.0).contains(&from) && to > 29.0, "{c}");
    assert!(c["jain_per_s"].as_array().unwrap().len() >= 8, "{c}");
    // Per scheme: one flow each here, so each scheme's share is its flow's.
    let shares: f64 = ["cubic", "bbr", "ledbat"]
        .iter()
        .map(|s| c["per_scheme"][s]["share"].as_f64().unwrap())
        .sum();
    assert!((shares - 1.0).abs() < 1e-9, "{c}");
    assert_eq!(c["per_scheme"]["bbr"]["flows"], 1, "{c}");

    // The summary, the HTML and the PDF report have the competition table and plot.
    let md = std::fs::read_to_string(data.join("pantheon_summary.md")).unwrap();
    assert!(
        md.contains("## Competition: cubic-bbr-ledbat run 1"),
        "{md}"
    );
    assert!(md.contains("| 3 | LEDBAT |"), "{md}");
    assert!(
        md.contains("Per scheme while all were active: TCP Cubic (1 flow)"),
        "{md}"
    );
    assert!(data.join("cubic-bbr-ledbat_competition_run1.png").is_file());
    let html = std::fs::read_to_string(data.join("pantheon_report.html")).unwrap();
    assert!(
        html.contains("Run 1: Competition"),
        "no competition section"
    );
    assert!(html.contains("<td>TCP BBR</td><td>10.0</td>"), "no bbr row");
    assert!(html.contains("alt=\"per-flow throughput and delay over time\" src=\"data:image/png"));
    let text = Command::new("pdftotext")
        .arg(data.join("pantheon_report.pdf"))
        .arg("-")
        .output()
        .expect("pdftotext (poppler-utils)");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("Run 1: Competition"), "{text}");
    assert!(text.contains("Jain"), "{text}");
}

#[test]
fn a_flow_given_extra_delay_has_it_in_its_one_way_delay_alone() {
    let dir = Dir(std::env::temp_dir().join(format!("pantheon-mix-delay-{}", std::process::id())));
    let data = run_mix(
        &dir,
        &[
            "--mix",
            "cubic cubic+50",
            "--runtime",
            "6",
            "--prepend-mm-cmds",
            "mm-delay 10",
        ],
    );
    let perf = read_json(&data.join("pantheon_perf.json"));
    let run = &perf["cubic-cubic"]["1"];
    let min = |flow: &str| run[flow]["min_delay"].as_f64().unwrap();
    // Both cross mm-delay 10; flow 2's packets wait 50 ms more before the shared queue. Its
    // least delayed packet may still have waited behind a few of flow 1's, which starts at the
    // same time (0.6 ms per 1500-byte packet at 20 Mbit/s; seen: 1.57 ms): up to 3 ms more.
    assert!((10.0..12.0).contains(&min("1")), "{run}");
    let extra = min("2") - min("1");
    assert!(
        (49.0..53.0).contains(&extra),
        "flow 2 is {extra} ms longer: {run}"
    );
    assert_eq!(run["2"]["extra_delay"], 50.0, "{run}");
    assert_eq!(run["1"]["extra_delay"], 0.0, "{run}");
}

#[test]
fn bad_mixes_and_config_files_are_refused_before_anything_runs() {
    let dir = std::env::temp_dir().join(format!("pantheon-mix-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("results");
    let yml = dir.join("exp.yml");
    std::fs::write(
        &yml,
        "test-name: t\nflows:\n  - scheme: cubic\n  - {scheme: bbr, start: soon}\n",
    )
    .unwrap();
    refused_before_anything_runs(
        "local",
        &data,
        &[
            (vec!["--mix", "cubic bbr@x"], "--mix: `bbr@x`: START"),
            (vec!["--mix", "cubic nosuch@5"], "nosuch"),
            (
                vec!["--mix", "cubic ledbat@20-40", "--runtime", "30"],
                "flow 2 (ledbat@20-40)",
            ),
            (vec!["--config-file", yml.to_str().unwrap()], "flows[2]"),
            (
                vec!["--mix", "cubic", "--flows", "2"],
                "cannot be used with",
            ),
            (
                vec!["--mix", "cubic ledbat", "--baseline", "/nonexistent/solo"],
                "--baseline",
            ),
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
}
