//! Never lose a result, second round (issue 49): names that would escape the results directory,
//! two commands on one directory, durations that overflow, runs that lie about their time,
//! appended runs of another length, moved directories. (A killed, unreaped run's leftovers:
//! `tests/local_experiment.rs`.) Needs root, iproute2 and iperf3 for the real-time runs (CI
//! installs them).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;
use common::{iperf3_pids, pantheon_status, read_json, refused_before_anything_runs, temp, text};

/// Real-time experiments run one at a time: two at once would share the two CPUs.
static SERIAL: Mutex<()> = Mutex::new(());

const TRACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../traces/10mbps.trace");

/// Every file under `dir` (relative name → bytes).
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let name = p.strip_prefix(dir).unwrap().display().to_string();
                files.insert(name, std::fs::read(&p).unwrap());
            }
        }
    }
    files
}

/// `pantheon run local` of cubic over 10 Mbit/s both ways for `runtime` s into `data`, with
/// `args`, as a child whose output is captured.
fn run_local(data: &Path, runtime: &str, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pantheon"));
    c.args(["run", "local", "--schemes", "cubic", "--runtime", runtime])
        .args(["--uplink-trace", TRACE, "--downlink-trace", TRACE])
        .arg("--data-dir")
        .arg(data)
        .args(args);
    c
}

