//! Ingest + metrics benchmark (`bash bench/analysis.sh`): a generated run of N packets, read
//! from our binary logs or from Pantheon's merged text log, then Pantheon's metrics; prints
//! the rate and the peak memory (VmHWM) against the logs' size.
//!
//! ```text
//! ingestbench gen DIR N       write DIR/bin (binary logs) and DIR/text (merged text log)
//! ingestbench binary DIR      read DIR/bin, compute the run's metrics, print figures
//! ingestbench text DIR        the same from DIR/text
//! ```
//! Each measurement runs in its own process so that its peak memory is its own.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use tunnel::log::{Direction, Header, Kind, LogFormat, LogWriter, Record, Role};

fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Packet i: sent at i µs, 1500 bytes (+36 outer), one-way delay 20 ms + (i mod 7) ms, every
/// 100th lost.
fn generate(dir: &Path, n: u64) -> std::io::Result<()> {
    let bin = dir.join("bin");
    let text = dir.join("text");
    std::fs::create_dir_all(&bin)?;
    std::fs::create_dir_all(&text)?;
    let header = |role, kind| Header {
        role,
        kind,
        flow: 1,
        direction: Direction::Datalink,
        base_realtime_ns: 1_795_000_000_000_000_000,
        clock_offset_ns: None,
        clock_drift_ppb: 0,
    };
    let mut egress = LogWriter::create(
        &bin.join("cubic_datalink_run1_flow1.egress.ptlog"),
        &header(Role::Client, Kind::Egress),
        &LogFormat::Binary,
    )?;
    let mut ingress = LogWriter::create(
        &bin.join("cubic_datalink_run1_flow1.ingress.ptlog"),
        &header(Role::Server, Kind::Ingress),
        &LogFormat::Binary,
    )?;
    let delay_ns = |i: u64| 20_000_000 + (i % 7) * 1_000_000;
    for i in 0..n {
        let r = |t_ns, kind| Record {
            t_ns,
            uid: i,
            size: 1536,
            flow: 1,
            kind,
            // As the tunnel writes them since log version 2.
            ecn: Some(tunnel::ecn::Codepoint::NotEct),
        };
        egress.push(&r(i * 1000, Kind::Egress))?;
        if i % 100 != 99 {
            ingress.push(&r(i * 1000 + delay_ns(i), Kind::Ingress))?;
        }
    }
    egress.flush()?;
    ingress.flush()?;
    // The merged text log: events in time order (+ at i µs, − at i µs + delay).
    let mut out = BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(text.join("cubic_datalink_run1.log"))?,
    );
    writeln!(out, "# init timestamp: 1795000000000.000")?;
    let mut pending = std::collections::VecDeque::new();
    for i in 0..n {
        let t = i * 1000;
        while let Some(&(rt, d)) = pending.front() {
            if rt > t {
                break;
            }
            writeln!(out, "{:.3} - 1536 {:.3} 1", rt as f64 / 1e6, d as f64 / 1e6)?;
            pending.pop_front();
        }
        writeln!(out, "{:.3} + 1536 1", t as f64 / 1e6)?;
        if i % 100 != 99 {
            // Delays differ, so keep the pending list in time order.
            let rt = t + delay_ns(i);
            let pos = pending
                .iter()
                .rposition(|&(x, _)| x <= rt)
                .map_or(0, |p| p + 1);
            pending.insert(pos, (rt, delay_ns(i)));
        }
    }
    for (rt, d) in pending {
        writeln!(out, "{:.3} - 1536 {:.3} 1", rt as f64 / 1e6, d as f64 / 1e6)?;
    }
    out.flush()
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn measure(dir: &Path, what: &str) -> Result<(), Box<dyn std::error::Error>> {
    let logs = dir_bytes(dir);
    let start = Instant::now();
    let frames = pantheon_analyzer::ingest::read_run(dir, "cubic", 1)?;
    let stats = pantheon_analyzer::metrics::run_stats(&frames.arrivals, &frames.departures, None)?;
    let secs = start.elapsed().as_secs_f64();
    let packets = stats.total.arrived;
    let lines = stats.total.arrived + stats.total.departed;
    let peak = peak_rss_bytes();
    println!(
        "{what:<6} packets {packets:>10}  lines {lines:>10}  {secs:>6.2} s  {:>6.2} M packets/s  \
         {:>6.2} M lines/s  logs {:>7.1} MB  peak RSS {:>7.1} MB ({:.2}× the logs)  \
         [tput {:.2} Mbit/s, p95 {:.3} ms, loss {:.4}]",
        packets as f64 / secs / 1e6,
        lines as f64 / secs / 1e6,
        logs as f64 / 1e6,
        peak as f64 / 1e6,
        peak as f64 / logs as f64,
        stats.total.tput_mbps,
        stats.total.p95_delay_ms.unwrap_or(f64::NAN),
        stats.total.loss,
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("gen") => {
            let n: u64 = args.get(3).ok_or("gen DIR N")?.parse()?;
            generate(Path::new(&args[2]), n)?;
        }
        Some("binary") => measure(
            &Path::new(args.get(2).ok_or("binary DIR")?).join("bin"),
            "binary",
        )?,
        Some("text") => measure(
            &Path::new(args.get(2).ok_or("text DIR")?).join("text"),
            "text",
        )?,
        _ => return Err("usage: ingestbench gen DIR N | binary DIR | text DIR".into()),
    }
    Ok(())
}
