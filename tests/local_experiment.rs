//! End-to-end local experiments: real kernel TCP through our tunnel over our emulator, checked
//! against the issue's acceptance figures. Needs root, iproute2 and iperf3 (CI installs them).
//! Experiments run one at a time (a lock), because two at once would share the two CPUs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

mod common;
use common::{captured_as_logged, iperf3_pids, read_json};

static SERIAL: Mutex<()> = Mutex::new(());

const TRACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../traces/10mbps.trace");

struct Experiment {
    dir: PathBuf,
    output: String,
}

impl Drop for Experiment {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Experiment {
    fn perf(&self) -> Value {
        read_json(&self.dir.join("pantheon_perf.json"))
    }
}

/// Runs `pantheon run local` for `runtime` seconds per run with `args`, expecting every run to
/// end normally (exit status 0), then asserts that nothing it created is left.
fn run(name: &str, runtime: &str, args: &[&str]) -> Experiment {
    run_expecting(name, runtime, args, 0)
}

/// [`run`], expecting exit status `code`; asserts that nothing it created is left: no
/// namespace with the run's prefix, no iperf3 process that was not there before.
fn run_expecting(name: &str, runtime: &str, args: &[&str], code: i32) -> Experiment {
    let dir = std::env::temp_dir().join(format!("pantheon-e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let before = iperf3_pids();
    let out = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .args(["run", "local", "--runtime", runtime, "--seed", "42"])
        .args(if args.contains(&"--emulator") {
            &[][..]
        } else {
            &["--uplink-trace", TRACE, "--downlink-trace", TRACE][..]
        })
        .arg("--data-dir")
        .arg(&dir)
        .args(args)
        .output()
        .expect("run pantheon");
    let output = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(code), "pantheon:\n{output}");
    let exp = Experiment { dir, output };
    assert_nothing_left(&exp.dir, &before);
    exp
}

/// Asserts that the experiment in `dir` left nothing: no namespace with its prefix, no iperf3
/// process that was not there `before`, no emulator or tunnel device.
fn assert_nothing_left(dir: &Path, before: &[u32]) {
    let meta = read_json(&dir.join("pantheon_metadata.json"));
    let prefix = meta["netns_prefix"].as_str().unwrap().to_owned();
    let left: Vec<String> = netns::list_named()
        .into_iter()
        .filter(|n| n.starts_with(&format!("{prefix}-")))
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
    let new: Vec<u32> = iperf3_pids()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert!(new.is_empty(), "iperf3 processes left behind: {new:?}");
    let links = Command::new("ip").args(["-o", "link"]).output().unwrap();
    let links = String::from_utf8_lossy(&links.stdout);
    assert!(
        !links.contains("emu0") && !links.contains(" tunnel"),
        "devices left: {links}"
    );
}

/// The `Average capacity: X Mbit/s` figure of a stats log.
fn perf_capacity(stats: &str) -> f64 {
    stats
        .lines()
        .find_map(|l| l.strip_prefix("Average capacity: "))
        .and_then(|v| v.split(' ').next()?.parse().ok())
        .expect("a capacity line")
}

fn total(exp: &Experiment, scheme: &str) -> Value {
    exp.perf()[scheme]["1"]["all"].clone()
}

#[test]
fn cubic_over_10mbps_28ms_infinite_queue() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let exp = run(
        "infinite",
        "10",
        &["--schemes", "cubic", "--prepend-mm-cmds", "mm-delay 28"],
    );
    let t = total(&exp, "cubic");
    let (tput, loss, min_delay) = (
        t["tput"].as_f64().unwrap(),
        t["loss"].as_f64().unwrap(),
        t["min_delay"].as_f64().unwrap(),
    );
    assert!(
        (9.0..=10.1).contains(&tput),
        "throughput {tput} Mbit/s\n{}",
        exp.output
    );
    assert!(
        min_delay >= 28.0,
        "a one-way delay below 28 ms: {min_delay}"
    );
    assert!(loss < 0.001, "loss {loss}");
    // The results directory has Pantheon's files.
    for f in [
        "cubic_stats_run1.log",
        "pantheon_summary.svg",
        "pantheon_summary_mean.svg",
        "pantheon_summary.md",
    ] {
        assert!(exp.dir.join(f).exists(), "{f} missing");
    }
    let stats = std::fs::read_to_string(exp.dir.join("cubic_stats_run1.log")).unwrap();
    assert!(stats.starts_with("Start at: "), "{stats}");
    // As Pantheon's local runs: the mm-link log gives the capacity (10 Mbit/s trace; Pantheon's
    // first → last opportunity formula) and the utilisation.
    assert!(
        stats.contains("-- Total of 1 flow:\nAverage capacity: 10.0"),
        "{stats}"
    );
    assert!(stats.contains("% utilization)\n"), "{stats}");
    let cap = perf_capacity(&stats);
    assert!((9.99..=10.02).contains(&cap), "capacity {cap}");
}

#[test]
fn cubic_with_droptail_50_packets() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let exp = run(
        "droptail",
        "10",
        &[
            "--schemes",
            "cubic",
            "--prepend-mm-cmds",
            "mm-delay 28",
            "--extra-mm-link-args",
            "--uplink-queue=droptail --uplink-queue-args=packets=50",
            "--capture",
            "--snaplen",
            "96",
        ],
    );
    // Issue 54, `--capture`: beside each log its pcapng, holding the same packets (by UID, in
    // order), each cut at the snap length; what the DropTail queue dropped is in the sender's
    // egress capture and not in the receiver's ingress one.
    let mut counts = Vec::new();
    for (direction, kind) in [
        ("datalink", "egress"),
        ("datalink", "ingress"),
        ("acklink", "egress"),
        ("acklink", "ingress"),
    ] {
        let stem = exp.dir.join(format!("cubic_{direction}_run1_flow1.{kind}"));
        let at = |ext: &str| PathBuf::from(format!("{}.{ext}", stem.display()));
        let uids = captured_as_logged(&at("ptlog"), &at("pcapng"), 96);
        counts.push(uids.len());
    }
    assert!(counts[0] > counts[1], "datalink egress/ingress {counts:?}");
    let t = total(&exp, "cubic");
    let (tput, delay) = (t["tput"].as_f64().unwrap(), t["delay"].as_f64().unwrap());
    assert!(tput >= 9.0, "throughput {tput}\n{}", exp.output);
    assert!(delay <= 95.0, "p95 one-way delay {delay} ms");
    // 50 packets × 1.2 ms + 28 ms: the queue really was bounded (an infinite one gives ≫ 100).
    assert!(
        delay >= 60.0,
        "p95 one-way delay {delay} ms: the queue never filled?"
    );
}

