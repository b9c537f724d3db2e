//! `pantheon compare A B`: reads two results directories' `pantheon_perf.json` (analysing a
//! directory first if it has none) and prints [`analyzer::compare`]'s table, or JSON.

use std::collections::BTreeMap;
use std::path::Path;

use analyzer::compare::{compare, to_text, Comparison, SchemeRuns};
use anyhow::{bail, Context};
use serde::Deserialize;

use crate::provenance::Day;
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

/// Compares results directories (or tables) `a` and `b`, each side's scheme names read as
/// Pantheon's schemes of `era` ([`as_pantheon_ran`]), so that a directory of Pantheon's own runs
/// naming `copa` is compared with our `copa_orig`.
pub fn compare_dirs(
    a: &Path,
    b: &Path,
    registry: &Registry,
    era: Option<Day>,
) -> anyhow::Result<Comparison> {
    let read = |p: &Path| -> anyhow::Result<_> {
        Ok(as_pantheon_ran(load_runs(p, registry)?, registry, era))
    };
    Ok(compare(&read(a)?, &read(b)?))
}

/// `runs` under the names [`Registry::read_as_of`] gives for `era`: with a day, each of
/// Pantheon's names becomes the scheme here that ran as Pantheon's that day; without one, only
/// a Pantheon name no scheme here carries is read, as of the seed reports' era (`copa` →
/// `copa_orig`, `default_tcp` → `cubic`). A name with no scheme of its era stays as it is; two
/// names that become one keep the runs of both.
pub fn as_pantheon_ran(
    runs: BTreeMap<String, SchemeRuns>,
    registry: &Registry,
    era: Option<Day>,
) -> BTreeMap<String, SchemeRuns> {
    let names: Vec<String> = runs.keys().cloned().collect();
    let mut read = BTreeMap::<String, SchemeRuns>::new();
    for ((asked, ours), (_, r)) in registry.read_as_of(&names, era).into_iter().zip(runs) {
        let into = read.entry(ours.unwrap_or(asked)).or_default();
        into.tput_mbps.extend(r.tput_mbps);
        into.delay_ms.extend(r.delay_ms);
        into.loss_pct.extend(r.loss_pct);
    }
    read
}

/// The comparison as text, headed by the two directories.
pub fn render(a: &Path, b: &Path, c: &Comparison) -> String {
    format!("1: {}\n2: {}\n\n{}", a.display(), b.display(), to_text(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 55: a table of Pantheon's runs names Pantheon's schemes (2017's `copa` and
    /// `default_tcp`); compared with ours they meet our `copa_orig` and `cubic`, read as of the
    /// seed reports' era by default and as of a day when one is given.
    #[test]
    fn pantheon_s_names_meet_ours_in_a_comparison() {
        let dir = tempfile::tempdir().unwrap();
        let table = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let theirs = table(
            "pantheon.csv",
            "scheme,tput_mbps,delay_ms\ncopa,8.0,40\ndefault_tcp,9.0,300\nvivace,8.5,40\n",
        );
        let ours = table(
            "ours.csv",
            "scheme,tput_mbps,delay_ms\ncopa_orig,9.6,42\ncubic,9.9,2000\nvivace,8.8,39\n",
        );
        let registry = Registry::load(None).unwrap();
        let schemes = |c: &Comparison| {
            let mut s: Vec<String> = c.rows.iter().map(|r| r.scheme.clone()).collect();
            s.dedup();
            s
        };
        let c = compare_dirs(&theirs, &ours, &registry, None).unwrap();
        assert_eq!(schemes(&c), ["copa_orig", "cubic", "vivace"]);
        assert!(c.only_in_a.is_empty() && c.only_in_b.is_empty(), "{c:?}");
        // As of seed 001's day Vivace was not Pantheon's yet: its name stays, on both sides.
        let c = compare_dirs(&theirs, &ours, &registry, Some(Day::SEEDS)).unwrap();
        assert_eq!(schemes(&c), ["copa_orig", "cubic", "vivace"]);
        let merged = as_pantheon_ran(
            crate::compare::load_runs(
                &table(
                    "both.csv",
                    "scheme,tput_mbps,delay_ms\ndefault_tcp,1,2\ncubic,3,4\n",
                ),
                &registry,
            )
            .unwrap(),
            &registry,
            None,
        );
        assert_eq!(merged["cubic"].tput_mbps.len(), 2, "{merged:?}");
    }
}
