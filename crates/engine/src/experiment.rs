//! The experiment driver, whoever starts the experiment (cargo's `ops` layer for `pantheon
//! run`): a results directory prepared (refused, appended to or moved aside), its metadata and
//! traces written, every run of the plan run and recorded as it ends, and the directory
//! analysed.
//!
//! ```text
//! ExperimentPlan ─► prepare ─► (metadata, traces) ─► run_all ─► finish ─► Outcome
//!                   results      local: here          runs ×     analysis   runs, failures,
//!                   directory    remote: the agents   schemes               Perf, summary
//! ```
//!
//! [`local`] is the whole of a local experiment (`pantheon run local|sim`, every point of a
//! sweep). A remote experiment (`pantheon run remote`, the testbed's daemon) prepares the
//! directory with [`prepare`], lets its agents write the metadata, runs [`run_all`] with its
//! remote runner and ends with [`finish`]; a calibration's evaluation is [`run_all`] alone,
//! stopping at the first failed run. The driver prints nothing: what happens goes to the
//! caller's [`Events`] (a progress bar, a daemon's log) and to `tracing` (notes and warnings).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use anyhow::Context;
use emucal::emulator::Emulator;
use emucal::mm::Shell;

use analyzer::files::{lock_results_dir, ResultsLock};

use crate::analyze::{analyze_dir, Analysis};
use crate::plan::{prepare_results_dir, write_constant_trace, Existing, ExperimentPlan, Reuse};
use crate::record::{RunOutcome, RunRecord, INTERRUPTED};
use crate::schemes::{Registry, SystemInfo};
use crate::sequence::{run_flows, RunSpec};

/// What the driver tells whoever started the experiment; every method does nothing unless
/// overridden. Called on the driver's thread, in order.
pub trait Events {
    /// The runs are about to start: `total` runs (runs × schemes, those left out included).
    fn starting(&self, _plan: &ExperimentPlan, _total: usize) {}
    /// Run number `seq` (from 0, of `total`) starts.
    fn run_starting(&self, _run: &RunSpec, _seq: usize, _total: usize) {}
    /// Run `seq` has done `fraction` (0–1) of its time.
    fn run_progress(&self, _seq: usize, _fraction: f64) {}
    /// A run ended; it is recorded in `pantheon_runs.json` next (a record that cannot be
    /// written stops the experiment with an error).
    fn run_ended(&self, _record: &RunRecord) {}
}

/// No events: for callers that show none.
pub struct Quiet;

impl Events for Quiet {}

/// One run: what it is and a progress callback (0–1) → its record, or an error that stops the
/// experiment before the run is recorded (an agent that does not answer). A scheme that fails
/// is a record, not an error.
pub type RunOne<'a> = &'a dyn Fn(&RunSpec, &dyn Fn(f64)) -> anyhow::Result<RunRecord>;

/// How [`run_all`] goes through the runs.
#[derive(Debug, Clone, Default)]
pub struct RunsOptions {
    /// Run tags are `<tag_prefix>-<n>`, `n` counting from 0 the runs this call runs: unique
    /// names for the run's namespaces (`pt-<pid>` locally, `r<pid>` remotely).
    pub tag_prefix: String,
    /// (Name, run id) of runs recorded already (a daemon's experiment resumed): not run again.
    pub done: BTreeSet<(String, u32)>,
    /// Stop after the first run that fails (a calibration's evaluation, which needs them all).
    pub stop_at_first_failure: bool,
}

/// A run that failed: its name, id and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedRun {
    /// The scheme's (or the mix's) name.
    pub name: String,
    /// Its run id.
    pub run_id: u32,
    /// Why, as recorded.
    pub reason: String,
}

impl std::fmt::Display for FailedRun {
    /// `cubic run 2: <reason>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} run {}: {}", self.name, self.run_id, self.reason)
    }
}

/// What [`run_all`] ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ran {
    /// Runs run (and recorded), failed ones included.
    pub runs: usize,
    /// The runs that failed, in order.
    pub failed: Vec<FailedRun>,
    /// Stopped early by Ctrl-C/SIGTERM (or a daemon's shutdown): [`INTERRUPTED`] was set.
    pub interrupted: bool,
}