#[test]
fn cubic_with_iid_loss_both_ways() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let exp = run(
        "loss",
        "10",
        &[
            "--schemes",
            "cubic",
            "--prepend-mm-cmds",
            "mm-delay 28 mm-loss uplink 0.004 mm-loss downlink 0.004",
        ],
    );
    let loss = total(&exp, "cubic")["loss"].as_f64().unwrap();
    assert!(
        (0.002..=0.010).contains(&loss),
        "loss rate {loss}\n{}",
        exp.output
    );
}

#[test]
fn named_calibrated_emulator_with_poisson_delivery() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The paper's Nepal emulator: 0.57 Mbit/s Poisson, mm-delay 28, 4.77 % uplink loss.
    let exp = run(
        "preset",
        "10",
        &["--schemes", "cubic", "--emulator", "nepal-aws-india"],
    );
    let meta = read_json(&exp.dir.join("pantheon_metadata.json"));
    assert_eq!(meta["emulator_preset"], "nepal-aws-india");
    // What ran, recorded when it ran: iperf's version line and the kernel's Cubic.
    let version = meta["scheme_versions"]["cubic"].as_str().unwrap_or("");
    assert!(
        version.starts_with("iperf") && version.contains("kernel tcp_cubic, Linux "),
        "{meta}"
    );
    assert!(
        meta["emulator_command"]
            .as_str()
            .unwrap()
            .starts_with("mm-delay 28 mm-loss uplink 0.0477 mm-link "),
        "{meta}"
    );
    let t = total(&exp, "cubic");
    let (tput, min_delay) = (
        t["tput"].as_f64().unwrap(),
        t["min_delay"].as_f64().unwrap(),
    );
    assert!(
        tput <= 0.6,
        "throughput {tput} Mbit/s above the 0.57 Mbit/s link\n{}",
        exp.output
    );
    assert!(
        min_delay >= 28.0,
        "one-way delay {min_delay} ms below mm-delay 28"
    );
    // Opportunities in the data link's log: 0.57/12 per ms on average, with exponential gaps
    // (a constant 0.57 Mbit/s trace spaces them 21–22 ms apart, standard deviation < 1 ms).
    let log = std::fs::read_to_string(exp.dir.join("cubic_mm_datalink_run1.log")).unwrap();
    let times: Vec<f64> = log
        .lines()
        .filter(|l| l.ends_with(" # 1504"))
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
    assert!((16.0..=27.0).contains(&mean), "mean gap {mean} ms");
    assert!(sd / mean > 0.6, "gaps' sd/mean {}: not Poisson", sd / mean);
}

