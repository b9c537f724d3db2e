//! Kernel schemes in a guest kernel of their own (issue 51): TCP Vegas — which this host's
//! kernel does not have — runs over an emulated path with its sender in Debian's Linux 6.1
//! under QEMU, attached to the sender's namespace, and behaves as Vegas (after slow start its
//! queue drains to a few packets, where Cubic's fills the path's unbounded queue); the run
//! records the guest; SIGKILL of the run leaves no QEMU running and `pantheon clean` removes
//! the rest; a guest flow competes with a host flow and carries a workload; a scheme whose
//! guest kernel is not prepared is refused before anything runs.
//! Needs root, iperf3, QEMU and the prepared kernel (scripts/test.sh: `pantheon schemes setup
//! vegas`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;
use common::{crossed_packets, pantheon, read_json, temp};

/// Held by each test that runs an experiment: a guest under TCG takes a core.
static SERIAL: Mutex<()> = Mutex::new(());

const TRACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../traces/10mbps.trace");

/// `pantheon run local` arguments of the main job's base path: 10 Mbit/s each way, `mm-delay
/// 28`, an unbounded queue.
fn nepal_base(runtime: &str) -> Vec<&str> {
    vec![
        "--runtime",
        runtime,
        "--uplink-trace",
        TRACE,
        "--downlink-trace",
        TRACE,
        "--prepend-mm-cmds",
        "mm-delay 28",
    ]
}

/// `(arrival time, one-way delay)` of every datalink packet of run 1, flow 1 that crossed,
/// seconds and ms, from the tunnel's two logs.
fn delays(data: &Path, scheme: &str) -> Vec<(f64, f64)> {
    crossed_packets(data, scheme)
        .into_iter()
        .map(|(s, a)| (a / 1e3, a - s))
        .collect()
}

#[test]
fn vegas_runs_in_a_guest_kernel_and_drains_its_queue_to_a_few_packets() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp("guest-vegas");
    let data = dir.0.join("data");
    let mut args = vec!["run", "local", "--schemes", "vegas", "--data-dir"];
    args.push(data.to_str().unwrap());
    args.extend(nepal_base("30"));
    pantheon(&args);

    // The run says where its sender ran.
    let runs = read_json(&data.join("pantheon_runs.json"));
    let notes = runs.to_string();
    assert!(
        notes.contains("sender of flow 1 in a guest: Linux 6.1.0-50-amd64"),
        "{notes}"
    );
    // iperf3 ran in the guest with the sender's tunnel address.
    let out = std::fs::read_to_string(data.join("vegas_run1_flow1.sender.out")).unwrap();
    assert!(
        out.contains("local 100.64.0.4") && out.contains("connected to 100.64.0.3"),
        "{out}"
    );

    // The link is full, and Vegas's queue, after slow start's overshoot drains (one packet a
    // round trip), holds its α–β = 2–4 packets: 2.4–4.8 ms at 10 Mbit/s over the path's 28 ms.
    let perf = read_json(&data.join("pantheon_perf.json"));
    let tput = perf["vegas"]["1"]["all"]["tput"].as_f64().unwrap();
    assert!(tput > 9.0, "{tput}");
    let d = delays(&data, "vegas");
    let end = d.iter().map(|p| p.0).fold(f64::MIN, f64::max);
    let mut last: Vec<f64> = d.iter().filter(|p| p.0 > end - 5.0).map(|p| p.1).collect();
    last.sort_by(f64::total_cmp);
    let (median, p95) = (last[last.len() / 2], last[last.len() * 95 / 100]);
    let delivered_mbps = last.len() as f64 * 1464.0 * 8.0 / 5.0 / 1e6;
    eprintln!(
        "vegas in its guest: {tput:.2} Mbit/s; last 5 s: {} packets ({delivered_mbps:.2} Mbit/s \
         of full-size packets), median one-way delay {median:.1} ms, p95 {p95:.1} ms",
        last.len()
    );
    assert!(delivered_mbps > 8.5, "{delivered_mbps}");
    assert!(median > 28.0 && median < 28.0 + 10.0, "{median}");
    assert!(p95 < 28.0 + 15.0, "{p95}");
    // And the overshoot was there: slow start filled the queue far beyond that first.
    let peak = d.iter().map(|p| p.1).fold(0.0, f64::max);
    assert!(peak > 80.0, "{peak}");
}

