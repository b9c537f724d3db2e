//! From the points' results to one tidy table — one row per (environment, mix, run, flow) —
//! and what is computed across points: the solo baselines, each flow's throughput ratio and
//! harm against them, the per-pair summary, the heatmaps' grids. Pure functions over the rows;
//! reading `pantheon_perf.json` is the only I/O.

use std::collections::BTreeMap;
use std::path::Path;

use analyzer::compare::{bootstrap_mean_interval, mean_interval, MeanInterval};
use analyzer::competition::{harm, throughput_ratio, Better};
use analyzer::perf::{Perf, RunPerf, TransferCounts};

use crate::plan::{Point, SweepPlan};
use crate::point::{point_dir, record};

/// Throughput ratio at or above which a primary is taken to be unharmed (seed 002's 0.9).
pub const UNHARMED_RATIO: f64 = 0.9;

/// What a point's mix is to the sweep, as the rows of its flows say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RowKind {
    /// A primary scheme against a contender (`primaries × contenders`): the pair whose
    /// throughput ratio and harm are computed against each scheme alone.
    Pair,
    /// A mix of the file's `list`.
    #[default]
    List,
    /// One scheme alone over the environment (the reference of ratios and harm).
    Solo,
}

impl RowKind {
    /// `pair`, `list` or `solo`: the table's `kind` column.
    pub fn name(self) -> &'static str {
        match self {
            RowKind::Pair => "pair",
            RowKind::List => "list",
            RowKind::Solo => "solo",
        }
    }
}

/// One flow of one run of one point.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Row {
    /// The point's id.
    pub point: u32,
    /// The environment's label.
    pub env: String,
    /// Link rate, Mbit/s (grid environments).
    pub rate_mbps: Option<f64>,
    /// Minimum RTT, ms.
    pub rtt_ms: Option<f64>,
    /// Buffer, BDPs.
    pub buffer_bdp: Option<f64>,
    /// Buffer, packets.
    pub buffer_packets: Option<f64>,
    /// Uplink loss rate of the emulator.
    pub loss_rate: Option<f64>,
    /// The named emulator.
    pub emulator: Option<String>,
    /// The mix (`--mix` form).
    pub mix: String,
    /// What the point's mix is to the sweep (column `kind`: `pair`, `list` or `solo`).
    pub kind: RowKind,
    /// The pair's primary scheme.
    pub primary: Option<String>,
    /// The pair's contender.
    pub contender: Option<String>,
    /// The run (from 1).
    pub run: u32,
    /// The flow (from 1).
    pub flow: u32,
    /// Its scheme.
    pub scheme: String,
    /// When it started, s after the run's start (asked).
    pub start_s: f64,
    /// Its extra one-way delay, ms.
    pub extra_delay_ms: f64,
    /// Throughput over its own active interval, Mbit/s.
    pub tput_mbps: Option<f64>,
    /// 95th-percentile one-way delay, ms.
    pub p95_delay_ms: Option<f64>,
    /// Loss rate, 0–1.
    pub loss: Option<f64>,
    /// Throughput while every flow of the run was active, Mbit/s.
    pub tput_all_active_mbps: Option<f64>,
    /// Throughput ÷ its scheme's solo throughput in this environment (median of solo runs).
    pub tput_ratio: Option<f64>,
    /// (solo − competing) ÷ solo throughput.
    pub tput_harm: Option<f64>,
    /// (competing − solo) ÷ competing p95 one-way delay.
    pub delay_harm: Option<f64>,
    /// Jain's index of the run while all flows were active.
    pub jain: Option<f64>,
    /// Time until the per-second Jain's index stays ≥ 0.9, s.
    pub convergence_s: Option<f64>,
    /// The flow's workload (`bytes=…`, `poisson,…`, `page,…`); `None`: full throttle
    /// (`docs/workloads.md`).
    pub workload: Option<String>,
    /// Transfers the flow's sender started (workload flows).
    pub transfers_started: Option<f64>,
    /// Transfers done.
    pub transfers_completed: Option<f64>,
    /// Transfers still going at the run's end.
    pub transfers_unfinished: Option<f64>,
    /// Median flow completion time, ms.
    pub fct_p50_ms: Option<f64>,
    /// 95th-percentile FCT, ms.
    pub fct_p95_ms: Option<f64>,
    /// 99th-percentile FCT, ms.
    pub fct_p99_ms: Option<f64>,
    /// Median slowdown (FCT ÷ ideal FCT).
    pub slowdown_p50: Option<f64>,
    /// 95th-percentile slowdown.
    pub slowdown_p95: Option<f64>,
    /// Median page load time, ms.
    pub page_load_p50_ms: Option<f64>,
    /// 95th-percentile page load time, ms.
    pub page_load_p95_ms: Option<f64>,
    /// Every page load time of the flow, ms (for the CDF; not a column).
    pub page_load_ms: Vec<f64>,
}