#[test]
fn failing_scheme_does_not_stop_the_next_one_and_notes_reach_the_summary() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/schemes");
    // A run failed: exit status 1, the failed runs named at the end.
    let exp = run_expecting(
        "failing",
        "4",
        &[
            "--schemes",
            "broken bbr",
            "--schemes-dir",
            fixtures,
            "--prepend-mm-cmds",
            "mm-delay 5",
        ],
        1,
    );
    assert!(
        exp.output.contains("1 of 2 runs failed (broken run 1)"),
        "{}",
        exp.output
    );
    let runs = read_json(&exp.dir.join("pantheon_runs.json"));
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["scheme"], "broken");
    assert_eq!(runs[0]["status"], "failed");
    let reason = runs[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("exit status: 3") && reason.contains("cannot reach"),
        "{reason}"
    );
    assert_eq!(runs[1]["scheme"], "bbr");
    assert_eq!(runs[1]["status"], "ok");
    assert!(total(&exp, "bbr")["tput"].as_f64().unwrap() > 5.0);
    let summary = std::fs::read_to_string(exp.dir.join("pantheon_summary.md")).unwrap();
    assert!(summary.contains("| broken | 1 | FAILED |"), "{summary}");
    // The runner's remarks (BBR: whether the fq qdisc could be installed) reach the summary.
    let notes = runs[1]["notes"].as_array().unwrap();
    assert!(!notes.is_empty());
    for n in notes {
        assert!(
            summary.contains(n.as_str().unwrap()),
            "{n} not in\n{summary}"
        );
    }
    assert!(
        exp.output.contains("broken run 1: FAILED"),
        "{}",
        exp.output
    );
}

#[test]
fn schemes_check_passes_a_working_scheme_and_says_why_others_fail() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("pantheon-check-schemes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Descriptors whose receiver idles and whose sender runs `sender` (a TOML array).
    let descriptor = |name: &str, sender: &str| {
        let text = format!(
            "name = \"{name}\"\nlabel = \"{name}\"\ncolor = \"red\"\nmarker = \"o\"\n\
             run_first = \"receiver\"\n[receiver]\ncommand = [\"sleep\", \"100\"]\n\
             [sender]\ncommand = {sender}\n"
        );
        std::fs::write(dir.join(format!("{name}.toml")), text).unwrap();
    };
    descriptor(
        "broken",
        r#"["sh", "-c", "echo no route to anything >&2; exit 3"]"#,
    );
    descriptor("idle", r#"["sleep", "100"]"#);
    let out = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .args([
            "schemes",
            "check",
            "cubic",
            "broken",
            "idle",
            "--runtime",
            "3",
            "--json",
        ])
        .arg("--schemes-dir")
        .arg(&dir)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["scheme"], "cubic");
    assert_eq!(v[0]["ok"], true, "{v}");
    let broken = v[1]["detail"].as_str().unwrap();
    assert_eq!(v[1]["ok"], false);
    assert!(
        broken.contains("exit status: 3") && broken.contains("no route to anything"),
        "{broken}"
    );
    // A scheme that sends nothing is caught over loopback.
    let idle = v[2]["detail"].as_str().unwrap();
    assert!(idle.contains("full-throttle"), "{idle}");
    // The working one reports both runs' figures.
    let cubic = v[0]["detail"].as_str().unwrap();
    assert!(
        cubic.starts_with("loopback ") && cubic.contains("emulated "),
        "{cubic}"
    );
    let left: Vec<String> = netns::list_named()
        .into_iter()
        .filter(|n| n.starts_with("ptc-"))
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
}

