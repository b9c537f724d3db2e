//! One point, whatever runs it (the local executor, later a Slurm job array): it does nothing
//! if the point is done; otherwise it runs into a temporary directory and renames it into
//! place when it ends, with `point.json` saying how it ended, where and under which job. A
//! point killed mid-way leaves only its temporary directory, which the next sweep removes.
//!
//! ```text
//! <dir>/points/p0007/point.json       how point 7 ended (status ok|failed, error, host, job)
//! <dir>/points/p0007/results/…        its `pantheon run local` results directory
//! <dir>/points/.p0007.node3.4242.tmp/ point 7 running (or killed) in process 4242 of node3
//! ```

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::plan::SweepPlan;
use engine::experiment::Local;
use engine::schemes::Registry;

/// Exit status of a point interrupted (Ctrl-C, SIGTERM): nothing was placed.
pub const INTERRUPTED_STATUS: i32 = 130;

/// How a point ended: `<dir>/points/pNNNN/point.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointRecord {
    /// The point's id.
    pub id: u32,
    /// `ok` (its run was analysed) or `failed`.
    pub status: String,
    /// The experiment's exit status (0 ok, 1 a run failed, 2 an error).
    pub exit_status: i32,
    /// Why it failed: the last lines of its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The machine it ran on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// Slurm's job, array job and task ids when it ran under Slurm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<serde_json::Value>,
    /// UTC start time (ISO 8601).
    pub started: String,
    /// Start time, seconds since the Unix epoch (for overlaps and overheads).
    #[serde(default)]
    pub started_unix_s: f64,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// Errors of earlier failed attempts, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_errors: Vec<String>,
}

impl PointRecord {
    /// The last non-empty line of its error (what stopped it), if it failed.
    pub fn error_line(&self) -> Option<&str> {
        self.error
            .as_deref()
            .and_then(|e| e.lines().rev().find(|l| !l.trim().is_empty()))
    }

    /// True when the point needs no more running.
    pub fn ok(&self) -> bool {
        self.status == "ok"
    }
}

/// Where point `id`'s results are placed.
pub fn point_dir(dir: &Path, id: u32) -> PathBuf {
    dir.join("points").join(format!("p{id:04}"))
}