/// Run `run` of one point's [`Perf`] (its one scheme or mix); `None` if the run is missing or
/// invalid.
fn run_entry(perf: &Perf, run: u32) -> Option<&RunPerf> {
    let (_, by_run) = perf.schemes.iter().next()?;
    by_run.get(&run).filter(|r| r.valid)
}

/// The rows of point `p` from its perf file, before baselines.
pub fn point_rows(plan: &SweepPlan, p: &Point, perf: &Perf) -> Vec<Row> {
    let Some(run) = run_entry(perf, p.run) else {
        return Vec::new();
    };
    let env = &plan.environments[p.env];
    let sorted = |l: &[f64]| {
        let mut l = l.to_vec();
        l.sort_by(f64::total_cmp);
        l
    };
    let pct = |sorted: &[f64], q: f64| analyzer::stats::percentile(sorted, q);
    let competition = run.competition.as_ref();
    run.flows
        .iter()
        .map(|(&flow, f)| {
            let competing = f.competing.as_ref();
            let work = f.work.as_ref();
            let fct_ms = sorted(work.map_or(&[][..], |w| &w.fct_ms));
            let slowdown = sorted(work.map_or(&[][..], |w| &w.slowdown));
            let page_load_ms = sorted(
                work.and_then(|w| w.page_load_ms.as_deref())
                    .unwrap_or_default(),
            );
            let transfers = |n: fn(&TransferCounts) -> u64| work.map(|w| n(&w.transfers) as f64);
            Row {
                point: p.id,
                env: env.label(),
                rate_mbps: env.rate_mbps,
                rtt_ms: env.rtt_ms.map(f64::from),
                buffer_bdp: env.buffer_bdp,
                buffer_packets: env.buffer_packets.map(f64::from),
                loss_rate: env.emulator.is_none().then_some(env.loss),
                emulator: env.emulator.clone(),
                mix: p.mix.clone(),
                kind: match (p.solo, &p.primary) {
                    (true, _) => RowKind::Solo,
                    (false, Some(_)) => RowKind::Pair,
                    (false, None) => RowKind::List,
                },
                primary: p.primary.clone(),
                contender: p.contender.clone(),
                run: p.run,
                flow,
                scheme: competing.map_or_else(|| p.mix.clone(), |c| c.scheme.clone()),
                start_s: competing.map_or(0.0, |c| c.start),
                extra_delay_ms: competing.map_or(0.0, |c| c.extra_delay),
                tput_mbps: f.tput,
                p95_delay_ms: f.delay,
                loss: f.loss,
                tput_all_active_mbps: competition
                    .and_then(|c| c.tput_all_active.get(flow as usize - 1))
                    .copied()
                    .flatten(),
                jain: competition.and_then(|c| c.jain),
                convergence_s: competition.and_then(|c| c.convergence_time),
                workload: work.map(|w| w.workload.clone()),
                transfers_started: transfers(|t| t.started),
                transfers_completed: transfers(|t| t.completed),
                transfers_unfinished: transfers(|t| t.unfinished),
                fct_p50_ms: pct(&fct_ms, 0.5),
                fct_p95_ms: pct(&fct_ms, 0.95),
                fct_p99_ms: pct(&fct_ms, 0.99),
                slowdown_p50: pct(&slowdown, 0.5),
                slowdown_p95: pct(&slowdown, 0.95),
                page_load_p50_ms: pct(&page_load_ms, 0.5),
                page_load_p95_ms: pct(&page_load_ms, 0.95),
                page_load_ms,
                ..Row::default()
            }
        })
        .collect()
}

