//! The Slurm executor (`pantheon sweep --executor slurm`): the sweep's missing points (never
//! run, interrupted or failed) submitted as one job array, each array task running
//! `pantheon sweep point DIR ID…` ([`crate::point::run_point`]) on a node of the cluster,
//! writing into the results directory (which must be on a filesystem the nodes share).
//!
//! ```text
//! <dir>/slurm/sweep-<UTC time>.sh     the batch script submitted (also: --dry-run prints it)
//! <dir>/slurm/sweep-<UTC time>.json   its job id, array and submission time
//! <dir>/slurm/sweep-<UTC time>.ids    with --pack K (or more points than the site's
//!                                     MaxArraySize): line i = the points of array task i
//! <dir>/logs/pNNNN.log                point NNNN's output (array index = point id), or
//! <dir>/logs/slurm-<job>_<task>.log   a packed task's output
//! ```
//!
//! Progress and the ETA come from the results directory (the points' records) and `squeue`
//! (what is pending or running); on Ctrl-C the job is cancelled (`scancel`: each running point
//! gets SIGTERM, tears down its namespaces and places nothing) and the command waits until
//! the job has left the queue. Running the same command again submits only what is missing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use engine::slurm::{self, shell_quote};

use crate::exec::{eta_s, hms, Progress, Status};
use crate::file::SlurmSection;
use crate::plan::SweepPlan;
use crate::point::{record, remove_unfinished};

/// CPUs per array task when neither the flag nor the sweep file says.
pub const DEFAULT_CPUS_PER_TASK: u32 = 2;

/// How the job array is submitted: the sweep file's `[slurm]` with the flags over it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SlurmOptions {
    /// `--partition`.
    pub partition: Option<String>,
    /// `--time`, per array task.
    pub time: Option<String>,
    /// `--cpus-per-task`.
    pub cpus_per_task: u32,
    /// Points per array task.
    pub pack: u32,
    /// Array tasks running at once (`--array=…%N`); `None`: as many as Slurm gives.
    pub throttle: Option<usize>,
    /// More sbatch options, one argument each.
    pub sbatch_args: Vec<String>,
}

impl SlurmOptions {
    /// The sweep file's section, each key replaced by the flag given (`flags`' `None`s and
    /// empty `sbatch_args` keep the file's).
    pub fn merged(file: &SlurmSection, flags: &SlurmSection, throttle: Option<usize>) -> Self {
        let mut sbatch_args = file.sbatch_args.clone();
        sbatch_args.extend(flags.sbatch_args.iter().cloned());
        SlurmOptions {
            partition: flags.partition.clone().or_else(|| file.partition.clone()),
            time: flags.time.clone().or_else(|| file.time.clone()),
            cpus_per_task: flags
                .cpus_per_task
                .or(file.cpus_per_task)
                .unwrap_or(DEFAULT_CPUS_PER_TASK),
            pack: flags.pack.or(file.pack).unwrap_or(1).max(1),
            throttle,
            sbatch_args,
        }
    }
}

/// What one submission is: its array indices and, when they are not the point ids, the
/// points of each index.
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    /// `sbatch --array`'s value.
    pub array: String,
    /// `None`: index = point id. `Some(tasks)`: index `i` (from 1) runs `tasks[i − 1]`, in
    /// order, one after another.
    pub tasks: Option<Vec<Vec<u32>>>,
}