/// Point `id`'s record, if it has ended (ok or failed).
pub fn record(dir: &Path, id: u32) -> Option<PointRecord> {
    let text = std::fs::read_to_string(point_dir(dir, id).join("point.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// The temporary directory of point `id` run by process `pid` of machine `host`.
fn tmp_name(id: u32, host: &str, pid: u32) -> String {
    format!(".p{id:04}.{host}.{pid}.tmp")
}

/// `(host, pid)` of a temporary directory's name (`host` empty in the names of earlier
/// versions, `.p0007.4242.tmp`: this machine).
fn parse_tmp_name(name: &str) -> Option<(&str, i32)> {
    let rest = name.strip_prefix(".p")?.strip_suffix(".tmp")?;
    let (_id, rest) = rest.split_once('.')?;
    let (host, pid) = rest.rsplit_once('.').unwrap_or(("", rest));
    Some((host, pid.parse().ok()?))
}

/// Removes temporary directories of points whose process is gone (killed sweeps); returns
/// how many. A directory of a process still alive on this machine, or of another machine
/// (a Slurm node: see [`remove_unfinished`]), is kept.
pub fn remove_stale(dir: &Path) -> usize {
    let here = hostname();
    remove_tmp_dirs(dir, |host, pid| {
        // SAFETY: signal 0 only checks that the process exists.
        (host.is_empty() || host == here) && unsafe { libc::kill(pid, 0) } != 0
    })
}

/// Removes every point's temporary directory, whatever machine it was on: for when every
/// process that could run a point has ended (a Slurm job array that has left the queue).
/// Returns how many.
pub fn remove_unfinished(dir: &Path) -> usize {
    remove_tmp_dirs(dir, |_, _| true)
}

fn remove_tmp_dirs(dir: &Path, remove: impl Fn(&str, i32) -> bool) -> usize {
    let Ok(entries) = std::fs::read_dir(dir.join("points")) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((host, pid)) = parse_tmp_name(&name) else {
            continue;
        };
        if remove(host, pid) && std::fs::remove_dir_all(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// How a point's experiment ended: its exit status and what to record of a failure.
pub struct Outcome {
    /// 0 ok, 1 a run failed, 2 an error, [`INTERRUPTED_STATUS`] interrupted.
    pub status: i32,
    /// Why it failed (the failed runs, one line each, or the error), for the record.
    pub tail: String,
}

/// Runs point `id` of the sweep in `dir` here, unless it is done ([`run_point_with`]): its
/// experiment ([`SweepPlan::experiment`]) through [`engine::experiment::local`], its events
/// (progress) to `events`.
pub fn run_point(
    dir: &Path,
    id: u32,
    events: &dyn engine::experiment::Events,
) -> anyhow::Result<Option<PointRecord>> {
    run_point_with(dir, id, |setup| {
        let ended = Registry::load(setup.plan.schemes_dir.as_deref())
            .map_err(anyhow::Error::from)
            .and_then(|registry| engine::experiment::local(setup, &registry, events));
        match ended {
            Ok(o) => {
                let failed: Vec<String> = o.ran.failed.iter().map(ToString::to_string).collect();
                Outcome {
                    status: i32::from(o.exit_status()),
                    tail: failed.join("\n"),
                }
            }
            Err(e) => Outcome {
                status: 2,
                tail: format!("{e:#}"),
            },
        }
    })
}

/// Runs point `id` of the sweep in `dir` with `experiment` (given the point's experiment,
/// its results directory in the point's temporary directory), unless it is done. Returns the
/// record placed, or `None` when it was done already or was interrupted (then nothing is
/// placed and its temporary directory is gone). Errors: no such point, a directory that cannot
/// be created, a record that cannot be written or placed.
pub fn run_point_with(
    dir: &Path,
    id: u32,
    experiment: impl FnOnce(Local) -> Outcome,
) -> anyhow::Result<Option<PointRecord>> {
    let plan = SweepPlan::load(dir)?;
    let point = plan.point(id)?;
    let earlier = record(dir, id);
    if earlier.as_ref().is_some_and(PointRecord::ok) {
        return Ok(None);
    }
    let pid = std::process::id();
    let host = hostname();
    let tmp = dir.join("points").join(tmp_name(id, &host, pid));
    std::fs::create_dir_all(&tmp).with_context(|| format!("create {}", tmp.display()))?;
    let started = engine::plan::utc_now();
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let clock = std::time::Instant::now();
    let out = match plan.experiment(dir, point, &tmp.join("results")) {
        Ok(setup) => experiment(setup),
        Err(e) => Outcome {
            status: 2,
            tail: format!("{e:#}"),
        },
    };
    if out.status == INTERRUPTED_STATUS {
        let _ = std::fs::remove_dir_all(&tmp);
        return Ok(None);
    }
    let mut earlier_errors = Vec::new();
    if let Some(e) = earlier {
        earlier_errors = e.earlier_errors;
        earlier_errors.extend(e.error);
    }
    let rec = PointRecord {
        id,
        status: if out.status == 0 { "ok" } else { "failed" }.into(),
        exit_status: out.status,
        error: (out.status != 0).then_some(out.tail),
        host,
        pid,
        slurm: slurm_ids(),
        started,
        started_unix_s,
        wall_s: clock.elapsed().as_secs_f64(),
        earlier_errors,
    };
    std::fs::write(tmp.join("point.json"), serde_json::to_string_pretty(&rec)?)
        .with_context(|| format!("write {}/point.json", tmp.display()))?;
    let place = point_dir(dir, id);
    if place.exists() {
        std::fs::remove_dir_all(&place)
            .with_context(|| format!("remove the failed attempt {}", place.display()))?;
    }
    std::fs::rename(&tmp, &place).with_context(|| format!("place {}", place.display()))?;
    Ok(Some(rec))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

/// Slurm's ids from the environment of a job, if this is one.
fn slurm_ids() -> Option<serde_json::Value> {
    let keys = ["SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"];
    let found: serde_json::Map<String, serde_json::Value> = keys
        .iter()
        .filter_map(|k| Some((k.to_lowercase(), std::env::var(k).ok()?.into())))
        .collect();
    (!found.is_empty()).then_some(serde_json::Value::Object(found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::SweepFile;

    fn sweep(dir: &Path) {
        let f = SweepFile::parse(
            "name = \"t\"\n[environments]\nemulators = [\"nepal-aws-india\"]\n\
             [mixes]\nlist = [\"cubic\", \"bbr\"]\n",
            "t.toml",
        )
        .unwrap();
        SweepPlan::new(&f).freeze(dir).unwrap();
    }

    fn ends(status: i32) -> impl FnOnce(Local) -> Outcome {
        move |setup: Local| {
            std::fs::create_dir_all(&setup.plan.data_dir).unwrap();
            Outcome {
                status,
                tail: format!("exit {status}"),
            }
        }
    }

    #[test]
    fn a_point_runs_once_a_failure_is_retried_and_an_interruption_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        sweep(d);
        // Interrupted: nothing placed, no temporary directory left.
        assert_eq!(
            run_point_with(d, 1, ends(INTERRUPTED_STATUS)).unwrap(),
            None
        );
        assert!(record(d, 1).is_none());
        assert_eq!(std::fs::read_dir(d.join("points")).unwrap().count(), 0);
        // Failed: placed with its error; run again, it is retried and keeps the first error.
        let rec = run_point_with(d, 1, ends(1)).unwrap().unwrap();
        assert_eq!(
            (rec.status.as_str(), rec.error.as_deref()),
            ("failed", Some("exit 1"))
        );
        let rec = run_point_with(d, 1, ends(0)).unwrap().unwrap();
        assert!(rec.ok());
        assert_eq!(rec.earlier_errors, ["exit 1"]);
        assert!(point_dir(d, 1).join("results").is_dir());
        // Done: not run again.
        let never = |_: Local| -> Outcome { panic!("a done point ran again") };
        assert_eq!(run_point_with(d, 1, never).unwrap(), None);
        assert!(run_point_with(d, 3, ends(0)).is_err());
    }

    #[test]
    fn stale_temporary_directories_of_dead_processes_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let points = dir.path().join("points");
        let me = std::process::id();
        // A process id above the kernel's maximum (4194304) is never alive.
        let dead = points.join(tmp_name(1, &hostname(), 999_999_999));
        let dead_old_name = points.join(".p0003.999999999.tmp");
        let alive = points.join(tmp_name(2, &hostname(), me));
        let elsewhere = points.join(tmp_name(4, "node-7.cluster", 999_999_999));
        for d in [&dead, &dead_old_name, &alive, &elsewhere] {
            std::fs::create_dir_all(d).unwrap();
        }
        assert_eq!(remove_stale(dir.path()), 2);
        assert!(!dead.exists() && !dead_old_name.exists());
        assert!(alive.exists() && elsewhere.exists());
        assert_eq!(
            parse_tmp_name(".p0004.node-7.cluster.12.tmp"),
            Some(("node-7.cluster", 12))
        );
        assert_eq!(remove_unfinished(dir.path()), 2);
        assert_eq!(std::fs::read_dir(&points).unwrap().count(), 0);
    }
}