/// Every file of `dir` (name → bytes).
fn snapshot(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

#[test]
fn a_results_directory_is_refused_appended_to_or_moved_aside_never_lost() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let first = run(
        "reuse",
        "3",
        &["--schemes", "cubic", "--prepend-mm-cmds", "mm-delay 10"],
    );
    let dir = &first.dir;
    // `pantheon run local` of `scheme` over `mm-delay` `prepend` into `dir`, with `reuse`
    // (--append, --overwrite or nothing); its stderr, and whether it succeeded.
    let again = |scheme: &str, reuse: &[&str], prepend: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_pantheon"))
            .args(["run", "local", "--runtime", "3", "--seed", "42"])
            .args(["--uplink-trace", TRACE, "--downlink-trace", TRACE])
            .arg("--data-dir")
            .arg(dir)
            .args(["--schemes", scheme, "--prepend-mm-cmds", prepend])
            .args(reuse)
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.status.success(),
        )
    };
    let before = snapshot(dir);
    // Issue 54: the run's time series beside its plots, as Parquet files (docs/results.md;
    // their columns are read back in the analyzer's unit tests).
    for kind in ["throughput", "delay", "queue"] {
        let pq = &before[&format!("cubic_datalink_{kind}_run1.parquet")];
        assert!(pq.starts_with(b"PAR1") && pq.ends_with(b"PAR1"), "{kind}");
    }
    // Refused, saying each of `said`; nothing changes.
    let refused = |(err, ok): (String, bool), said: &[&str]| {
        assert!(!ok, "{err}");
        assert!(said.iter().all(|s| err.contains(s)), "{err}");
        assert_eq!(snapshot(dir), before);
    };

    // Re-used without saying how: refused, naming what is there.
    refused(
        again("bbr", &[], "mm-delay 10"),
        &["already holds results (1 run(s) of cubic", "--append"],
    );
    // Appending runs over another path is refused too.
    refused(
        again("bbr", &["--append"], "mm-delay 30"),
        &["holds runs over `mm-delay 10 mm-link"],
    );

    // Appended: bbr joins as run 2; the first experiment's data is there byte for byte (the
    // analysis' own files are made again from all the runs).
    let (err, ok) = again("bbr", &["--append"], "mm-delay 10");
    assert!(ok, "{err}");
    let after = snapshot(dir);
    let derived = |f: &str| {
        f.starts_with("pantheon_")
            || f.contains("_stats_run")
            || f.ends_with(".png")
            || f.ends_with(".parquet")
    };
    for (f, bytes) in &before {
        if !derived(f) {
            assert!(after.get(f) == Some(bytes), "{f} changed");
        }
    }
    let meta = read_json(&dir.join("pantheon_metadata.json"));
    let invocations = meta["invocations"].as_array().unwrap();
    assert_eq!(invocations.len(), 2, "{meta}");
    assert_eq!(invocations[0]["schemes"], serde_json::json!(["cubic"]));
    assert_eq!(invocations[1]["schemes"], serde_json::json!(["bbr"]));
    assert_eq!(invocations[1]["start_run_id"], 2);
    assert_eq!(meta["cc_schemes"], serde_json::json!(["bbr", "cubic"]));
    let perf = read_json(&dir.join("pantheon_perf.json"));
    assert!(
        perf["cubic"]["1"]["all"]["tput"].as_f64().unwrap() > 5.0,
        "{perf}"
    );
    assert!(
        perf["bbr"]["2"]["all"]["tput"].as_f64().unwrap() > 5.0,
        "{perf}"
    );

    // Overwritten: the earlier results move to a dated sibling, whole.
    let (err, ok) = again("cubic", &["--overwrite"], "mm-delay 10");
    assert!(ok, "{err}");
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let aside: Vec<PathBuf> = std::fs::read_dir(dir.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().is_some_and(|f| {
                f.to_string_lossy()
                    .starts_with(&format!("{name}.replaced-"))
            })
        })
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(snapshot(&aside[0]), after);
    let _ = std::fs::remove_dir_all(&aside[0]);
    let meta = read_json(&dir.join("pantheon_metadata.json"));
    assert!(meta.get("invocations").is_none(), "{meta}");
    assert_eq!(meta["cc_schemes"], serde_json::json!(["cubic"]));
}

