//! `pantheon schemes check`: each scheme as Pantheon's CI checked them — first over loopback
//! (both sides in a namespace of their own), then through a short emulated run (10 Mbit/s both
//! ways, `mm-delay 28`, through the tunnel, as a real experiment) — with a verdict that says
//! precisely what is wrong when one fails: not runnable here (and why), a run failed (which side
//! exited, with its status and last output), or it ran but moved (almost) nothing.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use emucal::emulator::Emulator;
use emucal::mm::{LinkShell, Shell};

use crate::plan::{write_constant_trace, ExperimentPlan};
use crate::record::RunOutcome;
use crate::runner::{loopback_run, run_scheme_once};
use crate::schemes::{Registry, Scheme, SystemInfo};

/// Least average throughput, Mbit/s, that counts as "the scheme sends" over the 10 Mbit/s path.
pub const MIN_MBPS: f64 = 1.0;
/// Least average rate over loopback, Mbit/s. Loopback runs kernel TCP and QUIC at Gbit/s, but
/// libutp's LEDBAT reaches only 13–30 Mbit/s there in the first seconds (it grows its window by
/// at most 3000 bytes per RTT) and PCC-Allegro 4 Mbit/s in 5 s (9 in 10: its UDT sender starts
/// slowly): the bar is "it sends", not "it is fast".
pub const MIN_LOOPBACK_MBPS: f64 = 2.0;

/// The least average rate that passes `scheme`, Mbit/s, where a full-throttle scheme must
/// reach `full_throttle` ([`MIN_LOOPBACK_MBPS`], [`MIN_MBPS`]): that, or a quarter of an
/// application-limited scheme's ceiling if lower (WebRTC media, 2.5 Mbit/s: 0.625; its
/// controller starts at 300 kbit/s and grows about 8 % a second, so a 5-s run averages ~1).
pub fn bar_mbps(scheme: &Scheme, full_throttle: f64) -> f64 {
    scheme
        .app_limited_mbps
        .map_or(full_throttle, |c| full_throttle.min(c / 4.0))
}

/// One scheme's verdict.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Verdict {
    /// Scheme name.
    pub scheme: String,
    /// Passed.
    pub ok: bool,
    /// What was measured, or what is wrong.
    pub detail: String,
}

/// Checks `names` (all runnable schemes if empty) with runs of `runtime` in a scratch directory
/// under `work` (removed after); `tag` names the namespaces (`<tag>-<i>-*`).
pub fn check(
    registry: &Registry,
    names: &[String],
    runtime: Duration,
    work: &Path,
    tag: &str,
) -> anyhow::Result<Vec<Verdict>> {
    let sys = SystemInfo::probe();
    let names: Vec<String> = if names.is_empty() {
        registry.all().map(|s| s.name.clone()).collect()
    } else {
        names.to_vec()
    };
    let trace = work.join("10mbps.trace");
    write_constant_trace(&trace, 10.0)?;
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let scheme = registry.get(name)?;
        let verdict = |ok, detail| Verdict {
            scheme: name.clone(),
            ok,
            detail,
        };
        if let Some(why) = scheme.unavailable_reason(&sys) {
            out.push(verdict(false, format!("not runnable here: {why}")));
            continue;
        }
        let dir = work.join(name);
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let tag = format!("{tag}-{i}");
        let loopback_mbps = if scheme.loopback_check && scheme.guest.is_none() {
            match check_loopback(scheme, runtime, &dir, &tag) {
                Ok(mbps) => Some(mbps),
                Err(why) => {
                    out.push(verdict(false, why));
                    continue;
                }
            }
        } else {
            None
        };
        let plan = ExperimentPlan {
            schemes: vec![name.clone()],
            runtime,
            data_dir: dir.clone(),
            emulator: Some(Emulator::new(vec![
                Shell::Delay { ms: 28 },
                Shell::Link(Box::new(LinkShell::new(trace.clone(), trace.clone()))),
            ])),
            ..ExperimentPlan::default()
        };
        let (ok, detail) = check_emulated(&plan, registry, scheme, loopback_mbps, &tag)?;
        out.push(verdict(ok, detail));
    }
    Ok(out)
}

/// Both sides over loopback for `runtime`: the rate they reached, Mbit/s, or why that is not
/// enough (a side failed, or under [`bar_mbps`] of [`MIN_LOOPBACK_MBPS`]).
fn check_loopback(
    scheme: &Scheme,
    runtime: Duration,
    dir: &Path,
    tag: &str,
) -> Result<f64, String> {
    // The first side gets Pantheon's 3 s (`tests/test_schemes.py`: first side, sleep 3, second
    // side).
    match loopback_run(scheme, runtime, Duration::from_secs(3), dir, tag) {
        Ok(bytes) => {
            let mbps = bytes as f64 * 8.0 / runtime.as_secs_f64() / 1e6;
            let bar = bar_mbps(scheme, MIN_LOOPBACK_MBPS);
            if mbps < bar {
                Err(format!(
                    "over loopback it sent only {mbps:.1} Mbit/s (at least {bar} expected): is \
                     it full-throttle?"
                ))
            } else {
                Ok(mbps)
            }
        }
        Err(e) => Err(format!("its loopback run failed: {e:#}")),
    }
}

/// One run of `scheme` through `plan`'s emulated path: (passed, figures or what is wrong).
/// Errors only if interrupted or if the run's logs cannot be analysed.
fn check_emulated(
    plan: &ExperimentPlan,
    registry: &Registry,
    scheme: &Scheme,
    loopback_mbps: Option<f64>,
    tag: &str,
) -> anyhow::Result<(bool, String)> {
    let path = plan.validate(registry)?;
    let record = run_scheme_once(plan, &path, scheme, 1, tag, &|_| {});
    match &record.outcome {
        RunOutcome::Interrupted => anyhow::bail!("interrupted"),
        RunOutcome::Failed { reason } => Ok((false, format!("its run failed: {reason}"))),
        RunOutcome::Ok => {
            let frames = analyzer::ingest::read_run(&plan.data_dir, &scheme.name, 1)?;
            let s = frames.stats()?;
            let loopback = match (loopback_mbps, &scheme.guest) {
                (Some(m), _) => format!("loopback {m:.0} Mbit/s"),
                (None, Some(g)) => format!(
                    "loopback not run (its {} runs in a guest kernel)",
                    g.sides.join(" and ")
                ),
                (None, None) => "loopback not run (its sides cannot share a namespace)".to_owned(),
            };
            let figures = format!(
                "{loopback}; emulated {:.2} Mbit/s, p95 one-way delay {}, loss {:.2} %",
                s.total.tput_mbps,
                s.total
                    .p95_delay_ms
                    .map_or("N/A".to_owned(), |d| format!("{d:.1} ms")),
                s.total.loss * 100.0
            );
            let bar = bar_mbps(scheme, MIN_MBPS);
            Ok(if s.total.tput_mbps >= bar {
                (true, figures)
            } else {
                (
                    false,
                    format!(
                        "ran but sent too little over 10 Mbit/s + 28 ms ({figures}; at least \
                         {bar} Mbit/s expected): is it full-throttle?"
                    ),
                )
            })
        }
    }
}