impl Submission {
    /// The array for points `ids`, `pack` per task; indices are point ids when `pack` is 1 and
    /// every id is below the site's `max_array_size`, else task numbers over an id list.
    /// Errors when even so there are more tasks than the site allows, saying which `--pack`
    /// would do.
    pub fn new(
        ids: &[u32],
        pack: u32,
        throttle: Option<usize>,
        max_array_size: Option<u32>,
    ) -> anyhow::Result<Submission> {
        let limit = max_array_size.unwrap_or(u32::MAX);
        let direct = pack <= 1 && ids.iter().all(|&id| id < limit);
        if direct {
            return Ok(Submission {
                array: slurm::array_spec(ids, throttle),
                tasks: None,
            });
        }
        let tasks: Vec<Vec<u32>> = ids
            .chunks(pack.max(1) as usize)
            .map(<[u32]>::to_vec)
            .collect();
        let n = tasks.len() as u32;
        if n >= limit {
            let need = (ids.len() as u32).div_ceil(limit.saturating_sub(1).max(1));
            bail!(
                "{} points in {n} array tasks, and this site's MaxArraySize is {limit} (indices \
                 up to {}): give --pack {need} or more (points per array task)",
                ids.len(),
                limit - 1
            );
        }
        let indices: Vec<u32> = (1..=n).collect();
        Ok(Submission {
            array: slurm::array_spec(&indices, throttle),
            tasks: Some(tasks),
        })
    }
}

/// The batch script: `#SBATCH` options, then each task running its points with `exe` (the
/// `pantheon` program, at the same path on every node) in `dir` (absolute). `ids_file` holds
/// the tasks' points when `sub.tasks` is given.
pub fn script(
    plan: &SweepPlan,
    dir: &Path,
    exe: &Path,
    opts: &SlurmOptions,
    sub: &Submission,
    ids_file: &Path,
) -> String {
    let q = |p: &Path| shell_quote(&p.display().to_string());
    let logs = dir.join("logs");
    let output = match sub.tasks {
        None => logs.join("p%4a.log"),
        Some(_) => logs.join("slurm-%A_%a.log"),
    };
    let mut s = String::from("#!/bin/bash\n");
    let mut opt = |o: String| s.push_str(&format!("#SBATCH {o}\n"));
    opt(format!("--job-name=pantheon-sweep-{}", plan.file.name));
    opt(format!("--array={}", sub.array));
    opt(format!("--output={}", output.display()));
    opt("--ntasks=1".into());
    opt(format!("--cpus-per-task={}", opts.cpus_per_task));
    if let Some(p) = &opts.partition {
        opt(format!("--partition={p}"));
    }
    if let Some(t) = &opts.time {
        opt(format!("--time={t}"));
    }
    for a in &opts.sbatch_args {
        opt(a.clone());
    }
    s.push_str(&format!(
        "# Written by `pantheon sweep --executor slurm`: the points of sweep {} in\n# {}.\n\
         # A point that is done does nothing, so this script can be submitted again.\n",
        plan.file.name,
        dir.display()
    ));
    match sub.tasks {
        None => s.push_str(&format!(
            "exec {} sweep point {} \"$SLURM_ARRAY_TASK_ID\"\n",
            q(exe),
            q(dir)
        )),
        Some(_) => s.push_str(&format!(
            "ids=$(sed -n \"${{SLURM_ARRAY_TASK_ID}}p\" {})\n\
             exec {} sweep point {} $ids\n",
            q(ids_file),
            q(exe),
            q(dir)
        )),
    }
    s
}