/// Runs every scheme of `plan` (or its mix) `run_times` times — run ids outermost, from
/// `plan.start_run_id`, schemes in plan order — each with `run_one`, recording each run in
/// `plan.data_dir`'s `pantheon_runs.json` as it ends. Stops before the next run once
/// [`INTERRUPTED`] is set, and after a failed run with `opts.stop_at_first_failure`. Errors
/// (the runs recorded before are kept): a scheme unknown to `registry`, an error of `run_one`,
/// a record that cannot be written (a full disk).
pub fn run_all(
    plan: &ExperimentPlan,
    registry: &Registry,
    opts: &RunsOptions,
    run_one: RunOne,
    events: &dyn Events,
) -> anyhow::Result<Ran> {
    let total = plan.run_times as usize * plan.schemes.len();
    events.starting(plan, total);
    let mut ran = Ran::default();
    let mut seq = 0usize;
    for run_id in plan.run_ids() {
        for name in &plan.schemes {
            if INTERRUPTED.load(Ordering::SeqCst) {
                ran.interrupted = true;
                return Ok(ran);
            }
            if opts.done.contains(&(name.clone(), run_id)) {
                seq += 1;
                continue;
            }
            let flows = run_flows(plan, name, registry)?;
            let tag = format!("{}-{}", opts.tag_prefix, ran.runs);
            let run = RunSpec {
                name,
                flows: &flows,
                run_id,
                tag: &tag,
            };
            events.run_starting(&run, seq, total);
            let rec = run_one(&run, &|f| events.run_progress(seq, f))?;
            events.run_ended(&rec);
            rec.append_to(&plan.data_dir).with_context(|| {
                format!(
                    "{name} run {run_id} could not be recorded; the experiment stops (runs \
                     recorded before it are kept)"
                )
            })?;
            ran.runs += 1;
            seq += 1;
            match rec.outcome {
                RunOutcome::Ok => {}
                RunOutcome::Failed { reason } => {
                    ran.failed.push(FailedRun {
                        name: name.clone(),
                        run_id,
                        reason,
                    });
                    if opts.stop_at_first_failure {
                        return Ok(ran);
                    }
                }
                RunOutcome::Interrupted => {
                    ran.interrupted = true;
                    return Ok(ran);
                }
            }
        }
    }
    ran.interrupted = INTERRUPTED.load(Ordering::SeqCst);
    Ok(ran)
}

/// How an experiment ended: its runs and its analysis.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// What ran.
    pub ran: Ran,
    /// The results directory's analysis (summary, `Perf`).
    pub analysis: Analysis,
}

impl Outcome {
    /// The exit status Pantheon-rs gives it: 0 every run ended normally, 1 some run failed (the
    /// others ran), 130 interrupted.
    pub fn exit_status(&self) -> u8 {
        if self.ran.interrupted {
            130
        } else if !self.ran.failed.is_empty() {
            1
        } else {
            0
        }
    }
}

/// The end of every experiment: the results directory analysed (what was recorded, when
/// interrupted). Errors: the analysis's.
pub fn finish(plan: &ExperimentPlan, registry: &Registry, ran: Ran) -> anyhow::Result<Outcome> {
    if ran.interrupted {
        tracing::info!("interrupted: analysing what was recorded");
    }
    let analysis = analyze_dir(&plan.data_dir, registry)?;
    Ok(Outcome { ran, analysis })
}

/// What to do with an experiment's results directory (`plan.data_dir`) and how to number its
/// runs (`--append`/`--overwrite`, `--start-run-id`, `--wait-lock`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResultsDir {
    /// What to do with results already there.
    pub reuse: Reuse,
    /// Id of the first run; `None`: 1, or after the last run of the results appended to.
    pub start_run_id: Option<u32>,
    /// If another command writes the directory: wait for it (`--wait-lock`) instead of
    /// refusing at once.
    pub wait_lock: bool,
}

/// A results directory [`prepare`]d: what was there, and the directory's lock, which the
/// caller holds until its last write (the analysis).
#[derive(Debug)]
pub struct Prepared {
    /// What was there.
    pub existing: Existing,
    /// One writer at a time ([`analyzer::files::lock_results_dir`]); released when dropped.
    pub lock: ResultsLock,
}

/// Locks `dir` for this command ([`analyzer::files::lock_results_dir`]: created if missing),
/// waiting for another writer if `wait` (saying so), else refusing naming it.
pub fn lock(dir: &Path, wait: bool) -> anyhow::Result<ResultsLock> {
    Ok(lock_results_dir(dir, wait, &|holder| {
        tracing::info!(
            "{} is being written by {holder}: waiting for it to end (--wait-lock)",
            dir.display()
        )
    })?)
}