#[test]
fn a_test_name_that_leaves_the_results_directory_is_refused_and_nothing_changes() {
    let root = temp("names");
    // A finished run of another experiment, beside the one about to start.
    let other = root.0.join("other");
    std::fs::create_dir_all(&other).unwrap();
    for (f, body) in [
        ("pantheon_metadata.json", "{\"cc_schemes\": [\"cubic\"]}\n"),
        ("cubic_stats_run1.log", "Start at: then\n"),
        ("cubic_datalink_run1_flow1.egress.ptlog", "logs"),
    ] {
        std::fs::write(other.join(f), body).unwrap();
    }
    let before = snapshot(&other);
    let data = root.0.join("x");
    for (name, rule) in [
        ("../other/cubic", "path separator"),
        ("../escaped", "path separator"),
        ("sub/dir", "path separator"),
        ("..", "starts with `.`"),
    ] {
        let config = root.0.join("exp.yml");
        std::fs::write(
            &config,
            format!("test-name: \"{name}\"\nflows: [{{scheme: cubic}}]\n"),
        )
        .unwrap();
        let (code, out) = pantheon_status(&[
            "run",
            "local",
            "-c",
            config.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{name}: {out}");
        assert!(
            out.contains("exp.yml: test-name") && out.contains(rule),
            "{name}: {out}"
        );
        assert!(!data.exists(), "{name}: created {}", data.display());
        assert_eq!(snapshot(&other), before, "{name} changed results/other");
    }
    assert!(!root.0.join("escaped").exists());
    assert!(!root.0.join("cubic_stats_run1.log").exists());
}

#[test]
fn durations_that_would_overflow_are_refused_before_anything_is_created() {
    let root = temp("durations");
    let data = root.0.join("d");
    refused_before_anything_runs(
        "local",
        &data,
        &[
            (
                vec!["--schemes", "cubic", "--drain-timeout", "1e19"],
                "--drain-timeout is 10000000000000000000 s, longer than the longest supported, \
                 86400 s (a day)",
            ),
            (
                vec!["--schemes", "cubic", "--first-side-setup", "1e19"],
                "--first-side-setup is 10000000000000000000 s, longer than the longest \
                 supported, 3600 s (an hour)",
            ),
            (
                vec!["--schemes", "cubic", "--runtime", "inf"],
                "--runtime must be a non-negative number of seconds, got inf",
            ),
            (
                vec![
                    "--schemes",
                    "cubic",
                    "--start-run-id",
                    "4294967295",
                    "--run-times",
                    "2",
                ],
                "the last run's id would exceed the largest run id",
            ),
            (
                vec![
                    "--schemes",
                    "cubic",
                    "--workload",
                    "bytes=18446744073709551616",
                ],
                "larger than the largest size supported",
            ),
        ],
    );
}

#[test]
fn two_runs_into_one_new_directory_one_runs_the_other_is_refused_naming_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let root = temp("lock");
    let data = root.0.join("shared");
    let start = |c: &mut Command| {
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = start(&mut run_local(&data, "3", &[]));
    let b = start(&mut run_local(&data, "3", &[]));
    let (pa, pb) = (a.id(), b.id());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let (ok, refused, winner) = match (a.status.code(), b.status.code()) {
        (Some(0), Some(2)) => (a, b, pa),
        (Some(2), Some(0)) => (b, a, pb),
        other => panic!(
            "expected one run and one refusal, got {other:?}:\n{}\n{}",
            text(&a),
            text(&b)
        ),
    };
    let said = text(&refused);
    assert!(
        said.contains(&format!("is being written by pid {winner} (")) && said.contains("run local"),
        "{said}"
    );
    assert!(said.contains("--wait-lock"), "{said}");
    // The kept run is whole: recorded ok, analysed, valid.
    assert!(text(&ok).contains("cubic run 1: done"), "{}", text(&ok));
    let runs = read_json(&data.join("pantheon_runs.json"));
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs[0]["status"], "ok");
    let perf = read_json(&data.join("pantheon_perf.json"));
    assert!(
        perf["cubic"]["1"]["all"]["tput"].as_f64().unwrap() > 5.0,
        "{perf}"
    );
    assert!(perf["cubic"]["1"].get("valid").is_none(), "{perf}");
    // Waiting for the lock instead: a third run, appended once the directory is free, is kept.
    let blocker = start(&mut run_local(&data, "3", &["--append"]));
    std::thread::sleep(Duration::from_millis(1500));
    let waiter = run_local(&data, "2", &["--append", "--wait-lock"])
        .output()
        .unwrap();
    let blocker = blocker.wait_with_output().unwrap();
    assert_eq!(blocker.status.code(), Some(0), "{}", text(&blocker));
    assert_eq!(waiter.status.code(), Some(0), "{}", text(&waiter));
    assert!(
        text(&waiter).contains("waiting for it to end"),
        "{}",
        text(&waiter)
    );
    let runs = read_json(&data.join("pantheon_runs.json"));
    assert_eq!(runs.as_array().unwrap().len(), 3, "{runs}");
}

#[test]
fn a_run_stopped_longer_than_its_runtime_is_flagged_and_out_of_the_means() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let root = temp("sigstop");
    let data = root.0.join("d");
    let before = iperf3_pids();
    let mut child = run_local(&data, "3", &["--run-times", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Run 1 under way (both sides of cubic running): stop the harness for 5 s, then go on.
    let deadline = Instant::now() + Duration::from_secs(30);
    while iperf3_pids().iter().filter(|p| !before.contains(p)).count() < 2 {
        assert!(Instant::now() < deadline, "run 1 did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !data.join("pantheon_runs.json").exists(),
        "run 1 ended already"
    );
    let signal = |sig| {
        // SAFETY: plain syscall on our own, still running child.
        unsafe { libc::kill(child.id() as i32, sig) };
    };
    signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(5));
    signal(libc::SIGCONT);
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the run did not end");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{status:?}");
    let runs = read_json(&data.join("pantheon_runs.json"));
    // 3 s planned, about 5 s of it stopped.
    assert!(runs[0]["wall_s"].as_f64().unwrap() > 5.0, "{runs}");
    assert!(runs[0]["stalled_s"].as_f64().unwrap() > 4.0, "{runs}");
    assert!(runs[1]["stalled_s"].as_f64().unwrap() < 1.0, "{runs}");
    let perf = read_json(&data.join("pantheon_perf.json"));
    assert_eq!(perf["cubic"]["1"]["valid"], false, "{perf}");
    let flags = perf["cubic"]["1"]["flags"].to_string();
    assert!(flags.contains("the harness did not run for"), "{flags}");
    // Run 2 kept its time and is the only one in the means.
    assert!(perf["cubic"]["2"].get("valid").is_none(), "{perf}");
    let summary = std::fs::read_to_string(data.join("pantheon_summary.md")).unwrap();
    assert!(summary.contains("| 1/2 |"), "{summary}");
    assert!(summary.contains("INVALID"), "{summary}");
    assert!(summary.contains("did not run for"), "{summary}");
}

#[test]
fn appended_runs_of_another_length_and_copied_directories_are_kept_and_judged() {
    let root = temp("append");
    let data = root.0.join("first");
    let sim = |data: &Path, runtime: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            "sim",
            "--schemes",
            "quic",
            "--runtime",
            runtime,
            "--data-dir",
            data.to_str().unwrap(),
        ];
        args.extend(extra);
        let (code, out) = pantheon_status(&args);
        assert_eq!(code, 0, "{out}");
    };
    sim(&data, "6", &[]);
    // Appended with a shorter runtime: kept, and judged against its own (not "short").
    sim(&data, "2", &["--append"]);
    let meta = read_json(&data.join("pantheon_metadata.json"));
    let runtimes: Vec<f64> = meta["invocations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["runtime"].as_f64().unwrap())
        .collect();
    assert_eq!(runtimes, [6.0, 2.0], "{meta}");
    let summary = std::fs::read_to_string(data.join("pantheon_summary.md")).unwrap();
    assert!(summary.contains("| 2/2 |"), "{summary}");
    assert!(
        summary.contains("2 run(s) of 6 s and 2 s per scheme"),
        "{summary}"
    );
    assert!(!summary.contains("short run"), "{summary}");
    // A copy (its default trace inside it, its metadata naming it relative) takes an append.
    let copy = root.0.join("copy");
    let st = Command::new("cp")
        .arg("-a")
        .arg(&data)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(st.success());
    let before = snapshot(&data);
    sim(&copy, "2", &["--append"]);
    let perf = read_json(&copy.join("pantheon_perf.json"));
    assert!(
        perf["quic"]["3"]["all"]["tput"].as_f64().unwrap() > 5.0,
        "{perf}"
    );
    assert_eq!(snapshot(&data), before, "the original changed");
    // Another path is still refused, by value.
    let t = root.0.join("other.trace");
    std::fs::write(&t, "1\n2\n").unwrap();
    let (code, out) = pantheon_status(&[
        "run",
        "sim",
        "--schemes",
        "quic",
        "--runtime",
        "2",
        "--append",
        "--uplink-trace",
        t.to_str().unwrap(),
        "--data-dir",
        copy.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("holds runs over `mm-link 12mbps.trace 12mbps.trace`"),
        "{out}"
    );
}

#[test]
fn special_files_are_refused_as_traces_by_type() {
    let root = temp("special");
    let fifo = root.0.join("fifo.trace");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let data = root.0.join("d");
    refused_before_anything_runs(
        "sim",
        &data,
        &[
            (
                vec![
                    "--schemes",
                    "quic",
                    "--uplink-trace",
                    fifo.to_str().unwrap(),
                ],
                "is a FIFO, not a regular file: a trace must be a file",
            ),
            (
                vec!["--schemes", "quic", "--uplink-trace", "/dev/zero"],
                "/dev/zero: is a character device, not a regular file",
            ),
        ],
    );
}