/// The competition and workload machinery with a guest scheme (issue 51): `--mix "cubic
/// lp@3(bytes=1000000)"` — host Cubic from the start, one 1 MB transfer of TCP-LP from a guest
/// at 3 s — gives both flows their figures, the guest flow its completion time, and starts it
/// on time (its boot is before the run; the command's start inside the guest is what lags).
#[test]
fn a_guest_flow_competes_and_carries_a_workload() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp("guest-mix");
    let data = dir.0.join("data");
    let mut args = vec![
        "run",
        "local",
        "--mix",
        "cubic lp@3(bytes=1000000)",
        "--data-dir",
    ];
    args.push(data.to_str().unwrap());
    args.extend(nepal_base("15"));
    pantheon(&args);

    let notes = read_json(&data.join("pantheon_runs.json")).to_string();
    assert!(
        notes.contains("sender of flow 2 in a guest: Linux 6.1.0-50-amd64"),
        "{notes}"
    );
    // The guest finished closing its connection before it powered off: the tunnel's last
    // packet of the flow is its data, not the namespace's "host unreachable" to a receiver
    // whose FIN no one acknowledged ("the receiver's FCT and the tunnel's disagree").
    assert!(!notes.contains("disagree"), "{notes}");
    let perf = read_json(&data.join("pantheon_perf.json"));
    let run = &perf["cubic-lp"]["1"];
    let (cubic, lp) = (&run["1"], &run["2"]);
    assert_eq!(
        (&cubic["scheme"], &lp["scheme"]),
        (&"cubic".into(), &"lp".into())
    );
    assert!(cubic["tput"].as_f64().unwrap() > 3.0, "{cubic}");
    assert!(lp["tput"].as_f64().unwrap() > 0.1, "{lp}");
    // Its first packet: after the asked 3 s, within a second of it (iperf3's and
    // pantheon-tcp's start under TCG, 0.4 s measured here).
    let start = lp["measured_start"].as_f64().unwrap();
    assert!((3.0..4.0).contains(&start), "{lp}");
    // Its transfer completed, after at least the megabyte's time at the link's whole rate.
    let fct = lp["fct_ms"].as_array().map(|f| f.len());
    assert_eq!(fct, Some(1), "{lp}");
    assert!(lp["fct_ms"][0].as_f64().unwrap() > 800.0, "{lp}");
}

#[test]
fn sigkill_of_a_run_leaves_no_guest_running_and_clean_removes_the_rest() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp("guest-kill");
    let data = dir.0.join("data");
    let mut child = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .args(["run", "local", "--schemes", "vegas", "--data-dir"])
        .arg(&data)
        .args(nepal_base("60"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let prefix = format!("pt-{}-", child.id());
    let qemus = || -> Vec<u32> {
        netns::list_named()
            .into_iter()
            .filter(|n| n.starts_with(&prefix))
            .flat_map(|n| netns::pids_of(&n))
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim().starts_with("qemu-system"))
            })
            .collect()
    };
    // The guest up and the run going: the sender's iperf3 has connected.
    let out = data.join("vegas_run1_flow1.sender.out");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !std::fs::read_to_string(&out).is_ok_and(|o| o.contains("connected to"))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    let running = qemus();
    assert_eq!(running.len(), 1, "no guest running: {running:?}");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // QEMU dies with its owner (a parent-death signal), without `pantheon clean`.
    let gone = |pid: &u32| {
        netns::owner::state(*pid).is_none_or(|s| s == 'Z')
            || !std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.starts_with("qemu-system"))
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !running.iter().all(gone) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        running.iter().all(gone),
        "QEMU {running:?} outlived its run"
    );
    // What is left (namespaces, the guests' job directory) `pantheon clean` removes, saying so.
    let said = pantheon(&["clean"]);
    assert!(said.contains("guest job directory"), "{said}");
    let jobs_left: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("pantheon-guests-{}-", child.id())))
        .collect();
    assert!(jobs_left.is_empty(), "{jobs_left:?}");
    assert!(netns::list_named().iter().all(|n| !n.starts_with(&prefix)));
}

#[test]
fn a_guest_scheme_whose_kernel_is_not_prepared_fails_its_runs_with_the_fix_and_the_others_run() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp("guest-unprepared");
    let data = dir.0.join("data");
    let out = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .args(["run", "local", "--schemes", "vegas cubic", "--data-dir"])
        .arg(&data)
        .args(nepal_base("5"))
        .env("PANTHEON_KERNELS_HOME", dir.0.join("no-kernels"))
        .output()
        .unwrap();
    let said = common::text(&out);
    // Warned before anything runs, with the fix.
    assert!(
        said.contains("vegas cannot run here (guest kernel 6.1.0-50-amd64 is not prepared")
            && said.contains("pantheon schemes setup"),
        "{said}"
    );
    let runs = read_json(&data.join("pantheon_runs.json"));
    let status = |scheme: &str| {
        runs.as_array()
            .unwrap()
            .iter()
            .find(|r| r["scheme"] == scheme)
            .map(|r| r.to_string())
            .unwrap_or_default()
    };
    assert!(
        status("vegas").contains("\"failed\"") && status("vegas").contains("not prepared"),
        "{}",
        status("vegas")
    );
    assert!(status("cubic").contains("\"ok\""), "{}", status("cubic"));
    // No QEMU was started for it.
    assert!(!data.join("vegas_run1_flow1.sender.out").exists());
}
