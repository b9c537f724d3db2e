//! End-to-end `pantheon sweep` (issue 27): a sweep stopped with Ctrl-C, then killed with
//! SIGKILL, then run to the end: finished points are never run again, and neither stop leaves
//! a namespace or a process behind. Needs root and iperf3 (CI installs it).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{text, Dir};

const SWEEP: &str = r#"
name = "resume-test"
runtime = 4
[environments]
rate_mbps = [10, 20]
rtt_ms = [20]
buffer_bdp = [1]
[mixes]
primaries = ["cubic"]
contenders = ["cubic"]
"#;

fn start(file: &Path, out: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .arg("sweep")
        .arg(file)
        .arg("--out")
        .arg(out)
        .args(["--jobs", "2"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pantheon sweep")
}

/// The process ids of the points running now (their temporary directories).
fn running(out: &Path) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir(out.join("points")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".tmp")?.rsplit('.').next()?.parse().ok()
        })
        .collect()
}

/// Adds the points running now to `pids`.
fn note_running(out: &Path, pids: &mut Vec<i32>) {
    for p in running(out) {
        if !pids.contains(&p) {
            pids.push(p);
        }
    }
}

/// The records (point.json) of the points done, by id.
fn done(out: &Path) -> Vec<(u32, String)> {
    (1..=4)
        .filter_map(|id| {
            let rec = std::fs::read_to_string(out.join(format!("points/p{id:04}/point.json")));
            rec.ok().map(|r| (id, r))
        })
        .collect()
}

fn wait_for(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Waits until the points `pids` have ended, then checks none left a namespace.
fn nothing_left_by(pids: &[i32]) {
    wait_for("the stopped points to end", 60, || {
        !pids.iter().any(|&p| alive(p))
    });
    let left: Vec<String> = netns::list_named()
        .into_iter()
        .filter(|n| pids.iter().any(|p| n.starts_with(&format!("pt-{p}-"))))
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
}

#[test]
fn a_sweep_stopped_twice_resumes_without_rerunning_finished_points() {
    let dir = Dir(std::env::temp_dir().join(format!("pantheon-sweep-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(&dir.0).unwrap();
    let file = dir.0.join("resume.toml");
    std::fs::write(&file, SWEEP).unwrap();
    let out = dir.0.join("out");

    // 1. Ctrl-C (SIGINT to the sweep alone) once a point is done and another is running.
    let sweep = start(&file, &out);
    let mut pids = Vec::new();
    wait_for("a point done and one running", 90, || {
        note_running(&out, &mut pids);
        !done(&out).is_empty() && !running(&out).is_empty()
    });
    // SAFETY: a signal to our own child, by its id.
    unsafe { libc::kill(sweep.id() as i32, libc::SIGINT) };
    let o = sweep.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    assert!(
        text(&o).contains("Run the same command again to go on"),
        "{}",
        text(&o)
    );
    nothing_left_by(&pids);
    assert!(
        running(&out).is_empty(),
        "an interrupted point keeps no directory"
    );
    let first = done(&out);
    assert!(!first.is_empty() && first.len() < 4, "{first:?}");

    // 2. SIGKILL while points run: the points are told by the kernel (PR_SET_PDEATHSIG) and
    //    tear their runs down.
    let mut sweep = start(&file, &out);
    let mut pids = Vec::new();
    wait_for("a point running", 60, || {
        pids = running(&out);
        !pids.is_empty()
    });
    std::thread::sleep(Duration::from_secs(2));
    note_running(&out, &mut pids);
    sweep.kill().unwrap();
    sweep.wait().unwrap();
    nothing_left_by(&pids);
    let second = done(&out);

    // 3. Run to the end: the points done before are not run again (their records are
    //    untouched), the killed ones' leftovers are removed, every point is done.
    let sweep = start(&file, &out);
    let o = sweep.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let last = done(&out);
    assert_eq!(last.len(), 4);
    for (id, rec) in &second {
        assert_eq!(
            last.iter().find(|d| d.0 == *id).map(|d| &d.1),
            Some(rec),
            "point {id} ran again"
        );
    }
    assert!(
        running(&out).is_empty(),
        "leftovers of the killed sweep were not removed"
    );
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    // Per environment: the pair's two flows and the primary alone.
    assert_eq!(csv.lines().count(), 1 + 2 * 3, "{csv}");
    for want in [
        "10mbps-20ms-1bdp",
        "20mbps-20ms-1bdp",
        ",pair,cubic,cubic,",
        ",solo,",
    ] {
        assert!(csv.contains(want), "{want} not in {csv}");
    }
    assert!(out.join("sweep.parquet").exists() && out.join("sweep_ratio_cdf.png").exists());
    let summary = std::fs::read_to_string(out.join("sweep_summary.md")).unwrap();
    assert!(
        summary.contains("4/4 points done, 0 failed, 0 to run"),
        "{summary}"
    );
    assert!(
        summary.contains("| TCP Cubic | TCP Cubic | 2 |"),
        "{summary}"
    );
    // The status command reads the same from the directory.
    let o = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .args(["sweep", "status"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(text(&o).trim(), "4/4 points done, 0 failed, 0 to run");
}