fn median(v: Vec<f64>) -> Option<f64> {
    analyzer::stats::median(&v)
}

/// Each flow's throughput ratio and harm against its scheme's solo runs in the same
/// environment (medians of their throughput and p95 one-way delay); flows without a solo
/// baseline keep `None`.
pub fn add_baselines(rows: &mut [Row]) {
    let mut solo: BTreeMap<(String, String), (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.kind == RowKind::Solo) {
        let e = solo.entry((r.env.clone(), r.scheme.clone())).or_default();
        e.0.extend(r.tput_mbps);
        e.1.extend(r.p95_delay_ms);
    }
    let solo: BTreeMap<_, _> = solo
        .into_iter()
        .map(|(k, (t, d))| (k, (median(t), median(d))))
        .collect();
    for r in rows.iter_mut().filter(|r| r.kind != RowKind::Solo) {
        let Some(&(tput, delay)) = solo.get(&(r.env.clone(), r.scheme.clone())) else {
            continue;
        };
        if let (Some(s), Some(c)) = (tput, r.tput_mbps) {
            r.tput_ratio = throughput_ratio(c, s);
            r.tput_harm = harm(s, c, Better::More);
        }
        if let (Some(s), Some(c)) = (delay, r.p95_delay_ms) {
            r.delay_harm = harm(s, c, Better::Less);
        }
    }
}

/// Reads every finished point's rows from the sweep in `dir`, baselines added.
pub fn collect(dir: &Path, plan: &SweepPlan) -> Vec<Row> {
    let mut rows = Vec::new();
    for p in &plan.points {
        if !record(dir, p.id).is_some_and(|r| r.ok()) {
            continue;
        }
        let Ok(perf) = Perf::read(&point_dir(dir, p.id).join("results")) else {
            continue;
        };
        rows.extend(point_rows(plan, p, &perf));
    }
    add_baselines(&mut rows);
    rows
}

/// One (primary, contender) pair across the sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct PairSummary {
    /// The primary scheme.
    pub primary: String,
    /// The contender.
    pub contender: String,
    /// The primary's throughput ratio in each environment (median over runs), by label.
    pub ratios: Vec<(String, f64)>,
}

impl PairSummary {
    /// The median of the environments' ratios.
    pub fn median_ratio(&self) -> Option<f64> {
        median(self.ratios.iter().map(|r| r.1).collect())
    }

    /// The share of environments where the ratio is ≥ [`UNHARMED_RATIO`].
    pub fn share_unharmed(&self) -> Option<f64> {
        let n = self.ratios.len();
        (n > 0)
            .then(|| self.ratios.iter().filter(|r| r.1 >= UNHARMED_RATIO).count() as f64 / n as f64)
    }
}

/// Per (primary, contender) pair, in order of first appearance: flow 1's throughput ratio per
/// environment.
pub fn pairs(rows: &[Row]) -> Vec<PairSummary> {
    let mut by: Vec<((String, String), BTreeMap<String, Vec<f64>>)> = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r.kind == RowKind::Pair && r.flow == 1)
    {
        let (Some(p), Some(c), Some(ratio)) = (&r.primary, &r.contender, r.tput_ratio) else {
            continue;
        };
        group(&mut by, (p.clone(), c.clone()))
            .entry(r.env.clone())
            .or_default()
            .push(ratio);
    }
    by.into_iter()
        .map(|((primary, contender), envs)| PairSummary {
            primary,
            contender,
            ratios: envs
                .into_iter()
                .filter_map(|(env, v)| Some((env, median(v)?)))
                .collect(),
        })
        .collect()
}

/// One scheme run alone (a one-flow mix, or a pair's solo baseline) in one environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Alone {
    /// The scheme.
    pub scheme: String,
    /// Each run's (p95 one-way delay ms, throughput Mbit/s), as Pantheon's summary plot.
    pub runs: Vec<(f64, f64)>,
    /// Whether its mean point is on the environment's throughput–delay frontier
    /// ([`on_frontier`]) among the schemes alone there.
    pub frontier: bool,
}

