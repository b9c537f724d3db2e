//! Pantheon's archived results are readable: a results directory laid out as Pantheon's
//! (`pantheon_metadata.json`, merged `<cc>_datalink_run<N>.log`, `<cc>_stats_run<N>.log`) is
//! analysed by `pantheon analyze`, and two such directories are compared by `pantheon compare`.
//! No root or network needed.

use std::path::Path;
use std::process::Command;

mod common;
use common::Dir;

/// A Pantheon-style results directory of `cubic`, two runs of 2 s: a 12 Mbit/s link (one
/// 1500-byte opportunity per ms), one 1500-byte packet sent per ms, each received after
/// `delay_ms`, every tenth lost.
fn archive(tag: &str, delay_ms: [f64; 2]) -> Dir {
    let dir = std::env::temp_dir().join(format!("pantheon-archive-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("pantheon_metadata.json"),
        r#"{"cc_schemes": ["cubic"], "downlink_trace": "12mbps.trace", "flows": 1,
            "interval": 0, "mode": "local", "run_times": 2, "runtime": 2,
            "uplink_trace": "12mbps.trace", "start_run_id": 1}"#,
    )
    .unwrap();
    for (run, delay) in [(1, delay_ms[0]), (2, delay_ms[1])] {
        let mut log = String::from("# init timestamp: 1500000000000.000\n");
        let mut events: Vec<(f64, String)> = Vec::new();
        for ms in 0..=2100 {
            events.push((ms as f64, format!("{ms}.000 # 1500")));
        }
        for i in 0..2000 {
            let t = i as f64;
            events.push((t + 0.5, format!("{:.3} + 1536 1", t + 0.5)));
            if i % 10 != 9 {
                let r = t + 0.5 + delay;
                events.push((r, format!("{r:.3} - 1536 {delay:.3} 1")));
            }
        }
        events.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (_, l) in events {
            log.push_str(&l);
            log.push('\n');
        }
        std::fs::write(dir.join(format!("cubic_datalink_run{run}.log")), log).unwrap();
        std::fs::write(
            dir.join(format!("cubic_stats_run{run}.log")),
            "Start at: 2017-12-01 10:00:00\nEnd at: 2017-12-01 10:00:02\n",
        )
        .unwrap();
    }
    Dir(dir)
}

fn pantheon(args: &[&str], dirs: &[&Path]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .args(args)
        .args(dirs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_pantheon_archive_is_analysed_and_compared() {
    let real = archive("real", [30.0, 32.0]);
    let emu = archive("emu", [40.0, 44.0]);
    pantheon(&["analyze"], &[&real.0]);
    let stats = std::fs::read_to_string(real.0.join("cubic_stats_run1.log")).unwrap();
    // Pantheon's stats block, with the capacity from the merged log's `#` lines: 2101
    // opportunities of 12 000 bit over 2100 ms (Pantheon's formula) = 12.006 Mbit/s.
    assert!(
        stats.starts_with("Start at: 2017-12-01 10:00:00\n"),
        "{stats}"
    );
    assert!(
        stats.contains("Average capacity: 12.01 Mbit/s\n"),
        "{stats}"
    );
    // 1800 packets × 1536 B from the first departure (30.5 ms) to the last (1998.5 + 30).
    let tput = 1800.0 * 1536.0 * 8.0 / (1000.0 * (1998.5 + 30.0 - 30.5));
    assert!(
        stats.contains(&format!("Average throughput: {tput:.2} Mbit/s")),
        "{tput:.2}: {stats}"
    );
    assert!(
        stats.contains("95th percentile per-packet one-way delay: 30.000 ms"),
        "{stats}"
    );
    assert!(stats.contains("Loss rate: 10.00%"), "{stats}");

    // Pantheon's per-run plots.
    for f in [
        "cubic_datalink_throughput_run1.png",
        "cubic_datalink_delay_run2.png",
    ] {
        let png = std::fs::read(real.0.join(f)).unwrap();
        assert_eq!(&png[1..4], b"PNG", "{f}");
    }

    // The report: Pantheon's sections in one file, the run's plots inside it.
    let html = std::fs::read_to_string(real.0.join("pantheon_report.html")).unwrap();
    for want in [
        "Tested in mahimahi: mm-link 12mbps.trace 12mbps.trace",
        "Repeated the test of 1 congestion control scheme twice.",
        "Each test lasted for 2 seconds running 1 flow.",
        "Run 2: Statistics of TCP Cubic",
        "Average capacity: 12.01 Mbit/s",
        "data:image/png;base64,",
        // Pantheon recorded no versions: the analysis says whose it gives.
        "the run recorded no version",
    ] {
        assert!(html.contains(want), "{want}");
    }

    let pdf = std::fs::read(real.0.join("pantheon_report.pdf")).unwrap();
    assert!(pdf.starts_with(b"%PDF-"));
    // Title, summary, table, and per run (2) its statistics and its plots.
    let pages = pdf.windows(11).filter(|w| *w == b"/Type/Page/").count();
    assert_eq!(pages, 7);

    let json = pantheon(&["compare", "--json"], &[&real.0, &emu.0]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let delay = rows
        .iter()
        .find(|r| r["metric"].as_str().unwrap().starts_with("95th"))
        .unwrap();
    assert_eq!(delay["runs"], serde_json::json!([2, 2]));
    assert_eq!(delay["mean"], serde_json::json!([31.0, 42.0]));
    // Replication error: throughput equal (same packets) → 0 %; delay medians 31 vs 42 →
    // 35.48 %; overall 17.74 %.
    let e = &v["replication_error"];
    assert!(e["throughput_pct"].as_f64().unwrap().abs() < 0.01, "{e}");
    assert!(
        (e["delay_pct"].as_f64().unwrap() - 11.0 / 31.0 * 100.0).abs() < 1e-6,
        "{e}"
    );
    let text = pantheon(&["compare"], &[&real.0, &emu.0]);
    // A remote run that asked for NTP but has no offsets in its stats log is flagged.
    let meta = std::fs::read_to_string(emu.0.join("pantheon_metadata.json")).unwrap();
    std::fs::write(
        emu.0.join("pantheon_metadata.json"),
        meta.replace(
            "\"mode\": \"local\"",
            "\"mode\": \"remote\", \"ntp_addr\": \"pool.ntp.org\", \
             \"scheme_versions\": {\"cubic\": \"iperf 2.0.5-on-the-node-that-ran-it\"}",
        ),
    )
    .unwrap();
    pantheon(&["analyze"], &[&emu.0]);
    // Analysed here, the report gives the versions recorded by the machine that ran the runs.
    let html = std::fs::read_to_string(emu.0.join("pantheon_report.html")).unwrap();
    assert!(html.contains("iperf 2.0.5-on-the-node-that-ran-it"));
    assert!(!html.contains("the run recorded no version"));
    let stats = std::fs::read_to_string(emu.0.join("cubic_stats_run1.log")).unwrap();
    assert!(
        stats.contains("# Warning: NTP was requested but no clock offset was recorded"),
        "{stats}"
    );
    assert!(!stats.contains("Local clock offset"));
    assert!(
        text.contains("Replication error of 2 as an emulation of 1"),
        "{text}"
    );
    assert!(text.contains("+35.5%"), "{text}");
}
