//! `pantheon compare A B`: reads two results directories' `pantheon_perf.json` (analysing a
//! directory first if it has none) and prints [`analyzer::compare`]'s table, or JSON.

use std::collections::BTreeMap;
use std::path::Path;

use analyzer::compare::{compare, to_text, Comparison, SchemeRuns};
use anyhow::{bail, Context};
use serde_json::Value;

use crate::schemes::Registry;

/// Per-scheme run totals of a results directory, from `pantheon_perf.json`
/// (`{scheme: {run: {"all": {"tput", "delay", "loss"}}}}`, loss a fraction as Pantheon writes
/// it; converted to percent here); or, for a file, the medians of a target table
/// ([`crate::calibrate::load_target`]: a real path known only from its report).
pub fn load_runs(dir: &Path, registry: &Registry) -> anyhow::Result<BTreeMap<String, SchemeRuns>> {
    if dir.is_file() {
        return Ok(crate::calibrate::load_target(dir, registry)?.schemes);
    }
    let perf_path = dir.join("pantheon_perf.json");
    if !perf_path.exists() {
        if !dir.join("pantheon_metadata.json").exists() {
            bail!(
                "{}: neither pantheon_perf.json nor pantheon_metadata.json: not a results \
                 directory",
                dir.display()
            );
        }
        crate::analyze::analyze_dir(dir, registry)
            .with_context(|| format!("analyse {}", dir.display()))?;
    }
    let perf: Value = serde_json::from_str(
        &std::fs::read_to_string(&perf_path)
            .with_context(|| format!("read {}", perf_path.display()))?,
    )
    .with_context(|| format!("parse {}", perf_path.display()))?;
    let Some(schemes) = perf.as_object() else {
        bail!("{}: not a JSON object of schemes", perf_path.display());
    };
    let mut out = BTreeMap::new();
    for (scheme, runs) in schemes {
        let mut r = SchemeRuns::default();
        for run in runs.as_object().into_iter().flat_map(|m| m.values()) {
            let all = &run["all"];
            if let (Some(t), Some(d), Some(l)) = (
                all["tput"].as_f64(),
                all["delay"].as_f64(),
                all["loss"].as_f64(),
            ) {
                r.tput_mbps.push(t);
                r.delay_ms.push(d);
                r.loss_pct.push(l * 100.0);
            }
        }
        out.insert(scheme.clone(), r);
    }
    Ok(out)
}

/// Compares results directories `a` and `b`.
pub fn compare_dirs(a: &Path, b: &Path, registry: &Registry) -> anyhow::Result<Comparison> {
    Ok(compare(&load_runs(a, registry)?, &load_runs(b, registry)?))
}

/// The comparison as text, headed by the two directories.
pub fn render(a: &Path, b: &Path, c: &Comparison) -> String {
    format!("1: {}\n2: {}\n\n{}", a.display(), b.display(), to_text(c))
}
