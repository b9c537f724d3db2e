//! Reading one run's packet logs into Polars frames.
//!
//! A run with *k* flows has, per flow, four binary logs named as Pantheon names its text logs:
//! `<scheme>_datalink_run<N>_flow<i>.egress.ptlog` (the sender side's egress: packets entering
//! the path), `…_datalink_run<N>_flow<i>.ingress.ptlog` (the receiver side's ingress: packets
//! leaving it) and the two `acklink` logs of the reverse direction. Timestamps of all logs of a
//! run are put on one axis: ms since the earliest log base, each log shifted by its own base
//! time and by its measured clock offset, as Pantheon's `merge_tunnel_logs.py` does.

use std::path::{Path, PathBuf};

use polars::prelude::*;
use tunnel::log::{read_log, LogFile};

/// Errors of ingest.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// A log could not be read at all.
    #[error(transparent)]
    Log(#[from] tunnel::log::ReadError),
    /// No datalink logs for this scheme and run.
    #[error("no datalink logs for {scheme} run {run} in {dir}")]
    Missing {
        /// Scheme name.
        scheme: String,
        /// Run id.
        run: u32,
        /// Results directory.
        dir: String,
    },
    /// Frame construction failed.
    #[error("polars: {0}")]
    Polars(#[from] PolarsError),
}

/// File name of one log: `<scheme>_<direction>_run<N>_flow<i>.<kind>.ptlog`.
pub fn log_name(scheme: &str, direction: &str, run: u32, flow: u16, kind: &str) -> String {
    format!("{scheme}_{direction}_run{run}_flow{flow}.{kind}.ptlog")
}

/// Datalink packets of one run: arrivals into the path and departures from it.
#[derive(Debug, Clone)]
pub struct RunFrames {
    /// Columns `flow` (u32), `uid` (u64), `t_ms` (f64, ms since `init_ms`), `size` (u64, bytes).
    pub arrivals: DataFrame,
    /// Same columns, for packets received at the far end.
    pub departures: DataFrame,
    /// The run's common time origin: ms since the Unix epoch (Pantheon's "init timestamp").
    pub init_ms: f64,
    /// Problems worth showing (truncated logs, missing clock offsets…), never hidden.
    pub warnings: Vec<String>,
}

/// Finds the datalink (egress, ingress) log pairs of `scheme` run `run` in `dir`, by flow.
pub fn find_datalink_logs(dir: &Path, scheme: &str, run: u32) -> Vec<(u16, PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for flow in 1..=u16::MAX {
        let egress = dir.join(log_name(scheme, "datalink", run, flow, "egress"));
        let ingress = dir.join(log_name(scheme, "datalink", run, flow, "ingress"));
        if !egress.exists() && !ingress.exists() {
            break;
        }
        out.push((flow, egress, ingress));
    }
    out
}

/// Reads every datalink log of `scheme` run `run` in `dir` into [`RunFrames`].
pub fn read_run(dir: &Path, scheme: &str, run: u32) -> Result<RunFrames, IngestError> {
    let pairs = find_datalink_logs(dir, scheme, run);
    if pairs.is_empty() {
        return Err(IngestError::Missing {
            scheme: scheme.into(),
            run,
            dir: dir.display().to_string(),
        });
    }
    let mut warnings = Vec::new();
    let mut logs: Vec<(LogFile, bool)> = Vec::new();
    for (flow, egress, ingress) in &pairs {
        for (path, is_arrival) in [(egress, true), (ingress, false)] {
            if !path.exists() {
                warnings.push(format!("flow {flow}: {} is missing", path.display()));
                continue;
            }
            let log = read_log(path)?;
            if let Some(stop) = &log.stopped_at {
                warnings.push(format!(
                    "{}: read {} records, stopped at {stop}",
                    path.display(),
                    log.records.len()
                ));
            }
            logs.push((log, is_arrival));
        }
    }
    let corrected_base =
        |l: &LogFile| l.header.base_realtime_ns + l.header.clock_offset_ns.unwrap_or(0);
    let min_base = logs
        .iter()
        .map(|(l, _)| corrected_base(l))
        .min()
        .unwrap_or(0);
    let mut cols: [(Vec<u32>, Vec<u64>, Vec<f64>, Vec<u64>); 2] = Default::default();
    for (log, is_arrival) in &logs {
        let shift_ms = (corrected_base(log) - min_base) as f64 / 1e6;
        let c = &mut cols[usize::from(!is_arrival)];
        for r in &log.records {
            c.0.push(u32::from(r.flow));
            c.1.push(r.uid);
            c.2.push(shift_ms + r.t_ns as f64 / 1e6);
            c.3.push(u64::from(r.size));
        }
    }
    let [a, d] = cols;
    Ok(RunFrames {
        arrivals: packets_frame(a.0, a.1, a.2, a.3)?,
        departures: packets_frame(d.0, d.1, d.2, d.3)?,
        init_ms: min_base as f64 / 1e6,
        warnings,
    })
}

/// A packet frame from columns (flow, uid, t_ms, size).
pub fn packets_frame(
    flow: Vec<u32>,
    uid: Vec<u64>,
    t_ms: Vec<f64>,
    size: Vec<u64>,
) -> PolarsResult<DataFrame> {
    df!("flow" => flow, "uid" => uid, "t_ms" => t_ms, "size" => size)
}
