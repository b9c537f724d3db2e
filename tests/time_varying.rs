//! Time-varying paths (issue 50): a delay schedule's step shows in the one-way delays of the
//! packets sent after it, at the scheduled time on the emulator's clock, in a real run (kernel
//! Cubic through the tunnel) and in simulated time (QUIC Cubic); a malformed schedule file is
//! refused before anything runs, naming its file and line. Needs root and iperf3 (CI installs
//! them).

use std::path::Path;
use std::sync::Mutex;

mod common;
use common::{crossed_packets, pantheon, refused_before_anything_runs, temp};

/// Held by each test that runs an experiment: delays are measured, so runs do not share the
/// two cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// The uplink's one-way delay before and after the step, ms, and when the step is.
const BEFORE_MS: f64 = 10.0;
const AFTER_MS: f64 = 70.0;
const STEP_MS: u64 = 6000;

/// `(send time on the emulator's clock, one-way delay)` of every datalink packet of flow 1 that
/// crossed, ms, from the tunnel's two logs (the sender side's egress, the receiver side's
/// ingress) and the link log's init timestamp (the emulator's start, which a schedule's time 0
/// is).
fn delays_by_send_time(data: &Path, scheme: &str) -> Vec<(f64, f64)> {
    let link =
        std::fs::read_to_string(data.join(format!("{scheme}_mm_datalink_run1.log"))).unwrap();
    let init_ms: f64 = link
        .lines()
        .find_map(|l| l.strip_prefix("# init timestamp: "))
        .expect("a link log header")
        .trim()
        .parse()
        .unwrap();
    crossed_packets(data, scheme)
        .into_iter()
        .map(|(s, a)| (s - init_ms, a - s))
        .collect()
}

/// Runs `scheme` for 10 s (`mode`: `local` or `sim`) over 24 Mbit/s each way with a 20-packet
/// DropTail uplink (at most 10 ms of queue) and the uplink's delay stepping from 10 to 70 ms at
/// 6 s, and checks that the packets sent before the step took the first delay and those sent
/// after it the second.
fn delay_steps_at_its_time(mode: &str, scheme: &str) {
    let dir = temp(&format!("schedule-{mode}"));
    let trace = dir.0.join("24mbps.trace");
    let t = trace.to_str().unwrap().to_owned();
    pantheon(&["trace", "constant", "24", "-o", &t]);
    let schedule = dir.0.join("delay.txt");
    std::fs::write(
        &schedule,
        format!("# time_ms delay_ms\n0 {BEFORE_MS}\n{STEP_MS} {AFTER_MS}\n"),
    )
    .unwrap();
    let data = dir.0.join("data");
    let append = format!("pt-delay-schedule uplink {}", schedule.display());
    pantheon(&[
        "run",
        mode,
        "--schemes",
        scheme,
        "--runtime",
        "10",
        "--uplink-trace",
        &t,
        "--downlink-trace",
        &t,
        "--extra-mm-link-args",
        "--uplink-queue=droptail --uplink-queue-args=packets=20",
        "--append-mm-cmds",
        &append,
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    let delays = delays_by_send_time(&data, scheme);
    // The clocks compared are the tunnel's and the emulator's (both the machine's realtime
    // clock, the link log's to the ms): a few ms either side of the step are not judged.
    let margin = 5.0;
    let step = STEP_MS as f64;
    let before: Vec<f64> = delays
        .iter()
        .filter(|(s, _)| *s < step - margin)
        .map(|d| d.1)
        .collect();
    let after: Vec<f64> = delays
        .iter()
        .filter(|(s, _)| *s > step + margin)
        .map(|d| d.1)
        .collect();
    assert!(
        before.len() > 1000 && after.len() > 1000,
        "{mode}: {} packets before the step, {} after",
        before.len(),
        after.len()
    );
    let worst_before = before.iter().copied().fold(0.0, f64::max);
    let least_after = after.iter().copied().fold(f64::INFINITY, f64::min);
    // Before: the delay plus at most the queue's 10 ms (and the host's own moments); after: at
    // least the new delay.
    assert!(
        (BEFORE_MS - 0.5..BEFORE_MS + 15.0)
            .contains(&before.iter().copied().fold(f64::INFINITY, f64::min))
            && worst_before < BEFORE_MS + 25.0,
        "{mode}: sent before the step, delays up to {worst_before:.1} ms"
    );
    assert!(
        least_after >= AFTER_MS - 1.0,
        "{mode}: a packet sent after the step took {least_after:.1} ms"
    );
    let meta = std::fs::read_to_string(data.join("pantheon_metadata.json")).unwrap();
    assert!(meta.contains("pt-delay-schedule uplink"), "{meta}");
}

#[test]
fn a_delay_schedule_steps_at_its_time() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    delay_steps_at_its_time("local", "cubic");
}

#[test]
fn a_delay_schedule_steps_at_its_time_in_simulated_time_too() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    delay_steps_at_its_time("sim", "quic");
}

/// A malformed schedule, or a missing one, is refused before anything runs: file and line.
#[test]
fn a_malformed_schedule_names_file_and_line() {
    let dir = temp("schedule-bad");
    let bad = dir.0.join("loss.txt");
    std::fs::write(&bad, "0 0\n# then\n2000 0.5\n3000 2\n").unwrap();
    let with = format!("pt-loss-schedule downlink {}", bad.display());
    let missing = format!(
        "pt-delay-schedule uplink {}",
        dir.0.join("none.txt").display()
    );
    refused_before_anything_runs(
        "local",
        &dir.0.join("data"),
        &[
            (
                vec!["--schemes", "cubic", "--prepend-mm-cmds", &with],
                &format!("{}:4: loss rate must be in [0, 1], got 2", bad.display()),
            ),
            (
                vec!["--schemes", "cubic", "--append-mm-cmds", &missing],
                "none.txt",
            ),
        ],
    );
}
