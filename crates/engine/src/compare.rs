//! `pantheon compare A B`: reads two results directories' `pantheon_perf.json` (analysing a
//! directory first if it has none) and prints [`analyzer::compare`]'s table, or JSON.

use std::collections::BTreeMap;
use std::path::Path;

use analyzer::compare::{compare, to_text, Comparison, SchemeRuns};
use anyhow::{bail, Context};
use serde::Deserialize;

use crate::schemes::Registry;

/// Per-scheme run totals of a results directory ([`crate::analyze::perf_runs`]); or, for a
/// file, the medians of a target table ([`load_table`]: a real path known only from its
/// report).
pub fn load_runs(dir: &Path, registry: &Registry) -> anyhow::Result<BTreeMap<String, SchemeRuns>> {
    if dir.is_file() {
        return Ok(table_runs(&load_table(dir)?));
    }
    crate::analyze::perf_runs(dir, registry)
}

/// One row of a target table: `scheme`, median throughput `tput_mbps` (Mbit/s), median p95
/// one-way delay `delay_ms`, and optionally `loss_pct` (percent) and `runs`.
#[derive(Debug, Deserialize)]
pub struct TableRow {
    /// Scheme name.
    pub scheme: String,
    /// Median throughput, Mbit/s.
    pub tput_mbps: f64,
    /// Median 95th-percentile one-way delay, ms.
    pub delay_ms: f64,
    /// Median loss rate, percent.
    #[serde(default)]
    pub loss_pct: Option<f64>,
    /// Runs the medians are of (informative).
    #[serde(default)]
    pub runs: Option<u32>,
}

/// Reads a table of per-scheme figures — `*.csv` with a header line naming the columns
/// `scheme, tput_mbps, delay_ms[, loss_pct, runs]` (`#` comments), or `*.json`, an array of
/// objects with those keys. Errors name the file (and the line for CSV); a table without rows,
/// or with a throughput or delay that is not positive, is an error.
pub fn load_table(path: &Path) -> anyhow::Result<Vec<TableRow>> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("read {source}"))?;
    let rows: Vec<TableRow> = match path.extension().and_then(|e| e.to_str()) {
        Some("csv") => {
            let mut rd = csv::ReaderBuilder::new()
                .trim(csv::Trim::All)
                .comment(Some(b'#'))
                .from_reader(text.as_bytes());
            let mut rows = Vec::new();
            for r in rd.deserialize() {
                rows.push(r.map_err(|e| {
                    let line = e.position().map_or(0, |p| p.line());
                    anyhow::anyhow!("{source} line {line}: {e}")
                })?);
            }
            rows
        }
        Some("json") => serde_json::from_str(&text).with_context(|| {
            format!("{source}: expected a JSON array of {{scheme, tput_mbps, delay_ms, …}}")
        })?,
        _ => bail!("{source}: a target is a results directory, a .csv or a .json table"),
    };
    if rows.is_empty() {
        bail!("{source}: no schemes");
    }
    if let Some(r) = rows
        .iter()
        .find(|r| !(r.tput_mbps > 0.0 && r.delay_ms > 0.0))
    {
        bail!(
            "{source}: {}: throughput and delay must be positive",
            r.scheme
        );
    }
    Ok(rows)
}

/// A table's rows as one-run figures per scheme.
pub fn table_runs(rows: &[TableRow]) -> BTreeMap<String, SchemeRuns> {
    rows.iter()
        .map(|r| {
            let runs = SchemeRuns {
                tput_mbps: vec![r.tput_mbps],
                delay_ms: vec![r.delay_ms],
                loss_pct: r.loss_pct.into_iter().collect(),
            };
            (r.scheme.clone(), runs)
        })
        .collect()
}

/// Compares results directories `a` and `b`.
pub fn compare_dirs(a: &Path, b: &Path, registry: &Registry) -> anyhow::Result<Comparison> {
    Ok(compare(&load_runs(a, registry)?, &load_runs(b, registry)?))
}

/// The comparison as text, headed by the two directories.
pub fn render(a: &Path, b: &Path, c: &Comparison) -> String {
    format!("1: {}\n2: {}\n\n{}", a.display(), b.display(), to_text(c))
}
