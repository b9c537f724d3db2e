//! How each run ended: `pantheon_runs.json` (ours; Pantheon keeps no such record), written by
//! the runner (local runs) and the testbed (remote runs) as each run ends and read back by the
//! analysis with the same type, and the head of each run's Pantheon stats log.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use analyzer::results::write_json;
pub use analyzer::results::RUNS_FILE;
use anyhow::Context;
use serde::{Deserialize, Serialize};

/// Set by the Ctrl-C / SIGTERM handler: the runner finishes the current run's cleanup and stops.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// A stall of the harness longer than this (or than 5 % of the run) makes a run's figures
/// untrustworthy ([`RunRecord::lost_time`]), s.
pub const STALL_LIMIT_S: f64 = 1.0;

/// How a run ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum RunOutcome {
    /// Ran for the whole runtime.
    Ok,
    /// The scheme or the harness failed; the reason says which and why.
    Failed {
        /// What went wrong.
        reason: String,
    },
    /// Stopped by Ctrl-C / SIGTERM.
    Interrupted,
}

/// What a simulated run (`pantheon run sim`) cost.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SimulationCost {
    /// Simulated time, seconds.
    pub simulated_s: f64,
    /// Wall-clock time it took, seconds.
    pub wall_s: f64,
    /// Datagrams simulated, both directions.
    pub datagrams: u64,
}

impl std::fmt::Display for SimulationCost {
    /// The record's note: `simulated: 30.0 s of simulated time in 1.20 s (25.0× real time,
    /// 0.040 real s per simulated s), 52000 datagrams (43333 per second)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (sim_s, wall_s) = (self.simulated_s, self.wall_s.max(1e-9));
        write!(
            f,
            "simulated: {sim_s:.1} s of simulated time in {wall_s:.2} s ({:.1}× real time, \
             {:.3} real s per simulated s), {} datagrams ({:.0} per second)",
            sim_s / wall_s,
            wall_s / sim_s.max(1e-9),
            self.datagrams,
            self.datagrams as f64 / wall_s
        )
    }
}

/// The record of one run, one element of `pantheon_runs.json` (ours: Pantheon keeps no such
/// file): `{"scheme", "run_id", "status": "ok"|"failed"|"interrupted", "reason" (failed),
/// "start", "end", "notes", "planned_s", "wall_s", "stalled_s", "emulator_drops": [uplink,
/// downlink]}`, and `"simulation"` for a simulated run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// Scheme name.
    pub scheme: String,
    /// Run id (1-based, as Pantheon).
    pub run_id: u32,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: RunOutcome,
    /// UTC time the second side started.
    pub start: Option<String>,
    /// UTC time the run's traffic was stopped.
    pub end: Option<String>,
    /// Remarks (qdisc used, drain result…).
    #[serde(default)]
    pub notes: Vec<String>,
    /// The run's planned duration (its `--runtime`), s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_s: Option<f64>,
    /// Wall-clock time from the second side's start to the end of the run's traffic, s:
    /// about `planned_s`, unless the run was stopped, suspended or starved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
    /// The longest stretch of the run in which the harness did not get to run when it should
    /// have (it wakes every few ms to check and start the sides), s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalled_s: Option<f64>,
    /// Packets dropped inside the emulator: (uplink, downlink).
    #[serde(default)]
    pub emulator_drops: (u64, u64),
    /// A simulated run's cost (also among its notes, as [`SimulationCost`] prints it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulation: Option<SimulationCost>,
}

impl RunRecord {
    /// A run of `scheme` that has not started yet (outcome `Ok` until told otherwise).
    pub fn new(scheme: &str, run_id: u32) -> RunRecord {
        RunRecord {
            scheme: scheme.to_owned(),
            run_id,
            outcome: RunOutcome::Ok,
            start: None,
            end: None,
            notes: Vec::new(),
            planned_s: None,
            wall_s: None,
            stalled_s: None,
            emulator_drops: (0, 0),
            simulation: None,
        }
    }

    /// Why the run's figures cannot be believed because its harness did not run for a stretch
    /// (stopped with SIGSTOP, a suspended machine, CPU starvation): it stalled for more than
    /// [`STALL_LIMIT_S`] (or 5 % of the run, if more), or took that much more wall-clock time
    /// than planned. `None` for a run that kept its time, and for records without times.
    pub fn lost_time(&self) -> Option<String> {
        let planned = self.planned_s?;
        let limit = STALL_LIMIT_S.max(0.05 * planned);
        let stalled = self.stalled_s.unwrap_or(0.0);
        let over = self.wall_s.map_or(0.0, |w| w - planned);
        (stalled > limit || over > limit).then(|| {
            format!(
                "the harness did not run for {stalled:.1} s of the run (stopped, suspended or \
                 starved): it took {:.1} s of wall-clock time for its planned {planned:.1} s",
                self.wall_s.unwrap_or(planned)
            )
        })
    }