/// Writes the batch script (and the tasks' id list) for the missing points of the sweep in
/// `dir` into `dir/slurm/`; returns the script's path, its text and the submission, or
/// `None` when nothing is missing.
pub fn prepare(
    dir: &Path,
    exe: &Path,
    opts: &SlurmOptions,
    max_array_size: Option<u32>,
) -> anyhow::Result<Option<(PathBuf, String, Submission)>> {
    let plan = SweepPlan::load(dir)?;
    let ids = Status::read(dir, &plan).to_run();
    if ids.is_empty() {
        return Ok(None);
    }
    let sub = Submission::new(&ids, opts.pack, opts.throttle, max_array_size)?;
    let sdir = dir.join("slurm");
    std::fs::create_dir_all(&sdir).with_context(|| format!("create {}", sdir.display()))?;
    std::fs::create_dir_all(dir.join("logs"))
        .with_context(|| format!("create {}", dir.join("logs").display()))?;
    let stem = format!("sweep-{}", chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ"));
    let ids_file = sdir.join(format!("{stem}.ids"));
    if let Some(tasks) = &sub.tasks {
        let text: String = tasks
            .iter()
            .map(|t| {
                let ids: Vec<String> = t.iter().map(u32::to_string).collect();
                ids.join(" ") + "\n"
            })
            .collect();
        std::fs::write(&ids_file, text).with_context(|| format!("write {}", ids_file.display()))?;
    }
    let text = script(&plan, dir, exe, opts, &sub, &ids_file);
    let path = sdir.join(format!("{stem}.sh"));
    std::fs::write(&path, &text).with_context(|| format!("write {}", path.display()))?;
    Ok(Some((path, text, sub)))
}

/// Submits the missing and failed points of the sweep in `dir` (absolute) as one job array
/// and follows it until it has left the queue (or, after `interrupted` is set, cancels it and
/// waits for that), telling `progress`; returns the status after.
pub fn run_slurm(
    dir: &Path,
    exe: &Path,
    opts: &SlurmOptions,
    interrupted: &AtomicBool,
    progress: &dyn Progress,
) -> anyhow::Result<Status> {
    let (plan, before) = crate::exec::begin(dir)?;
    let Some((script, _, sub)) = prepare(dir, exe, opts, slurm::max_array_size())? else {
        tracing::info!("{}: nothing to submit", before.line());
        return Ok(before);
    };
    let array = submit(&script, &sub, &before)?;
    progress.begin(before.ok.len(), before.total);
    let followed = follow(dir, &plan, &array, &before, interrupted, progress);
    progress.end();
    let cancelled = followed?;
    Ok(ended(dir, &plan, &array, cancelled))
}

/// A submitted job array: its job id, its points, when it was submitted.
struct Array {
    job: String,
    points: Vec<u32>,
    submitted_unix_s: f64,
    submitted: Instant,
}

/// Submits `script` (the array `sub` of the points `before` has to run) and writes its record
/// beside it (`<script>.json`: job, array, submission time, script).
fn submit(script: &Path, sub: &Submission, before: &Status) -> anyhow::Result<Array> {
    let submitted = Instant::now();
    let job = slurm::submit(script)?;
    let submitted_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let job_record = serde_json::json!({
        "job": job,
        "array": sub.array,
        "submitted_unix_s": submitted_unix_s,
        "script": script.display().to_string(),
    });
    let job_file = script.with_extension("json");
    std::fs::write(&job_file, serde_json::to_string_pretty(&job_record)?)
        .with_context(|| format!("write {}", job_file.display()))?;
    let tasks = sub.tasks.as_ref().map_or(before.to_run().len(), Vec::len);
    tracing::info!(
        "{}; submitted job array {job} ({tasks} task(s), --array={}): {}",
        before.line(),
        sub.array,
        script.display()
    );
    Ok(Array {
        job,
        points: before.to_run(),
        submitted_unix_s,
        submitted,
    })
}

/// Follows `array` until it has left the queue, cancelling it once `interrupted` is set:
/// the results directory every 2 s, the controller every 10 s (sites ask not to poll it
/// often) or as soon as every point has placed its record. Returns whether it was cancelled.
/// Errors when `squeue` failed 30 times in a row.
fn follow(
    dir: &Path,
    plan: &SweepPlan,
    array: &Array,
    before: &Status,
    interrupted: &AtomicBool,
    progress: &dyn Progress,
) -> anyhow::Result<bool> {
    let job = &array.job;
    let mut reported: BTreeSet<u32> = before.failed.iter().copied().collect();
    let mut cancelled = false;
    let mut squeue_errors = 0;
    let mut queued: Vec<slurm::Queued> = Vec::new();
    for tick in 0u64.. {
        if interrupted.load(Ordering::SeqCst) && !cancelled {
            cancelled = true;
            progress.say(&format!("interrupted: cancelling job {job} (scancel)…"));
            if let Err(e) = slurm::cancel(job) {
                progress.say(&format!("{e:#}"));
            }
        }
        let now = Status::read(dir, plan);
        let ended = array
            .points
            .iter()
            .filter(|&&id| {
                record(dir, id).is_some_and(|r| r.started_unix_s >= array.submitted_unix_s - 1.0)
            })
            .count();
        if tick % 5 == 0 || ended == array.points.len() || cancelled {
            match slurm::queue(job) {
                Ok(q) => {
                    squeue_errors = 0;
                    queued = q;
                    if queued.is_empty() {
                        break;
                    }
                }
                Err(e) => {
                    squeue_errors += 1;
                    if squeue_errors >= 30 {
                        return Err(e.context(format!(
                            "squeue failed 30 times in a row: job {job} may still be running \
                             (`squeue -j {job}`); run this command again when Slurm answers"
                        )));
                    }
                }
            }
        }
        for id in &now.failed {
            if reported.insert(*id) {
                if let Some(r) = record(dir, *id) {
                    progress.say(&format!(
                        "point {id} failed: {}",
                        r.error_line().unwrap_or("(no output)")
                    ));
                }
            }
        }
        let running = queued.iter().filter(|q| q.state == "RUNNING").count();
        let pending = queued.len() - running;
        let left = array.points.len() - ended;
        let mean = now.mean_wall_s.unwrap_or(plan.file.runtime + 15.0);
        let status = format!(
            "({} failed) job {job}: {running} running, {pending} pending · ETA {}",
            now.failed.len(),
            hms(eta_s(left, mean, running.max(1)))
        );
        progress.update(now.ok.len(), &status);
        std::thread::sleep(Duration::from_secs(2));
    }
    Ok(cancelled)
}

/// After `array` has left the queue: the unfinished points' directories removed, when its
/// first point started, which points ended without a record; the status after.
fn ended(dir: &Path, plan: &SweepPlan, array: &Array, cancelled: bool) -> Status {
    let left = remove_unfinished(dir);
    let after = Status::read(dir, plan);
    let first_start = array
        .points
        .iter()
        .filter_map(|&id| record(dir, id))
        .map(|r| r.started_unix_s)
        .filter(|&t| t >= array.submitted_unix_s - 1.0)
        .reduce(f64::min);
    if let Some(t) = first_start {
        tracing::info!(
            "job {}: the first point started {:.1} s after submission; all ended {} after",
            array.job,
            t - array.submitted_unix_s,
            hms(array.submitted.elapsed().as_secs_f64())
        );
    }
    if !after.missing.is_empty() && !cancelled {
        tracing::info!(
            "{} point(s) ended without a record (cancelled, timed out or their node failed; \
             see their logs in {}): {}{}. Run the same command again to resubmit them.",
            after.missing.len(),
            dir.join("logs").display(),
            ids_list(&after.missing),
            if left > 0 {
                format!("; {left} unfinished directory(ies) removed")
            } else {
                String::new()
            }
        );
    }
    after
}

fn ids_list(ids: &[u32]) -> String {
    let v: Vec<String> = ids.iter().map(|i| format!("p{i:04}")).collect();
    v.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::SweepFile;

    fn plan() -> SweepPlan {
        let f = SweepFile::parse(
            "name = \"t\"\n[environments]\nemulators = [\"nepal-aws-india\"]\n\
             [mixes]\nlist = [\"cubic\", \"bbr\", \"tquic_copa\", \"vegas\", \"ledbat\"]\n",
            "t.toml",
        )
        .unwrap();
        SweepPlan::new(&f)
    }

    #[test]
    fn flags_override_the_sweep_file() {
        let file = SlurmSection {
            partition: Some("batch".into()),
            time: Some("10".into()),
            sbatch_args: vec!["--qos=short".into()],
            ..SlurmSection::default()
        };
        let flags = SlurmSection {
            time: Some("0:05:00".into()),
            pack: Some(3),
            sbatch_args: vec!["--hold".into()],
            ..SlurmSection::default()
        };
        let o = SlurmOptions::merged(&file, &flags, Some(2));
        assert_eq!(o.partition.as_deref(), Some("batch"));
        assert_eq!(o.time.as_deref(), Some("0:05:00"));
        assert_eq!((o.cpus_per_task, o.pack, o.throttle), (2, 3, Some(2)));
        assert_eq!(o.sbatch_args, ["--qos=short", "--hold"]);
    }

    #[test]
    fn indices_are_point_ids_unless_packed_or_over_the_site_limit() {
        let s = Submission::new(&[2, 3, 4, 9], 1, Some(2), Some(1001)).unwrap();
        assert_eq!((s.array.as_str(), s.tasks), ("2-4,9%2", None));
        let s = Submission::new(&[2, 3, 4, 9, 10], 2, None, Some(1001)).unwrap();
        assert_eq!(s.array, "1-3");
        assert_eq!(s.tasks.unwrap(), [vec![2, 3], vec![4, 9], vec![10]]);
        // Point 1500 is past MaxArraySize 1001: a list, one point per task.
        let s = Submission::new(&[1, 1500], 1, None, Some(1001)).unwrap();
        assert_eq!((s.array.as_str(), s.tasks.unwrap().len()), ("1-2", 2));
        let ids: Vec<u32> = (1..=2500).collect();
        let err = Submission::new(&ids, 2, None, Some(1001))
            .unwrap_err()
            .to_string();
        assert!(err.contains("give --pack 3"), "{err}");
    }

    #[test]
    fn the_script_runs_each_task_s_points() {
        let plan = plan();
        let opts = SlurmOptions {
            partition: Some("debug".into()),
            time: Some("0:10:00".into()),
            cpus_per_task: 2,
            pack: 1,
            throttle: Some(2),
            sbatch_args: vec!["--qos=short".into()],
        };
        let dir = Path::new("/shared/my results");
        let exe = Path::new("/usr/local/bin/pantheon");
        let ids = dir.join("slurm/x.ids");
        let sub = Submission::new(&[1, 2, 3, 4], 1, Some(2), None).unwrap();
        let s = script(&plan, dir, exe, &opts, &sub, &ids);
        for want in [
            "#SBATCH --job-name=pantheon-sweep-t\n",
            "#SBATCH --array=1-4%2\n",
            "#SBATCH --output=/shared/my results/logs/p%4a.log\n",
            "#SBATCH --cpus-per-task=2\n#SBATCH --partition=debug\n#SBATCH --time=0:10:00\n",
            "#SBATCH --qos=short\n",
            "exec /usr/local/bin/pantheon sweep point '/shared/my results' \"$SLURM_ARRAY_TASK_ID\"\n",
        ] {
            assert!(s.contains(want), "{want:?} not in\n{s}");
        }
        let sub = Submission::new(&[1, 2, 3], 2, None, None).unwrap();
        let s = script(&plan, dir, exe, &opts, &sub, &ids);
        assert!(s.contains("logs/slurm-%A_%a.log"), "{s}");
        assert!(
            s.contains(
                "ids=$(sed -n \"${SLURM_ARRAY_TASK_ID}p\" '/shared/my results/slurm/x.ids')"
            ),
            "{s}"
        );
        assert!(s.contains("sweep point '/shared/my results' $ids\n"), "{s}");
    }

    #[test]
    fn prepare_writes_the_missing_points_only() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        plan().freeze(d).unwrap();
        crate::point::run_point_with(d, 2, |setup| {
            std::fs::create_dir_all(&setup.plan.data_dir).unwrap();
            crate::point::Outcome {
                status: 0,
                tail: String::new(),
            }
        })
        .unwrap();
        let opts = SlurmOptions {
            cpus_per_task: 2,
            pack: 2,
            ..SlurmOptions::default()
        };
        let (path, text, sub) = prepare(d, Path::new("/p"), &opts, None).unwrap().unwrap();
        assert!(
            path.starts_with(d.join("slurm")) && text == std::fs::read_to_string(&path).unwrap()
        );
        assert_eq!(sub.tasks.unwrap(), [vec![1, 3], vec![4, 5]]);
        let ids = std::fs::read_to_string(path.with_extension("ids")).unwrap();
        assert_eq!(ids, "1 3\n4 5\n");
    }
}