/// Locks `plan.data_dir` ([`lock`]: one writer at a time), checks it before anything is written
/// into it ([`prepare_results_dir`], saying where earlier results were moved, then locking the
/// new directory), and numbers the runs: from `dir.start_run_id` if given, else 1, or after the
/// last run of the results appended to. Errors: another writer (unless waiting), a directory
/// refused, a run count that overflows the run ids.
pub fn prepare(plan: &mut ExperimentPlan, dir: ResultsDir) -> anyhow::Result<Prepared> {
    let mut held = lock(&plan.data_dir, dir.wait_lock)?;
    let existing = prepare_results_dir(&plan.data_dir, dir.reuse)?;
    if let Existing::MovedTo(aside) = &existing {
        tracing::info!(
            "The earlier results in {} were moved to {}",
            plan.data_dir.display(),
            aside.display()
        );
        held = lock(&plan.data_dir, false)?;
    }
    plan.start_run_id = match (dir.start_run_id, &existing) {
        (Some(id), _) => id,
        (None, Existing::Append(earlier)) => earlier
            .runs()
            .iter()
            .map(|&(_, id)| id)
            .max()
            .map_or(Some(1), |last| last.checked_add(1))
            .context("the results appended to end at run id 4294967295: use another --data-dir")?,
        _ => 1,
    };
    plan.check_run_ids()?;
    Ok(Prepared {
        existing,
        lock: held,
    })
}

/// A local experiment (real or simulated time): its plan, whose `emulator` is the path, and
/// what to do with the results directory.
#[derive(Debug, Clone)]
pub struct Local {
    /// The plan; `emulator` must be set.
    pub plan: ExperimentPlan,
    /// What to do with its results directory.
    pub dir: ResultsDir,
    /// Constant-rate traces to write into the results directory before the path is loaded
    /// (file, Mbit/s): a preset's ([`preset`]), Pantheon's default 12 Mbit/s one.
    pub write_traces: Vec<(PathBuf, f64)>,
    /// The library's emulator the path is (`--emulator NAME`), for the metadata.
    pub preset: Option<String>,
    /// A mix's solo baseline (`--baseline DIR`).
    pub baseline: Option<PathBuf>,
}

/// The emulator of the library named `name` (or a preset or iBoxNet profile file) with its
/// traces in `data_dir`, and those traces to write (file, Mbit/s; two when its directions'
/// rates differ). Errors name the unknown emulator and list the known ones.
pub fn preset(name: &str, data_dir: &Path) -> anyhow::Result<(Emulator, Vec<(PathBuf, f64)>)> {
    let preset = emucal::presets::find(name).map_err(anyhow::Error::msg)?;
    let traces = preset
        .traces()
        .into_iter()
        .map(|(file, mbps)| (data_dir.join(file), mbps))
        .collect();
    Ok((preset.emulator_in(data_dir), traces))
}