impl Alone {
    /// The mean of its runs: (p95 one-way delay ms, throughput Mbit/s).
    pub fn mean(&self) -> (f64, f64) {
        let n = self.runs.len().max(1) as f64;
        let (d, t) = self
            .runs
            .iter()
            .fold((0.0, 0.0), |(d, t), r| (d + r.0, t + r.1));
        (d / n, t / n)
    }
}

/// Which of `points` — (delay, throughput) — are on the frontier: no other point has at
/// least the throughput at no more delay and is better in one of them (the Pareto front that
/// Pantheon's Figures 6 and 7 ask a scheme to be on).
pub fn on_frontier(points: &[(f64, f64)]) -> Vec<bool> {
    points
        .iter()
        .map(|&(d, t)| {
            !points
                .iter()
                .any(|&(d2, t2)| t2 >= t && d2 <= d && (t2 > t || d2 < d))
        })
        .collect()
}

/// Per environment (in order of first appearance), the schemes run alone there with their
/// runs (those with a throughput and a delay) and whether each is on the frontier: the data of
/// Pantheon's throughput–delay plot per environment.
pub fn alone(rows: &[Row]) -> Vec<(String, Vec<Alone>)> {
    let mut flows: BTreeMap<u32, usize> = BTreeMap::new();
    for r in rows {
        *flows.entry(r.point).or_default() += 1;
    }
    // Environment → scheme → runs, each in order of first appearance.
    let mut by: Vec<(String, Vec<(String, Vec<(f64, f64)>)>)> = Vec::new();
    for r in rows.iter().filter(|r| flows[&r.point] == 1) {
        if let (Some(d), Some(t)) = (r.p95_delay_ms, r.tput_mbps) {
            group(group(&mut by, r.env.clone()), r.scheme.clone()).push((d, t));
        }
    }
    by.into_iter()
        .map(|(env, schemes)| {
            let mut alone: Vec<Alone> = schemes
                .into_iter()
                .map(|(scheme, runs)| Alone {
                    scheme,
                    runs,
                    frontier: false,
                })
                .collect();
            let means: Vec<(f64, f64)> = alone.iter().map(Alone::mean).collect();
            for (a, f) in alone.iter_mut().zip(on_frontier(&means)) {
                a.frontier = f;
            }
            (env, alone)
        })
        .collect()
}

/// One flow of one (environment, mix) point over its runs (issue 54: a sweep that repeats a
/// point, `runs = N`, gives each figure's 95 % confidence interval, not one run's number).
#[derive(Debug, Clone, PartialEq)]
pub struct MeanRow {
    /// The environment's label.
    pub env: String,
    /// The mix (`--mix` form).
    pub mix: String,
    /// What the mix is to the sweep.
    pub kind: RowKind,
    /// The flow (from 1).
    pub flow: u32,
    /// Its scheme.
    pub scheme: String,
    /// Runs of the point with a row for this flow.
    pub runs: usize,
    /// Throughput over the flow's active interval, Mbit/s.
    pub tput_mbps: Option<MeanInterval>,
    /// 95th-percentile one-way delay, ms.
    pub p95_delay_ms: Option<MeanInterval>,
    /// Loss rate, 0–1.
    pub loss: Option<MeanInterval>,
    /// Throughput ratio against the scheme alone (pairs).
    pub tput_ratio: Option<MeanInterval>,
}