    /// The records in `dir/pantheon_runs.json`; none if there is no such file. Errors if the
    /// file cannot be read or parsed (naming it, with serde's line and column).
    pub fn read_all(dir: &Path) -> anyhow::Result<Vec<RunRecord>> {
        let path = dir.join(RUNS_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e).with_context(|| format!("read {}", path.display())),
        }
    }

    /// Adds this record to `dir/pantheon_runs.json`, replacing the record of the same scheme
    /// and run id (an earlier attempt) and keeping every other. Errors, writing nothing, if the
    /// file exists but cannot be parsed: records are never dropped silently.
    pub fn append_to(&self, dir: &Path) -> anyhow::Result<()> {
        let mut all = RunRecord::read_all(dir)?;
        all.retain(|r| !(r.scheme == self.scheme && r.run_id == self.run_id));
        all.push(self.clone());
        Ok(write_json(
            &dir.join(RUNS_FILE),
            &serde_json::to_value(&all)?,
        )?)
    }

    /// Records how the run ended (`Err`: failed, or interrupted after Ctrl-C) and writes the
    /// head of Pantheon's `<scheme>_stats_run<N>.log` in `dir`: `Start at:`, `End at:` and the
    /// `extra` lines (e.g. `Local clock offset: X ms`); analysis appends the statistics.
    pub fn finish(&mut self, result: anyhow::Result<()>, dir: &Path, extra: &[String]) {
        if let Err(e) = result {
            self.outcome = if INTERRUPTED.load(Ordering::SeqCst) {
                RunOutcome::Interrupted
            } else {
                RunOutcome::Failed {
                    reason: format!("{e:#}"),
                }
            };
        }
        let mut head = String::new();
        if let Some(s) = &self.start {
            head.push_str(&format!("Start at: {s}\n"));
        }
        if let Some(e) = &self.end {
            head.push_str(&format!("End at: {e}\n"));
        }
        for l in extra {
            head.push_str(&format!("{l}\n"));
        }
        let stats_log = dir.join(format!("{}_stats_run{}.log", self.scheme, self.run_id));
        if let Err(e) = analyzer::files::write_atomic(&stats_log, head.as_bytes()) {
            if self.outcome == RunOutcome::Ok {
                self.outcome = RunOutcome::Failed {
                    reason: format!("write {}: {e}", stats_log.display()),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_whose_harness_lost_time_is_told_apart() {
        let timed = |planned, wall, stalled| RunRecord {
            planned_s: Some(planned),
            wall_s: Some(wall),
            stalled_s: Some(stalled),
            ..RunRecord::new("cubic", 1)
        };
        assert_eq!(timed(4.0, 4.05, 0.01).lost_time(), None);
        assert_eq!(RunRecord::new("cubic", 1).lost_time(), None);
        // SIGSTOPped for 8 s of a 4 s run.
        let why = timed(4.0, 9.0, 8.0).lost_time().unwrap();
        assert!(why.contains("did not run for 8.0 s"), "{why}");
        assert!(
            why.contains("9.0 s of wall-clock time for its planned 4.0 s"),
            "{why}"
        );
        // Over its time without a measured stall (stopped while not asleep) counts too…
        assert!(timed(4.0, 6.0, 0.0).lost_time().is_some());
        // …and the limit grows with the run: 1.2 s of a 60 s run is within 5 %.
        assert_eq!(timed(60.0, 61.2, 1.2).lost_time(), None);
        assert!(timed(60.0, 64.0, 3.5).lost_time().is_some());
    }

    #[test]
    fn run_records_are_added_or_replaced_and_never_dropped() {
        let dir = std::env::temp_dir().join(format!("pt-runs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(RunRecord::read_all(&dir).unwrap().is_empty());
        let mut first = RunRecord::new("cubic", 1);
        first.outcome = RunOutcome::Failed {
            reason: "sender exited early".into(),
        };
        first.append_to(&dir).unwrap();
        RunRecord::new("bbr", 1).append_to(&dir).unwrap();
        // The same run again (a retry) replaces its record, keeps the other.
        let mut retry = RunRecord::new("cubic", 1);
        retry.notes.push("fq qdisc installed".into());
        retry.append_to(&dir).unwrap();
        let all = RunRecord::read_all(&dir).unwrap();
        assert_eq!(all.len(), 2);
        let cubic = all.iter().find(|r| r.scheme == "cubic").unwrap();
        assert_eq!(cubic.outcome, RunOutcome::Ok);
        assert_eq!(cubic.notes, ["fq qdisc installed"]);
        // The file keeps Pantheon-style keys: `status`, `reason` beside the rest.
        let text = std::fs::read_to_string(dir.join(RUNS_FILE)).unwrap();
        assert!(text.contains("\"status\": \"ok\""), "{text}");
        // A file that cannot be read as records is an error, and is left as it was.
        std::fs::write(dir.join(RUNS_FILE), "[{\"scheme\": ").unwrap();
        let e = RunRecord::new("vegas", 1).append_to(&dir).unwrap_err();
        assert!(format!("{e:#}").contains("pantheon_runs.json"), "{e:#}");
        assert_eq!(
            std::fs::read_to_string(dir.join(RUNS_FILE)).unwrap(),
            "[{\"scheme\": "
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