/// A local experiment, from its plan to its analysis (`pantheon run local|sim`, a sweep's
/// point). Everything is checked before anything is created: the plan, the trace files it
/// reads, the baseline, the results directory (refused unless appended to or moved aside).
/// Then the metadata and traces are written, every run is run (in namespaces of this
/// process's `pt-<pid>`, or simulated) and recorded, and the directory is analysed. Errors:
/// any check, a results directory or record that cannot be written, the analysis; failed
/// and interrupted runs are in the [`Outcome`].
pub fn local(setup: Local, registry: &Registry, events: &dyn Events) -> anyhow::Result<Outcome> {
    let Local {
        mut plan,
        dir,
        write_traces,
        preset,
        baseline,
    } = setup;
    let simulate = plan.simulate;
    plan.check(registry)?;
    let emulator = plan
        .emulator
        .as_ref()
        .context("a local experiment needs an emulated path")?;
    check_files(emulator, &write_traces)?;
    let baseline = baseline
        .as_deref()
        .map(|b| plan.check_baseline(b))
        .transpose()?;
    if !simulate {
        crate::clean::before_creating_namespaces("pantheon run local")?;
    }
    let Prepared {
        existing,
        lock: _held,
    } = prepare(&mut plan, dir)?;
    if !simulate {
        let sys = SystemInfo::probe();
        for name in plan.scheme_names() {
            if let Some(why) = registry.get(&name)?.unavailable_reason(&sys) {
                tracing::warn!("warning: {name} cannot run here ({why}); its runs will fail");
            }
        }
    }
    let tag_prefix = format!("pt-{}", std::process::id());
    let mut metadata = plan.metadata(registry);
    metadata.baseline = baseline;
    metadata.netns_prefix = (!simulate).then(|| tag_prefix.clone());
    metadata.rootless = !simulate && crate::rootless::is_rootless();
    metadata.emulator_preset = preset;
    // What `--append` compares: the path by value, traces by content (those about to be
    // written by what they will hold).
    metadata.emulator_identity = plan.path_identity(&|trace| match write_traces
        .iter()
        .find(|(t, _)| t == trace)
    {
        Some((_, mbps)) => Ok(emucal::trace::Trace::constant_rate(*mbps)
            .map_err(anyhow::Error::msg)?
            .to_text()
            .into_bytes()),
        None => Ok(emucal::trace::Trace::read_file(trace)?),
    })?;
    if let Existing::Append(earlier) = &existing {
        plan.check_append(earlier, &metadata)?;
        metadata = earlier.merged(&metadata);
    }
    let data_dir = &plan.data_dir;
    std::fs::create_dir_all(data_dir).with_context(|| format!("create {}", data_dir.display()))?;
    for (trace, mbps) in &write_traces {
        write_constant_trace(trace, *mbps)?;
    }
    let path = plan.validate(registry)?;
    metadata.uplink_mbps = path.uplink_mbps();
    metadata.write(data_dir)?;
    tracing::info!(
        "Emulated path{}: {}",
        if simulate { " (simulated time)" } else { "" },
        path.command_line
    );
    let opts = RunsOptions {
        tag_prefix,
        ..RunsOptions::default()
    };
    let ran = run_all(
        &plan,
        registry,
        &opts,
        &|run, progress| Ok(crate::runner::run_once(&plan, &path, run, progress)),
        events,
    )?;
    finish(&plan, registry, ran)
}

