//! The local executor: the sweep's missing points (never run, or failed), `jobs` at a time,
//! each a child process `pantheon sweep point DIR ID` ([`crate::point::run_point`]) with its
//! output in `<dir>/logs/pNNNN.log`. Progress and an ETA go to the caller's [`Progress`].
//!
//! Stopping: on Ctrl-C (or SIGTERM) no point is started any more and each running one is sent
//! one SIGTERM, which interrupts its run and tears it down (its namespaces and processes);
//! the points are in their own process groups, so the terminal's Ctrl-C reaches only the
//! sweep. If the sweep itself is killed (`kill -9`), the kernel sends each point SIGTERM
//! (`PR_SET_PDEATHSIG`), with the same effect. Either way a point interrupted places nothing,
//! and running the sweep again runs it again, and only it and the points never started.

use std::collections::VecDeque;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;

use crate::plan::SweepPlan;
use crate::point::{record, remove_stale};

/// What a sweep's points are, read from its directory only.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Status {
    /// Points in the plan.
    pub total: usize,
    /// Points done.
    pub ok: Vec<u32>,
    /// Points whose last attempt failed (run again by the next sweep).
    pub failed: Vec<u32>,
    /// Points never run, or interrupted.
    pub missing: Vec<u32>,
    /// Mean wall time of the points done, seconds.
    pub mean_wall_s: Option<f64>,
}

impl Status {
    /// Reads the state of every point of `plan` from `dir`.
    pub fn read(dir: &Path, plan: &SweepPlan) -> Status {
        let mut s = Status {
            total: plan.points.len(),
            ..Status::default()
        };
        let mut walls = Vec::new();
        for p in &plan.points {
            match record(dir, p.id) {
                Some(r) if r.ok() => {
                    s.ok.push(p.id);
                    walls.push(r.wall_s);
                }
                Some(_) => s.failed.push(p.id),
                None => s.missing.push(p.id),
            }
        }
        s.mean_wall_s = (!walls.is_empty()).then(|| walls.iter().sum::<f64>() / walls.len() as f64);
        s
    }

    /// The points to run: failed ones and missing ones, in id order.
    pub fn to_run(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.failed.iter().chain(&self.missing).copied().collect();
        v.sort_unstable();
        v
    }

    /// One line: `12/288 points done, 1 failed, 275 to run`.
    pub fn line(&self) -> String {
        format!(
            "{}/{} points done, {} failed, {} to run",
            self.ok.len(),
            self.total,
            self.failed.len(),
            self.missing.len()
        )
    }
}

/// What an executor tells whoever runs the sweep, as the points end (the program draws a
/// progress bar); every method does nothing unless overridden.
pub trait Progress {
    /// The points are about to run: `done` of `total` are done already.
    fn begin(&self, _done: usize, _total: usize) {}
    /// `done` points are done now; `status` says what runs, what failed and the ETA.
    fn update(&self, _done: usize, _status: &str) {}
    /// Something to say above the progress (a point that failed, an interruption).
    fn say(&self, _line: &str) {}
    /// The executor has ended.
    fn end(&self) {}
}

/// No progress shown.
pub struct NoProgress;

impl Progress for NoProgress {}

/// Seconds left for `left` points of `mean_s` each, `jobs` at a time.
pub fn eta_s(left: usize, mean_s: f64, jobs: usize) -> f64 {
    (left as f64 / jobs.max(1) as f64).ceil() * mean_s
}

/// `s` seconds as `H:MM:SS`.
pub(crate) fn hms(s: f64) -> String {
    let s = s.max(0.0) as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// What every executor does first: loads the plan of the sweep in `dir`, removes the
/// temporary directories of points whose process is gone (saying so), and reads the status.
pub(crate) fn begin(dir: &Path) -> anyhow::Result<(SweepPlan, Status)> {
    let plan = SweepPlan::load(dir)?;
    let stale = remove_stale(dir);
    if stale > 0 {
        tracing::info!("removed {stale} unfinished point(s) of an earlier sweep that was stopped");
    }
    let before = Status::read(dir, &plan);
    Ok((plan, before))
}

/// Runs the missing and failed points of the sweep in `dir` with `exe` (`pantheon`), `jobs`
/// at a time, until all have ended or `interrupted` is set, telling `progress`; returns the
/// status after.
pub fn run_local(
    dir: &Path,
    exe: &Path,
    jobs: usize,
    interrupted: &AtomicBool,
    progress: &dyn Progress,
) -> anyhow::Result<Status> {
    let (plan, before) = begin(dir)?;
    tracing::info!("{}; {jobs} at a time", before.line());
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("create {}", logs.display()))?;
    let mut queue: VecDeque<u32> = before.to_run().into();
    progress.begin(before.ok.len(), before.total);
    let mut done = before.ok.len();
    // Until a point ends here, a point is taken to last its runtime and 15 s of setup and
    // analysis.
    let mut walls: Vec<f64> = before.mean_wall_s.into_iter().collect();
    let mut running: Vec<(u32, Child)> = Vec::new();
    let mut failed = 0;
    let mut stopping = false;
    loop {
        while running.len() < jobs && !interrupted.load(Ordering::SeqCst) {
            let Some(id) = queue.pop_front() else { break };
            running.push((id, spawn(exe, dir, id)?));
        }
        if running.is_empty() {
            break;
        }
        if interrupted.load(Ordering::SeqCst) && !stopping {
            stopping = true;
            progress.say("interrupted: stopping the running points…");
            for (_, child) in &running {
                // SAFETY: a signal to a child of ours, by its id.
                unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            }
        }
        std::thread::sleep(Duration::from_millis(200));
        let mut i = 0;
        while i < running.len() {
            if running[i].1.try_wait()?.is_none() {
                i += 1;
                continue;
            }
            let (id, _) = running.swap_remove(i);
            match record(dir, id) {
                Some(r) if r.ok() => {
                    walls.push(r.wall_s);
                    done += 1;
                }
                Some(r) => {
                    failed += 1;
                    progress.say(&format!(
                        "point {id} failed: {}",
                        r.error_line().unwrap_or("(no output)")
                    ));
                }
                None => {}
            }
        }
        let mean = match walls.len() {
            0 => plan.file.runtime + 15.0,
            n => walls.iter().sum::<f64>() / n as f64,
        };
        let ids: Vec<String> = running.iter().map(|(id, _)| format!("p{id:04}")).collect();
        let status = format!(
            "({failed} failed) running {} · ETA {}",
            ids.join(" "),
            hms(eta_s(queue.len() + running.len(), mean, jobs))
        );
        progress.update(done, &status);
    }
    progress.end();
    Ok(Status::read(dir, &plan))
}

/// Starts `exe sweep point DIR ID` in a process group of its own, SIGTERM'd if the sweep dies,
/// its output in `<dir>/logs/pNNNN.log`.
fn spawn(exe: &Path, dir: &Path, id: u32) -> anyhow::Result<Child> {
    let log_path = dir.join("logs").join(format!("p{id:04}.log"));
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("create {}", log_path.display()))?;
    let mut cmd = Command::new(exe);
    cmd.arg("sweep")
        .arg("point")
        .arg(dir)
        .arg(id.to_string())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0);
    // SAFETY: prctl with integer arguments, async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    cmd.spawn()
        .with_context(|| format!("start point {id} ({})", exe.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eta_counts_waves_of_jobs() {
        assert_eq!(eta_s(0, 40.0, 2), 0.0);
        assert_eq!(eta_s(3, 40.0, 2), 80.0);
        assert_eq!(eta_s(4, 40.0, 1), 160.0);
        assert_eq!(hms(3725.0), "1:02:05");
    }
}