#[test]
fn a_run_killed_with_sigkill_and_not_yet_reaped_leaves_nothing_once_pantheon_clean_has_run() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("pantheon-e2e-killed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let before = iperf3_pids();
    let new_iperf3 = || -> Vec<u32> {
        iperf3_pids()
            .into_iter()
            .filter(|p| !before.contains(p))
            .collect()
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .args(["run", "local", "--runtime", "60", "--schemes", "cubic"])
        .args([
            "--uplink-trace",
            TRACE,
            "--downlink-trace",
            TRACE,
            "--data-dir",
        ])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let prefix = format!("pt-{}-", child.id());
    let ours = || -> Vec<String> {
        netns::list_named()
            .into_iter()
            .filter(|n| n.starts_with(&prefix))
            .collect()
    };
    // Both sides of the scheme running: then SIGKILL, which the command cannot see.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while new_iperf3().len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(new_iperf3().len(), 2, "the run did not start");
    // Killed and not reaped (as a harness that kills on a timeout and waits later leaves it):
    // a zombie, whose /proc entry stays while this test, its parent, holds it.
    child.kill().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while netns::owner::state(child.id()) != Some('Z') && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(netns::owner::state(child.id()), Some('Z'));
    // What it leaves: its namespaces and the scheme's processes (reparented to init).
    let left = ours();
    assert!(!left.is_empty());
    assert_eq!(new_iperf3().len(), 2);

    // `pantheon clean` (as every command run as root does first) removes them and says so,
    // the owner a zombie still.
    let out = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .arg("clean")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.starts_with("removed "), "{said}");
    for ns in &left {
        assert!(said.contains(ns.as_str()), "{ns} not reported: {said}");
    }
    assert!(ours().is_empty(), "{:?}", ours());
    assert_eq!(
        netns::owner::state(child.id()),
        Some('Z'),
        "reaped too early"
    );
    child.wait().unwrap();
    // SIGKILL is delivered asynchronously: give the processes a moment to be gone.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !new_iperf3().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(new_iperf3().is_empty(), "{:?}", new_iperf3());
    // Nothing left: any later command (here one that only prints) has nothing to do.
    let out = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .arg("emulators")
        .output()
        .unwrap();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .arg("clean")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("nothing to clean"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tmpfs of `size` mounted at a fresh directory; unmounted and removed on drop.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(size: &str) -> SmallDisk {
        let dir = std::env::temp_dir().join(format!("pantheon-e2e-full-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(st.success(), "mount a tmpfs at {}", dir.display());
        SmallDisk(dir)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_run_on_a_full_disk_is_reported_failed_with_the_reason() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 600 kB: the metadata and trace fit, five seconds of packet and link logs do not.
    let disk = SmallDisk::mount("600k");
    let dir = disk.0.join("results");
    let before = iperf3_pids();
    let out = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .args([
            "run",
            "local",
            "--runtime",
            "5",
            "--schemes",
            "cubic",
            "--seed",
            "1",
        ])
        .args(["--uplink-trace", TRACE, "--downlink-trace", TRACE])
        .arg("--data-dir")
        .arg(&dir)
        .output()
        .expect("run pantheon");
    let output = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(out.status.code(), Some(0), "{output}");
    assert!(
        output.contains("cubic run 1: FAILED: its logs could not be written")
            && output.contains("No space left on device"),
        "{output}"
    );
    assert!(!output.contains("cubic run 1: done"), "{output}");
    // The record that could not be written left no half file beside the last whole one.
    assert!(!dir.join("pantheon_runs.json.tmp").exists());
    assert_nothing_left(&dir, &before);
}