/// Reads every file `emulator` needs — its mm-link traces but those about to be written
/// (`write_traces`), its schedule files — before anything is created. Errors name the file
/// (and line) of the first missing or malformed one.
fn check_files(emulator: &Emulator, write_traces: &[(PathBuf, f64)]) -> anyhow::Result<()> {
    for shell in &emulator.shells {
        match shell {
            Shell::Link(link) => {
                for t in [&link.uplink_trace, &link.downlink_trace] {
                    if !write_traces.iter().any(|(w, _)| w == t) {
                        emucal::trace::Trace::load(t)?;
                    }
                }
            }
            Shell::Schedule { kind, file, .. } => {
                emucal::schedule::Schedule::load(file, *kind)?;
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    /// Runs `plan` with a runner that fails the runs of `failing` and records what it ran
    /// (name, run id, tag) and what the events saw.
    fn ran_with(
        plan: &ExperimentPlan,
        opts: &RunsOptions,
        failing: &[(&str, u32)],
    ) -> (Ran, Vec<String>, Vec<String>) {
        let registry = Registry::load(None).unwrap();
        let calls = RefCell::new(Vec::new());
        struct Seen(RefCell<Vec<String>>);
        impl Events for Seen {
            fn starting(&self, _: &ExperimentPlan, total: usize) {
                self.0.borrow_mut().push(format!("{total} runs"));
            }
            fn run_starting(&self, run: &RunSpec, seq: usize, total: usize) {
                self.0.borrow_mut().push(format!(
                    "{} {} {}/{total}",
                    run.name,
                    run.run_id,
                    seq + 1
                ));
            }
            fn run_ended(&self, r: &RunRecord) {
                self.0
                    .borrow_mut()
                    .push(format!("{} {} ended", r.scheme, r.run_id));
            }
        }
        let seen = Seen(RefCell::new(Vec::new()));
        let ran = run_all(
            plan,
            &registry,
            opts,
            &|run, progress| {
                progress(0.5);
                calls
                    .borrow_mut()
                    .push(format!("{} {} {}", run.name, run.run_id, run.tag));
                let mut rec = RunRecord::new(run.name, run.run_id);
                if failing.contains(&(run.name, run.run_id)) {
                    rec.outcome = RunOutcome::Failed {
                        reason: "its sender exited".into(),
                    };
                }
                Ok(rec)
            },
            &seen,
        )
        .unwrap();
        (ran, calls.into_inner(), seen.0.into_inner())
    }

    fn plan(dir: &Path) -> ExperimentPlan {
        ExperimentPlan {
            schemes: vec!["cubic".into(), "bbr".into()],
            run_times: 2,
            start_run_id: 3,
            data_dir: dir.to_owned(),
            ..ExperimentPlan::default()
        }
    }

    #[test]
    fn every_run_is_run_in_order_and_recorded_as_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let opts = RunsOptions {
            tag_prefix: "pt-1".into(),
            ..RunsOptions::default()
        };
        let (ran, calls, seen) = ran_with(&plan(dir.path()), &opts, &[("bbr", 3)]);
        assert_eq!(
            calls,
            [
                "cubic 3 pt-1-0",
                "bbr 3 pt-1-1",
                "cubic 4 pt-1-2",
                "bbr 4 pt-1-3"
            ]
        );
        assert_eq!(
            &seen[..4],
            ["4 runs", "cubic 3 1/4", "cubic 3 ended", "bbr 3 2/4"]
        );
        assert_eq!((ran.runs, ran.interrupted), (4, false));
        // A failed run is listed and the others still run.
        assert_eq!(ran.failed.len(), 1);
        assert_eq!(ran.failed[0].to_string(), "bbr run 3: its sender exited");
        let records = RunRecord::read_all(dir.path()).unwrap();
        let ids: Vec<(String, u32)> = records
            .iter()
            .map(|r| (r.scheme.clone(), r.run_id))
            .collect();
        assert_eq!(ids.len(), 4);
        assert!(ids.contains(&("bbr".into(), 4)));
    }

    #[test]
    fn done_runs_are_skipped_and_a_calibration_stops_at_the_first_failure() {
        let dir = tempfile::tempdir().unwrap();
        let opts = RunsOptions {
            tag_prefix: "e7a2".into(),
            done: [("cubic".to_owned(), 3)].into_iter().collect(),
            stop_at_first_failure: false,
        };
        let (ran, calls, seen) = ran_with(&plan(dir.path()), &opts, &[]);
        // Tags count the runs run; the progress counts every run of the plan.
        assert_eq!(calls, ["bbr 3 e7a2-0", "cubic 4 e7a2-1", "bbr 4 e7a2-2"]);
        assert_eq!(seen[1], "bbr 3 2/4");
        assert_eq!((ran.runs, ran.failed.len()), (3, 0));
        let dir = tempfile::tempdir().unwrap();
        let opts = RunsOptions {
            stop_at_first_failure: true,
            ..RunsOptions::default()
        };
        let (ran, calls, _) = ran_with(&plan(dir.path()), &opts, &[("bbr", 3)]);
        assert_eq!(calls.len(), 2);
        assert_eq!((ran.runs, ran.failed.len()), (2, 1));
    }

    #[test]
    fn the_exit_status_says_how_the_experiment_ended() {
        let analysis = Analysis {
            summary_md: String::new(),
            perf: analyzer::perf::Perf::default(),
        };
        let mut o = Outcome {
            ran: Ran::default(),
            analysis,
        };
        assert_eq!(o.exit_status(), 0);
        o.ran.failed.push(FailedRun {
            name: "cubic".into(),
            run_id: 1,
            reason: "x".into(),
        });
        assert_eq!(o.exit_status(), 1);
        o.ran.interrupted = true;
        assert_eq!(o.exit_status(), 130);
    }

    #[test]
    fn a_local_experiment_refuses_a_directory_with_results_before_running_anything() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::load(None).unwrap();
        let trace = dir.path().join("12mbps.trace");
        let emulator = Emulator::from_pantheon_flags("", &trace, &trace, "", "").unwrap();
        let setup = |reuse| Local {
            plan: ExperimentPlan {
                schemes: vec!["quic".into()],
                emulator: Some(emulator.clone()),
                data_dir: dir.path().to_owned(),
                simulate: true,
                ..ExperimentPlan::default()
            },
            dir: ResultsDir {
                reuse,
                ..ResultsDir::default()
            },
            write_traces: vec![(trace.clone(), 12.0)],
            preset: None,
            baseline: None,
        };
        std::fs::write(dir.path().join(crate::record::RUNS_FILE), "[]").unwrap();
        let e = local(setup(Reuse::Refuse), &registry, &Quiet).unwrap_err();
        assert!(format!("{e:#}").contains("already holds results"), "{e:#}");
        assert!(
            !trace.exists(),
            "nothing is written into a refused directory"
        );
    }
}