/// Per (environment, mix, flow), in order of first appearance, the means over the runs of the
/// flow's throughput, p95 one-way delay, loss and throughput ratio, each with its 95 %
/// confidence interval (none under 3 runs): Student's t for throughput and loss
/// ([`analyzer::compare::mean_interval`]), the percentile bootstrap for the skewed p95 delay
/// and ratio ([`analyzer::compare::bootstrap_mean_interval`]), as the summary's table.
pub fn means(rows: &[Row]) -> Vec<MeanRow> {
    let mut by: Vec<((&str, &str, u32), Vec<&Row>)> = Vec::new();
    for r in rows {
        group(&mut by, (r.env.as_str(), r.mix.as_str(), r.flow)).push(r);
    }
    by.into_iter()
        .map(|((env, mix, flow), runs)| {
            let values = |get: fn(&Row) -> Option<f64>| -> Vec<f64> {
                runs.iter().filter_map(|r| get(r)).collect()
            };
            MeanRow {
                env: env.to_owned(),
                mix: mix.to_owned(),
                kind: runs[0].kind,
                flow,
                scheme: runs[0].scheme.clone(),
                runs: runs.len(),
                tput_mbps: mean_interval(&values(|r| r.tput_mbps)),
                p95_delay_ms: bootstrap_mean_interval(&values(|r| r.p95_delay_ms)),
                loss: mean_interval(&values(|r| r.loss)),
                tput_ratio: bootstrap_mean_interval(&values(|r| r.tput_ratio)),
            }
        })
        .collect()
}

/// The value of `key` in `groups` (kept in order of first appearance), added empty if new.
pub(crate) fn group<K: PartialEq, V: Default>(groups: &mut Vec<(K, V)>, key: K) -> &mut V {
    let i = match groups.iter().position(|(k, _)| *k == key) {
        Some(i) => i,
        None => {
            groups.push((key, V::default()));
            groups.len() - 1
        }
    };
    &mut groups[i].1
}

/// The value `value` ([`crate::file::HEATMAP_VALUES`]) of a row: the run's Jain's index, or
/// the flow's ratio or harm.
fn value(r: &Row, value: &str) -> Option<f64> {
    match value {
        "jain" => r.jain,
        "tput_ratio" => r.tput_ratio,
        "tput_harm" => r.tput_harm,
        "delay_harm" => r.delay_harm,
        _ => None,
    }
}

/// A heatmap's grid for one mix: the sorted `x` and `y` axis values and, per cell, the median
/// of flow 1's `value` over the runs and the other axes (`None`: no data).
pub type Grid = (Vec<f64>, Vec<f64>, Vec<Vec<Option<f64>>>);

