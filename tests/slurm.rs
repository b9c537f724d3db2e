//! On a real one-node Slurm cluster (issue 33): a sweep as a job array, two points at a
//! time; one array task cancelled with `scancel` mid-run and the same command resubmitting
//! that point only; a point whose scheme the node does not know failing alone with its error
//! kept; a calibration whose two evaluations, and a training whose rollouts, are job steps
//! inside `sbatch --wait`.
//!
//! The cluster is Debian's `slurmctld`, `slurmd`, `slurm-client` and `munge` (CI installs
//! them), configured in a directory of this test's own (`SLURM_CONF`), with a munge daemon on
//! a private socket with a key of its own: no systemd, no cgroups (`proctrack/linuxproc`, `task/none`), no
//! accounting. The daemons are this test's children, stopped by process id on every exit path
//! (the cluster's `Drop`), after its jobs are cancelled and have left the queue. Needs root
//! (the points create network namespaces) and iperf3.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::{read_json, stop_child, text};

const PANTHEON: &str = env!("CARGO_BIN_EXE_pantheon");

/// One cluster at a time (each test brings up its own).
static ONE_CLUSTER: Mutex<()> = Mutex::new(());

/// A one-node Slurm cluster in a directory of its own.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    /// munged, slurmctld, slurmd: stopped in reverse order.
    daemons: Vec<(&'static str, Child)>,
}

fn id_of(what: &str, name: &str) -> u32 {
    let out = Command::new("id").arg(what).arg(name).output().unwrap();
    assert!(out.status.success(), "no user {name}: is munge installed?");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned()
}