/// The heatmap grid of `mix` over axes `x` and `y` ([`crate::file::AXES`]).
pub fn grid(rows: &[Row], mix: &str, x: &str, y: &str, v: &str) -> Grid {
    let axis = |r: &Row, a: &str| match a {
        "rate_mbps" => r.rate_mbps,
        "rtt_ms" => r.rtt_ms,
        "buffer_bdp" => r.buffer_bdp,
        "buffer_packets" => r.buffer_packets,
        "loss" => r.loss_rate,
        _ => None,
    };
    let cells: Vec<(f64, f64, f64)> = rows
        .iter()
        .filter(|r| r.mix == mix && r.flow == 1)
        .filter_map(|r| Some((axis(r, x)?, axis(r, y)?, value(r, v)?)))
        .collect();
    let sorted = |f: fn(&(f64, f64, f64)) -> f64| {
        let mut v: Vec<f64> = cells.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    };
    let (xs, ys) = (sorted(|c| c.0), sorted(|c| c.1));
    let values = ys
        .iter()
        .map(|&yv| {
            xs.iter()
                .map(|&xv| {
                    median(
                        cells
                            .iter()
                            .filter(|c| c.0 == xv && c.1 == yv)
                            .map(|c| c.2)
                            .collect(),
                    )
                })
                .collect()
        })
        .collect();
    (xs, ys, values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(env: &str, kind: &str, mix: &str, flow: u32, scheme: &str, tput: f64) -> Row {
        let pair = kind == "pair";
        let kind = [RowKind::Pair, RowKind::List, RowKind::Solo]
            .into_iter()
            .find(|k| k.name() == kind)
            .expect("a row kind");
        Row {
            env: env.into(),
            kind,
            mix: mix.into(),
            flow,
            scheme: scheme.into(),
            tput_mbps: Some(tput),
            p95_delay_ms: Some(if kind == RowKind::Solo { 50.0 } else { 100.0 }),
            primary: pair.then(|| "cubic".into()),
            contender: pair.then(|| "ledbat".into()),
            rate_mbps: Some(if env == "a" { 10.0 } else { 20.0 }),
            rtt_ms: Some(40.0),
            jain: Some(0.5),
            ..Row::default()
        }
    }

    #[test]
    fn means_give_each_flow_of_a_point_its_interval_over_the_runs() {
        // Three runs of env a's cubic: 8, 9, 10 Mbit/s → mean 9, SD 1, t(0.975, 2) = 4.3027 →
        // ± 2.484; two runs of env b's: a mean without an interval.
        let rows = [
            row("a", "solo", "cubic", 1, "cubic", 8.0),
            row("b", "solo", "cubic", 1, "cubic", 5.0),
            row("a", "solo", "cubic", 1, "cubic", 9.0),
            row("a", "solo", "cubic", 1, "cubic", 10.0),
            row("b", "solo", "cubic", 1, "cubic", 7.0),
        ];
        let m = means(&rows);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].env.as_str(), m[0].runs, m[0].flow), ("a", 3, 1));
        let t = m[0].tput_mbps.unwrap();
        assert_eq!(t.mean, 9.0);
        assert!((t.half_width.unwrap() - 4.302_652_7 / 3f64.sqrt()).abs() < 1e-6);
        // Equal delays: a zero-width interval (the bootstrap's); no ratio in a solo point.
        assert_eq!(m[0].p95_delay_ms.unwrap().bounds(), Some((50.0, 50.0)));
        assert_eq!(m[0].tput_ratio, None);
        assert_eq!(m[1].tput_mbps.unwrap().mean, 6.0);
        assert_eq!(m[1].tput_mbps.unwrap().half_width, None);
    }

    #[test]
    fn ratios_and_harm_against_the_median_solo_run_of_the_same_environment() {
        let mut rows = vec![
            row("a", "solo", "cubic", 1, "cubic", 8.0),
            row("a", "solo", "cubic", 1, "cubic", 10.0),
            row("a", "solo", "cubic", 1, "cubic", 12.0),
            row("b", "solo", "cubic", 1, "cubic", 20.0),
            row("a", "pair", "cubic ledbat", 1, "cubic", 9.0),
            row("a", "pair", "cubic ledbat", 2, "ledbat", 1.0),
            row("b", "pair", "cubic ledbat", 1, "cubic", 19.0),
            row("b", "pair", "cubic ledbat", 1, "cubic", 15.0),
        ];
        add_baselines(&mut rows);
        // Env a: solo median 10 → ratio 0.9, harm 0.1; delay 50 alone, 100 competing → 0.5.
        assert_eq!(rows[4].tput_ratio, Some(0.9));
        assert!((rows[4].tput_harm.unwrap() - 0.1).abs() < 1e-12);
        assert_eq!(rows[4].delay_harm, Some(0.5));
        // LEDBAT has no solo runs: no ratio.
        assert_eq!(rows[5].tput_ratio, None);
        assert_eq!(rows[6].tput_ratio, Some(0.95));
        assert_eq!(rows[0].tput_ratio, None, "solo rows get no ratio");
        let p = pairs(&rows);
        assert_eq!(p.len(), 1);
        assert_eq!(
            (p[0].primary.as_str(), p[0].contender.as_str()),
            ("cubic", "ledbat")
        );
        // Env b's runs: 0.95 and 0.75 → median 0.85; env a: 0.9.
        assert_eq!(p[0].ratios, [("a".into(), 0.9), ("b".into(), 0.85)]);
        assert!((p[0].median_ratio().unwrap() - 0.875).abs() < 1e-12);
        assert_eq!(p[0].share_unharmed(), Some(0.5));
    }

    #[test]
    fn the_frontier_and_the_schemes_alone_per_environment() {
        // (delay, tput): b dominates c (more throughput, less delay); a and b trade off; d
        // ties b's throughput at more delay.
        let pts = [(50.0, 5.0), (80.0, 9.0), (90.0, 8.0), (85.0, 9.0)];
        assert_eq!(on_frontier(&pts), [true, true, false, false]);
        let mut rows = vec![
            row("a", "list", "cubic", 1, "cubic", 8.0),
            row("a", "list", "cubic", 1, "cubic", 10.0),
            row("a", "list", "bbr", 1, "bbr", 7.0),
            row("b", "list", "bbr", 1, "bbr", 7.0),
            // A two-flow run is not a scheme alone.
            row("a", "pair", "cubic ledbat", 1, "cubic", 20.0),
            row("a", "pair", "cubic ledbat", 2, "ledbat", 1.0),
        ];
        for (i, r) in rows.iter_mut().enumerate() {
            r.point = i.min(4) as u32 + 1;
        }
        rows[2].p95_delay_ms = Some(40.0);
        let envs = alone(&rows);
        assert_eq!(envs.len(), 2);
        let (env, schemes) = &envs[0];
        assert_eq!(env, "a");
        assert_eq!(schemes.len(), 2, "{schemes:?}");
        assert_eq!(schemes[0].runs, [(100.0, 8.0), (100.0, 10.0)]);
        assert_eq!(schemes[0].mean(), (100.0, 9.0));
        // Cubic: more throughput; BBR: less delay — both on the frontier.
        assert!(schemes[0].frontier && schemes[1].frontier);
        assert_eq!(envs[1].1.len(), 1);
    }

    #[test]
    fn heatmap_grid_takes_the_median_per_cell() {
        let mut rows = vec![
            row("a", "pair", "cubic ledbat", 1, "cubic", 9.0),
            row("b", "pair", "cubic ledbat", 1, "cubic", 9.0),
            row("b", "pair", "cubic ledbat", 1, "cubic", 9.0),
            row("b", "pair", "cubic ledbat", 2, "ledbat", 9.0),
        ];
        rows[1].jain = Some(0.6);
        rows[2].jain = Some(0.8);
        rows[3].jain = Some(0.0);
        let (xs, ys, v) = grid(&rows, "cubic ledbat", "rate_mbps", "rtt_ms", "jain");
        assert_eq!((xs, ys), (vec![10.0, 20.0], vec![40.0]));
        assert_eq!(v, vec![vec![Some(0.5), Some(0.7)]]);
        let (_, _, none) = grid(&rows, "bbr ledbat", "rate_mbps", "rtt_ms", "jain");
        assert!(none.is_empty());
    }

    #[test]
    fn rows_of_a_perf_file() {
        let f = crate::file::SweepFile::parse(
            "name = \"t\"\n[environments]\nrate_mbps = [20]\nrtt_ms = [40]\n\
             [mixes]\nprimaries = [\"cubic\"]\ncontenders = [\"ledbat\"]\n",
            "t.toml",
        )
        .unwrap();
        let plan = SweepPlan::new(&f);
        let perf = Perf::parse(
            r#"{"cubic-ledbat": {"1": {"all": {"tput": 19.0},
                "1": {"tput": 15.0, "delay": 60.0, "loss": 0.01, "scheme": "cubic", "start": 0.0},
                "2": {"tput": 4.0, "delay": 61.0, "loss": 0.02, "scheme": "ledbat", "start": 0.0,
                      "extra_delay": 30.0},
                "competition": {"jain": 0.7, "convergence_time": null, "tput_all_active": [15.1, 3.9]}}}}"#,
        )
        .unwrap();
        let rows = point_rows(&plan, plan.point(1).unwrap(), &perf);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].scheme, "ledbat");
        assert_eq!(rows[1].extra_delay_ms, 30.0);
        assert_eq!(rows[1].tput_all_active_mbps, Some(3.9));
        assert_eq!((rows[0].jain, rows[0].convergence_s), (Some(0.7), None));
        assert_eq!(
            (rows[0].kind.name(), rows[0].env.as_str()),
            ("pair", "20mbps-40ms")
        );
        // Another run id, or an invalid run: no rows.
        let mut run2 = plan.point(1).unwrap().clone();
        run2.run = 2;
        assert!(point_rows(&plan, &run2, &perf).is_empty());
        let invalid = Perf::parse(r#"{"m": {"1": {"valid": false}}}"#).unwrap();
        assert!(point_rows(&plan, plan.point(1).unwrap(), &invalid).is_empty());
    }
}