fn wait_for(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Cluster {
    /// Brings the cluster up: munged, slurmctld, slurmd; returns once the node is idle. The
    /// node says it has 4 CPUs (2 per point: two points at a time on any machine).
    fn start(tag: &str) -> Cluster {
        let dir = std::env::temp_dir().join(format!("pantheon-slurm-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["", "munge", "state", "spool", "log", "work"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
            // munged wants every directory up to its socket searchable by all.
            std::fs::set_permissions(dir.join(sub), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        let (uid, gid) = (id_of("-u", "munge"), id_of("-g", "munge"));
        std::os::unix::fs::chown(dir.join("munge"), Some(uid), Some(gid)).unwrap();
        let host = hostname();
        // Ports of this test process's own, two apart.
        let port = 20000 + (std::process::id() % 10000) * 2;
        let d = dir.display();
        let conf = dir.join("slurm.conf");
        std::fs::write(
            &conf,
            format!(
                "ClusterName=pantheon\nSlurmctldHost={host}(127.0.0.1)\nSlurmUser=root\n\
                 SlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\n\
                 AuthInfo=socket={d}/munge/munge.socket\n\
                 ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
                 JobAcctGatherType=jobacct_gather/none\n\
                 AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\n\
                 SchedulerType=sched/backfill\nSelectType=select/cons_tres\n\
                 SelectTypeParameters=CR_CPU\nMpiDefault=none\nReturnToService=2\n\
                 SlurmdParameters=config_overrides\n\
                 StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
                 SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
                 SlurmctldLogFile={d}/log/slurmctld.log\nSlurmdLogFile={d}/log/slurmd.log\n\
                 SlurmctldPort={port}\nSlurmdPort={}\n\
                 NodeName={host} NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN\n\
                 PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP\n",
                port + 1
            ),
        )
        .unwrap();
        let mut c = Cluster {
            dir: dir.clone(),
            conf,
            daemons: Vec::new(),
        };
        let log = |name: &str| std::fs::File::create(dir.join("log").join(name)).unwrap();
        let m = dir.join("munge");
        // A key of this cluster's own, made as the munge user (who must own it).
        let key = m.join("munge.key");
        let o = Command::new("/usr/sbin/mungekey")
            .arg("--create")
            .arg(format!("--keyfile={}", key.display()))
            .uid(uid)
            .gid(gid)
            .output()
            .expect("run mungekey (is munge installed?)");
        assert!(o.status.success(), "mungekey: {}", text(&o));
        let mut munged = Command::new("/usr/sbin/munged");
        munged
            .arg("--foreground")
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--socket={}", m.join("munge.socket").display()))
            .arg(format!("--log-file={}", m.join("munged.log").display()))
            .arg(format!("--pid-file={}", m.join("munged.pid").display()))
            .arg(format!("--seed-file={}", m.join("munged.seed").display()))
            .uid(uid)
            .gid(gid);
        c.spawn("munged", munged, log("munged.out"));
        wait_for("munged's socket", 20, || m.join("munge.socket").exists());
        let ctld = c.cmd("slurmctld");
        c.spawn_daemon("slurmctld", ctld, log("slurmctld.out"));
        let slurmd = c.cmd("slurmd");
        c.spawn_daemon("slurmd", slurmd, log("slurmd.out"));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = c.cmd("sinfo").args(["-h", "-o", "%T"]).output().unwrap();
            if String::from_utf8_lossy(&out.stdout).trim() == "idle" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the node did not come up: {}\n{}",
                text(&out),
                std::fs::read_to_string(dir.join("log/slurmctld.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        c
    }

    fn spawn_daemon(&mut self, name: &'static str, mut cmd: Command, log: std::fs::File) {
        cmd.arg("-D");
        self.spawn(name, cmd, log);
    }

    fn spawn(&mut self, name: &'static str, mut cmd: Command, log: std::fs::File) {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e} (is Slurm installed?)"));
        self.daemons.push((name, child));
    }

    /// A command talking to this cluster (`SLURM_CONF`), outside any allocation.
    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf)
            .env_remove("SLURM_JOB_ID")
            .current_dir(self.dir.join("work"));
        c
    }

    fn pantheon(&self) -> Command {
        self.cmd(PANTHEON)
    }

    /// `id state name` of every job element in the queue.
    fn queue(&self) -> Vec<String> {
        let out = self
            .cmd("squeue")
            .args(["-h", "-r", "-o", "%i %T %j"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn work(&self) -> PathBuf {
        self.dir.join("work")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Our jobs first (their points tear their namespaces down on SIGTERM), then the
        // daemons, by process id.
        let jobs: Vec<String> = self
            .queue()
            .iter()
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect();
        if !jobs.is_empty() {
            let _ = self.cmd("scancel").args(&jobs).status();
            let deadline = Instant::now() + Duration::from_secs(90);
            while !self.queue().is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(500));
            }
        }
        while let Some((_, mut child)) = self.daemons.pop() {
            stop_child(&mut child);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Namespaces named like ours (`pt-<pid>-…`).
fn our_namespaces() -> BTreeSet<String> {
    netns::list_named()
        .into_iter()
        .filter(|n| n.starts_with("pt-"))
        .collect()
}

/// Processes whose command line names `path` (a sweep's points, a calibration's steps).
fn processes_naming(path: &Path) -> Vec<String> {
    let want = path.display().to_string();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&want) && !cmdline.contains("cargo") {
            found.push(format!("{}: {cmdline}", e.file_name().to_string_lossy()));
        }
    }
    found
}

/// `pantheon ARGS` outside an allocation: refused, saying how to get one, `never` not
/// written.
fn refused_outside_an_allocation(cluster: &Cluster, args: &str, never: &Path) {
    let o = cluster
        .pantheon()
        .args(args.split_whitespace())
        .output()
        .unwrap();
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("sbatch -n 4 -c 1") && t.contains("salloc"),
        "{t}"
    );
    assert!(!never.exists(), "{} written", never.display());
}

/// `sbatch --wait -n 2 -c 1 --wrap "pantheon ARGS"` (two tasks, one CPU each): must succeed;
/// returns what the job printed (`work/NAME.log`).
fn sbatch_wait(cluster: &Cluster, name: &str, args: &str) -> String {
    let work = cluster.work();
    let o = cluster
        .cmd("sbatch")
        .args(["--wait", "-n", "2", "-c", "1"])
        .arg(format!("--job-name=pantheon-{name}"))
        .arg(format!(
            "--output={}",
            work.join(format!("{name}.log")).display()
        ))
        .arg(format!("--wrap={PANTHEON} {args}"))
        .output()
        .unwrap();
    let log = std::fs::read_to_string(work.join(format!("{name}.log"))).unwrap_or_default();
    assert!(o.status.success(), "{}\n{log}", text(&o));
    log
}

/// No job in the queue, no namespace of ours beyond `before`, no process naming `work`.
fn nothing_left(cluster: &Cluster, before: &BTreeSet<String>, work: &Path) {
    let jobs = cluster.queue();
    assert!(jobs.is_empty(), "jobs left: {jobs:?}");
    let left: Vec<String> = our_namespaces().difference(before).cloned().collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
    let procs = processes_naming(work);
    assert!(procs.is_empty(), "processes left: {procs:?}");
}

fn sweep_file(dir: &Path, name: &str, env: &str, mixes: &str, runs: u32) -> PathBuf {
    let f = dir.join(format!("{name}.toml"));
    std::fs::write(
        &f,
        format!("name = \"{name}\"\nruntime = 5\nruns = {runs}\n[environments]\n{env}\n[mixes]\nlist = {mixes}\n"),
    )
    .unwrap();
    f
}

fn record(out: &Path, id: u32) -> Option<Value> {
    let p = out.join(format!("points/p{id:04}/point.json"));
    p.exists().then(|| read_json(&p))
}

fn slurm_id(rec: &Value, key: &str) -> String {
    rec["slurm"][key]
        .as_str()
        .unwrap_or_else(|| panic!("no slurm.{key} in {rec}"))
        .to_owned()
}

fn finished(child: Child) -> (i32, String) {
    let o: Output = child.wait_with_output().unwrap();
    (o.status.code().unwrap_or(-1), text(&o))
}

/// Most points running at once, from their records' start and wall times.
fn most_at_once(recs: &[Value]) -> usize {
    let spans: Vec<(f64, f64)> = recs
        .iter()
        .map(|r| {
            let s = r["started_unix_s"].as_f64().unwrap();
            (s, s + r["wall_s"].as_f64().unwrap())
        })
        .collect();
    spans
        .iter()
        .map(|(s, _)| spans.iter().filter(|(a, b)| a <= s && s < b).count())
        .max()
        .unwrap_or(0)
}

#[test]
fn a_sweep_runs_as_a_job_array_resumes_what_was_cancelled_and_keeps_a_failure() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let before = our_namespaces();
    let cluster = Cluster::start("sweep");
    let work = cluster.work();
    let grid = "rate_mbps = [10, 20]\nrtt_ms = [20]";
    let file = sweep_file(&work, "array", grid, "[\"cubic\"]", 2);
    let sweep = |out: &Path, extra: &[&str]| {
        let mut c = cluster.pantheon();
        c.arg("sweep")
            .arg(&file)
            .arg("--out")
            .arg(out)
            .args(["--executor", "slurm", "--jobs", "2", "--time", "5"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };

    // 1. Four points of 5 s, two at a time, all in one job array.
    let a = work.join("a");
    let (code, out) = finished(sweep(&a, &[]).spawn().unwrap());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("--array=1-4%2"), "{out}");
    let recs: Vec<Value> = (1..=4).map(|i| record(&a, i).expect("a record")).collect();
    let arrays: BTreeSet<String> = recs
        .iter()
        .map(|r| slurm_id(r, "slurm_array_job_id"))
        .collect();
    let tasks: BTreeSet<String> = recs
        .iter()
        .map(|r| slurm_id(r, "slurm_array_task_id"))
        .collect();
    assert_eq!(arrays.len(), 1, "one job array: {arrays:?}");
    assert_eq!(tasks, ["1", "2", "3", "4"].map(String::from).into());
    assert!(recs.iter().all(|r| r["status"] == "ok"), "{recs:?}");
    assert_eq!(most_at_once(&recs), 2, "two at a time: {recs:?}");

    // 2. The same sweep elsewhere; one running task cancelled with scancel mid-run.
    let b = work.join("b");
    let child = sweep(&b, &[]).spawn().unwrap();
    let mut cancelled = None;
    let mut seen: std::collections::HashMap<String, Instant> = Default::default();
    wait_for("a point running for 2.5 s", 120, || {
        for l in cluster.queue() {
            if l.contains(" RUNNING pantheon-sweep-array") {
                let id = l.split_whitespace().next().unwrap().to_owned();
                let since = *seen.entry(id.clone()).or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_millis(2500) {
                    let task: u32 = id.split_once('_').unwrap().1.parse().unwrap();
                    cancelled = Some((id, task));
                    return true;
                }
            }
        }
        false
    });
    let (job_task, task) = cancelled.unwrap();
    let o = cluster.cmd("scancel").arg(&job_task).output().unwrap();
    assert!(o.status.success(), "scancel {job_task}: {}", text(&o));
    let (code, out) = finished(child);
    assert_eq!(code, 1, "a point is missing:\n{out}");
    assert!(out.contains("1 point(s) ended without a record"), "{out}");
    assert!(
        record(&b, task).is_none(),
        "the cancelled point placed nothing"
    );
    let kept: Vec<(u32, String)> = (1..=4)
        .filter(|&i| i != task)
        .map(|i| {
            let p = b.join(format!("points/p{i:04}/point.json"));
            (
                i,
                std::fs::read_to_string(p).expect("the other points are done"),
            )
        })
        .collect();
    // Again: only the cancelled point is submitted; the others are not run again.
    let (code, out) = finished(sweep(&b, &[]).spawn().unwrap());
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("(1 task(s), --array={task}%2)")),
        "only point {task} resubmitted:\n{out}"
    );
    for (i, text) in &kept {
        let now = std::fs::read_to_string(b.join(format!("points/p{i:04}/point.json"))).unwrap();
        assert_eq!(&now, text, "point {i} ran again");
    }
    let csv = std::fs::read_to_string(b.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4, "the table is complete:\n{csv}");
    let rec = record(&b, task).unwrap();
    assert_ne!(
        slurm_id(&rec, "slurm_array_job_id"),
        job_task.split('_').next().unwrap()
    );

    // 3. A point whose scheme the node does not have: the descriptor is there when the sweep
    // is checked and submitted (held), gone when the tasks run.
    let schemes = work.join("schemes");
    std::fs::create_dir_all(&schemes).unwrap();
    let cubic = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemes/cubic.toml"),
    )
    .unwrap();
    let ghost = schemes.join("ghost.toml");
    std::fs::write(
        &ghost,
        cubic.replace("name = \"cubic\"", "name = \"ghost\""),
    )
    .unwrap();
    let file = sweep_file(
        &work,
        "ghost",
        "rate_mbps = [10]\nrtt_ms = [20]",
        "[\"cubic\", \"ghost\"]",
        1,
    );
    let c = work.join("c");
    let child = cluster
        .pantheon()
        .arg("sweep")
        .arg(&file)
        .arg("--out")
        .arg(&c)
        .arg("--schemes-dir")
        .arg(&schemes)
        .args(["--executor", "slurm", "--sbatch-arg=--hold"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut job = String::new();
    wait_for("the held job", 60, || {
        let q = cluster.queue();
        match q.iter().find(|l| l.contains("pantheon-sweep-ghost")) {
            Some(l) => {
                job = l.split('_').next().unwrap().to_owned();
                true
            }
            None => false,
        }
    });
    std::fs::remove_file(&ghost).unwrap();
    let o = cluster
        .cmd("scontrol")
        .args(["release", &job])
        .output()
        .unwrap();
    assert!(o.status.success(), "scontrol release {job}: {}", text(&o));
    let (code, out) = finished(child);
    assert_eq!(code, 1, "a point failed:\n{out}");
    assert_eq!(record(&c, 1).unwrap()["status"], "ok");
    let failed = record(&c, 2).unwrap();
    assert_eq!(failed["status"], "failed");
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.contains("ghost"),
        "the error names the scheme: {error}"
    );
    assert!(out.contains("point 2 failed"), "{out}");
    let o = cluster
        .pantheon()
        .arg("sweep")
        .arg("status")
        .arg(&c)
        .output()
        .unwrap();
    let status = text(&o);
    assert!(
        status.contains("1/2 points done, 1 failed") && status.contains("p0002 failed"),
        "{status}"
    );

    // Nothing left behind.
    nothing_left(&cluster, &before, &work);
}

#[test]
fn a_calibration_runs_its_evaluations_as_job_steps() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let before = our_namespaces();
    let cluster = Cluster::start("calibrate");
    let work = cluster.work();
    let target = work.join("target.csv");
    std::fs::write(&target, "scheme,tput_mbps,delay_ms\ncubic,8,40\n").unwrap();
    let out = work.join("cal");
    let args = format!(
        "calibrate {} --executor slurm --schemes cubic --runtime 5 --max-evals 2 \
         --initial-evals 2 --confirm 0 --delivery constant --rate-mbps 5,12 --delay-ms 10,20 \
         --queue-packets 20,80 --loss 0,0.01 --keep-runs --out {}",
        target.display(),
        out.display()
    );

    // Outside an allocation: refused, saying how to get one.
    refused_outside_an_allocation(&cluster, &args, &out.join("search.log"));
    // Inside `sbatch --wait`: two evaluations at a time, each a job step.
    let log = sbatch_wait(&cluster, "calibrate", &args);
    let search = std::fs::read_to_string(out.join("search.log")).unwrap();
    assert_eq!(search.lines().count(), 2, "{search}");
    assert!(!search.contains("failed="), "{search}");
    assert!(out.join("calibration.json").exists(), "{log}");
    let steps: BTreeSet<String> = std::fs::read_dir(out.join("evals"))
        .unwrap()
        .flatten()
        .map(|e| {
            let r = read_json(&e.path().join("result.json"));
            r["slurm_step"]
                .as_str()
                .expect("ran as a job step")
                .to_owned()
        })
        .collect();
    let jobs: BTreeSet<&str> = steps.iter().map(|s| s.split('.').next().unwrap()).collect();
    assert_eq!(
        (steps.len(), jobs.len()),
        (2, 1),
        "two steps of one job: {steps:?}"
    );
    assert!(log.contains("job step"), "{log}");

    nothing_left(&cluster, &before, &work);
}

#[test]
fn a_training_iteration_runs_its_rollouts_as_job_steps() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let before = our_namespaces();
    let cluster = Cluster::start("train");
    let work = cluster.work();
    let out = work.join("model");
    let args = format!(
        "train indigo --executor slurm --emulators policer-12mbps-20ms --rollout-secs 1 \
         --iterations 2 --epochs 2 --out {}",
        out.display()
    );

    // Outside an allocation: refused, saying how to get one.
    refused_outside_an_allocation(&cluster, &args, &out.join("training.jsonl"));
    let log = sbatch_wait(&cluster, "train", &args);
    let iterations = std::fs::read_to_string(out.join("training.jsonl")).unwrap();
    assert_eq!(iterations.lines().count(), 2, "{iterations}\n{log}");
    assert!(out.join("model.safetensors").exists() && out.join("selection.json").exists());
    // Each iteration's rollout and each iteration's validation: 4 job steps of one job.
    let steps = std::fs::read_to_string(out.join("steps.log")).unwrap();
    let ids: BTreeSet<&str> = steps
        .lines()
        .map(|l| l.split_whitespace().nth(2).unwrap())
        .collect();
    assert_eq!(steps.lines().count(), 4, "{steps}");
    assert_eq!(ids.len(), 4, "distinct steps: {steps}");
    let jobs: BTreeSet<&str> = ids.iter().map(|s| s.split('.').next().unwrap()).collect();
    assert_eq!(jobs.len(), 1, "{steps}");
    assert!(
        !ids.contains("-"),
        "every rollout ran as a job step: {steps}"
    );
    nothing_left(&cluster, &before, &work);
}
