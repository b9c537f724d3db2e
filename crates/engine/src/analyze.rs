//! `pantheon analyze DIR`: every run's logs → `<scheme>_stats_run<N>.log`,
//! `<scheme>_datalink_{throughput,delay}_run<N>.png`, `pantheon_perf.json`,
//! `pantheon_summary.md` (also printed), `pantheon_summary.svg`,
//! `pantheon_summary_mean.svg` (and PNGs of both), `pantheon_report.html` and
//! `pantheon_report.pdf`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use analyzer::competition::Sharing;
use analyzer::ingest::ClockOffsets;
use analyzer::perf::{
    CompetingPerf, CompetitionPerf, FlowPerf, Perf, RunPerf, SchemeShare, PERF_FILE,
};
use analyzer::report::{self, SchemePoints};
use analyzer::results::{FlowSpec, Metadata, Mix, Mode, METADATA_FILE};
use analyzer::stats::SchemeRuns;
use analyzer::RunStats;
use anyhow::{bail, Context};

use analyzer::files::write_atomic;

use crate::record::{RunOutcome, RunRecord};
use crate::schemes::Registry;
use crate::transfers::{RunWork, Table};

/// A run as the analysis sees it.
struct RunResult {
    run_id: u32,
    /// As the runner recorded it, or `Failed` when its logs cannot be read.
    outcome: RunOutcome,
    stats: Option<RunStats>,
    /// The runner's notes, then the analysis's warnings.
    flags: Vec<String>,
    /// Traffic lasted under 80 % of the runtime: reported, not counted in the means
    /// (Pantheon ignores such runs).
    short: bool,
    /// Its logs cannot be believed (missing, truncated, not a pair: the flags say which):
    /// reported invalid, not counted.
    invalid: bool,
    /// A mixed run's flows as they competed.
    competition: Option<Competition>,
    /// Its flows' transfers, when any flow has a workload beyond full throttle.
    work: Option<RunWork>,
}

/// How the flows of a mixed run competed ([`crate::mix`]).
struct Competition {
    /// Flow 1 first.
    flows: Vec<CompetingFlow>,
    /// While every flow was active: Jain's index, per 1-s bucket, time to converge.
    sharing: Sharing,
    /// That interval, seconds after the run's start.
    active_s: Option<(f64, f64)>,
}

impl Competition {
    /// The competition table (headings, one row per flow) and the lines on the run as a whole,
    /// as the summary and the report print them.
    fn table(&self, registry: &Registry) -> (Vec<String>, Vec<Vec<String>>, Vec<String>) {
        let header = [
            "flow",
            "scheme",
            "start (s)",
            "started (s)",
            "stop (s)",
            "extra delay (ms)",
            "tput (Mbit/s)",
            "p95 delay (ms)",
            "loss (%)",
            "tput while all active (Mbit/s)",
            "tput ratio",
            "tput harm",
            "delay harm",
        ]
        .map(str::to_owned)
        .to_vec();
        let num = |v: Option<f64>, p: usize| v.map_or("—".to_owned(), |x| format!("{x:.p$}"));
        let rows = self
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| {
                vec![
                    f.id.to_string(),
                    label(registry, &f.spec.scheme),
                    num(Some(f.spec.start), 1),
                    num(f.measured_start_s, 3),
                    f.spec.stop.map_or("end".to_owned(), |s| format!("{s:.1}")),
                    num(Some(f.spec.delay), 0),
                    num(f.stats.map(|s| s.tput_mbps), 2),
                    num(f.stats.and_then(|s| s.p95_delay_ms), 2),
                    num(f.stats.map(|s| s.loss * 100.0), 3),
                    num(self.sharing.tput_mbps.get(i).copied(), 2),
                    num(f.tput_ratio(), 3),
                    num(f.harm().0, 3),
                    num(f.harm().1, 3),
                ]
            })
            .collect();
        let notes = match self.active_s {
            Some((a, b)) => vec![format!(
                "All flows active from {a:.1} s to {b:.1} s: Jain's fairness index {} \
                     (per 1-s bucket: min {}, median {}); fair (Jain ≥ {FAIR_JAIN}) to the end \
                     {}.",
                num(self.sharing.jain, 3),
                num(self.bucket_jain(|v| v.first().copied()), 3),
                num(self.bucket_jain(|v| analyzer::stats::median(v)), 3),
                match self.sharing.convergence_s {
                    Some(t) => format!("{t:.0} s after that"),
                    None => "never".to_owned(),
                }
            )],
            None => vec!["The flows were never all active at once: no Jain's index.".to_owned()],
        };
        let mut notes = notes;
        if self.active_s.is_some() {
            let shares: Vec<String> = self
                .per_scheme()
                .iter()
                .map(|(scheme, n, tput, share)| {
                    format!(
                        "{} ({n} flow{}) {tput:.2} Mbit/s, {}",
                        label(registry, scheme),
                        if *n == 1 { "" } else { "s" },
                        num(share.map(|s| s * 100.0), 1) + " %"
                    )
                })
                .collect();
            notes.push(format!(
                "Per scheme while all were active: {}.",
                shares.join("; ")
            ));
        }
        (header, rows, notes)
    }

    /// Per scheme of the mix, in flow order: its flows, their summed throughput while all
    /// flows were active (Mbit/s) and its share of everyone's then (`None` if nothing was
    /// carried).
    fn per_scheme(&self) -> Vec<(String, usize, f64, Option<f64>)> {
        let total: f64 = self.sharing.tput_mbps.iter().sum();
        let mut out: Vec<(String, usize, f64, Option<f64>)> = Vec::new();
        for (i, f) in self.flows.iter().enumerate() {
            let tput = self.sharing.tput_mbps.get(i).copied().unwrap_or(0.0);
            match out.iter_mut().find(|s| s.0 == f.spec.scheme) {
                Some(s) => {
                    s.1 += 1;
                    s.2 += tput;
                }
                None => out.push((f.spec.scheme.clone(), 1, tput, None)),
            }
        }
        for s in &mut out {
            s.3 = (total > 0.0).then(|| s.2 / total);
        }
        out
    }

    /// Flow `id`, if the mix has it.
    fn flow(&self, id: u32) -> Option<&CompetingFlow> {
        self.flows.iter().find(|f| f.id == id)
    }

    /// The run's entry `"competition"` of `pantheon_perf.json`.
    fn perf(&self) -> CompetitionPerf {
        CompetitionPerf {
            jain: self.sharing.jain,
            jain_per_s: self.sharing.jain_per_bucket.clone(),
            convergence_time: self.sharing.convergence_s,
            all_active: self.active_s.map(|(a, b)| [a, b]),
            tput_all_active: self.sharing.tput_mbps.iter().map(|&t| finite(t)).collect(),
            tput_per_s: self.sharing.tput_per_bucket.clone(),
            per_scheme: self
                .per_scheme()
                .into_iter()
                .map(|(scheme, flows, tput_all_active, share)| {
                    let share = SchemeShare {
                        flows,
                        tput_all_active: finite(tput_all_active),
                        share,
                    };
                    (scheme, share)
                })
                .collect(),
        }
    }

    /// `pick` of the sorted per-bucket Jain indices.
    fn bucket_jain(&self, pick: impl Fn(&[f64]) -> Option<f64>) -> Option<f64> {
        let mut v: Vec<f64> = self
            .sharing
            .jain_per_bucket
            .iter()
            .flatten()
            .copied()
            .collect();
        v.sort_by(f64::total_cmp);
        pick(&v)
    }
}

/// One flow of a mixed run.
struct CompetingFlow {
    /// Flow id (1-based).
    id: u32,
    /// What the mix asked of it.
    spec: FlowSpec,
    /// When it started, seconds after the run's start, measured from the logs: its first
    /// packet into the path, relative to the first packet of the earliest flow (which started
    /// at its own start time).
    measured_start_s: Option<f64>,
    /// Its metrics over its own active interval (as every flow's).
    stats: Option<analyzer::FlowStats>,
    /// Its scheme alone on the same emulator (the baseline's medians), if known.
    solo: Option<Solo>,
}

impl CompetingFlow {
    /// Throughput in competition ÷ alone (seed 002's throughput ratio).
    fn tput_ratio(&self) -> Option<f64> {
        analyzer::competition::throughput_ratio(self.stats?.tput_mbps, self.solo?.tput_mbps)
    }

    /// What this flow adds to its entry of `pantheon_perf.json`.
    fn perf(&self) -> CompetingPerf {
        let (tput_harm, delay_harm) = self.harm();
        CompetingPerf {
            scheme: self.spec.scheme.clone(),
            start: self.spec.start,
            stop: self.spec.stop,
            measured_start: self.measured_start_s,
            extra_delay: self.spec.delay,
            tput_ratio: self.tput_ratio(),
            tput_harm,
            delay_harm,
        }
    }

    /// Harm done to this flow (Ware et al.): (throughput, p95 one-way delay).
    fn harm(&self) -> (Option<f64>, Option<f64>) {
        use analyzer::competition::{harm, Better};
        let (Some(stats), Some(solo)) = (self.stats, self.solo) else {
            return (None, None);
        };
        (
            harm(solo.tput_mbps, stats.tput_mbps, Better::More),
            stats
                .p95_delay_ms
                .zip(solo.p95_delay_ms)
                .and_then(|(competing, alone)| harm(alone, competing, Better::Less)),
        )
    }
}

/// A scheme alone on the emulator of a mix: the medians over its valid runs in the baseline
/// directory.
#[derive(Debug, Clone, Copy)]
struct Solo {
    tput_mbps: f64,
    p95_delay_ms: Option<f64>,
}

/// Per-scheme run totals of results directory `dir` from its [`Perf`] (analysed first if it
/// has no `pantheon_perf.json`): each valid run's `"all"` figures, loss converted to percent
/// (Pantheon writes a fraction); a scheme without such a run has empty lists. Errors name the
/// file.
pub fn perf_runs(dir: &Path, registry: &Registry) -> anyhow::Result<BTreeMap<String, SchemeRuns>> {
    let perf = if dir.join(PERF_FILE).exists() {
        Perf::read(dir)?
    } else {
        if !dir.join(METADATA_FILE).exists() {
            bail!(
                "{}: neither {PERF_FILE} nor {METADATA_FILE}: not a results directory",
                dir.display()
            );
        }
        analyze_dir(dir, registry)
            .with_context(|| format!("analyse {}", dir.display()))?
            .perf
    };
    let mut out: BTreeMap<String, SchemeRuns> = perf
        .schemes
        .keys()
        .map(|scheme| (scheme.clone(), SchemeRuns::default()))
        .collect();
    for (scheme, _, t) in perf.totals() {
        let r = out.entry(scheme.to_owned()).or_default();
        r.tput_mbps.push(t.tput_mbps);
        r.delay_ms.push(t.delay_ms);
        r.loss_pct.push(t.loss * 100.0);
    }
    Ok(out)
}

/// The solo figures of each scheme in results directory `dir` (analysed first if need be):
/// medians of its runs' totals.
fn load_baseline(dir: &Path, registry: &Registry) -> anyhow::Result<BTreeMap<String, Solo>> {
    let runs =
        perf_runs(dir, registry).with_context(|| format!("the solo baseline {}", dir.display()))?;
    Ok(runs
        .into_iter()
        .filter_map(|(scheme, r)| {
            let solo = Solo {
                tput_mbps: analyzer::stats::median(&r.tput_mbps)?,
                p95_delay_ms: analyzer::stats::median(&r.delay_ms),
            };
            Some((scheme, solo))
        })
        .collect())
}

/// Bucket of the per-bucket Jain index and of the competition plot, ms (transperf's 1 s).
const SHARING_BUCKET_MS: f64 = 1000.0;
/// Bin of Pantheon's per-run plots and of the competition plot's finer panel, ms (Pantheon's
/// 500 ms).
const PLOT_BIN_MS: f64 = 500.0;
/// Jain's index that counts as fair for the time to converge (transperf's threshold).
const FAIR_JAIN: f64 = 0.9;

impl RunResult {
    /// Whether the run counts in the summary's means and plots: it has statistics and is
    /// neither short nor invalid.
    fn valid_stats(&self) -> Option<&RunStats> {
        self.stats.as_ref().filter(|_| !self.short && !self.invalid)
    }

    /// `ok`, `INVALID` (ended normally, logs not to be believed), `FAILED` or `INTERRUPTED`,
    /// as the summary and stats log print it.
    fn status(&self) -> &'static str {
        match self.outcome {
            RunOutcome::Ok if self.invalid => "INVALID",
            RunOutcome::Ok => "ok",
            RunOutcome::Failed { .. } => "FAILED",
            RunOutcome::Interrupted => "INTERRUPTED",
        }
    }

    fn reason(&self) -> Option<&str> {
        match &self.outcome {
            RunOutcome::Failed { reason } => Some(reason),
            _ => None,
        }
    }
}

/// The analysed runs of every scheme, by scheme name.
type Results = BTreeMap<String, Vec<RunResult>>;

/// What [`analyze_dir`] wrote, for its caller to print or archive without reading it back.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// The summary (Markdown), as written to `pantheon_summary.md`.
    pub summary_md: String,
    /// Every run's metrics, as written to `pantheon_perf.json`.
    pub perf: Perf,
}

/// Analyses the results directory `dir`: writes each run's stats log, `pantheon_perf.json`,
/// `pantheon_summary.md`, the plots and the report, and returns the summary and the metrics.
pub fn analyze_dir(dir: &Path, registry: &Registry) -> anyhow::Result<Analysis> {
    analyze_dir_with(dir, registry, None)
}

/// [`analyze_dir`], the solo runs of a mix's schemes taken from results directory `baseline`
/// (else from the one the metadata names, if any): they give each flow's throughput ratio and
/// harm. Errors if the baseline cannot be read.
pub fn analyze_dir_with(
    dir: &Path,
    registry: &Registry,
    baseline: Option<&Path>,
) -> anyhow::Result<Analysis> {
    analyze_dir_opts(
        dir,
        registry,
        &AnalyzeOptions {
            baseline,
            stats_only: false,
        },
    )
}

/// How `pantheon analyze` analyses a directory.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnalyzeOptions<'a> {
    /// A mix's solo runs ([`analyze_dir_with`]).
    pub baseline: Option<&'a Path>,
    /// `--stats-only`: the stats logs, `pantheon_perf.json` and the summary, without any plot
    /// or the report (Pantheon's `analyze.py --analyze-schemes` without `plot.py`'s figures
    /// and `report.py`).
    pub stats_only: bool,
}

/// [`analyze_dir_with`] with every option.
pub fn analyze_dir_opts(
    dir: &Path,
    registry: &Registry,
    opts: &AnalyzeOptions,
) -> anyhow::Result<Analysis> {
    let baseline = opts.baseline;
    let draw = !opts.stats_only;
    let meta = Metadata::read(dir)?;
    let baseline = match baseline.or(meta.baseline.as_deref().map(Path::new)) {
        Some(b) if meta.mix.is_some() => load_baseline(b, registry)?,
        _ => BTreeMap::new(),
    };
    if meta.cc_schemes.is_empty() {
        anyhow::bail!(
            "{}: pantheon_metadata.json lists no schemes (cc_schemes)",
            dir.display()
        );
    }
    // Our harness records every run's end; Pantheon's did not.
    let (records, recorded_here) = match RunRecord::read_all(dir) {
        Ok(records) => (records, meta.harness.is_some()),
        Err(e) => {
            tracing::warn!("warning: {e:#}; every run is analysed as if it ended normally");
            (Vec::new(), false)
        }
    };
    let mut results = Results::new();
    for (scheme, run_id) in meta.runs() {
        let recorded = records
            .iter()
            .find(|r| r.scheme == scheme && r.run_id == run_id);
        let rr = match recorded {
            None if recorded_here => unrecorded(run_id),
            _ => {
                let run = RunContext {
                    dir,
                    meta: &meta,
                    registry,
                    baseline: &baseline,
                    draw,
                };
                analyze_run(&run, &scheme, run_id, recorded)?
            }
        };
        write_stats_log(dir, &scheme, &rr)?;
        results.entry(scheme).or_default().push(rr);
    }
    let perf = perf(&results);
    perf.write(dir)?;
    let transfers = transfer_report(dir, &meta, &results, registry);
    let summary_md = summary_markdown(dir, &meta, &results, registry, &transfers);
    write_atomic(&dir.join("pantheon_summary.md"), summary_md.as_bytes())?;
    if draw {
        summary_plots(dir, &meta, &results, registry)?;
        write_report(dir, &meta, &results, registry, &transfers)?;
    }
    Ok(Analysis { summary_md, perf })
}

/// A run of our harness with no record of how it ended: never started, or the command running
/// it was killed (SIGKILL) before it could say; whatever logs it left are not counted.
fn unrecorded(run_id: u32) -> RunResult {
    RunResult {
        run_id,
        outcome: RunOutcome::Failed {
            reason: "no record of how it ended: not run, or the command running it was killed"
                .into(),
        },
        stats: None,
        flags: Vec::new(),
        short: false,
        invalid: false,
        competition: None,
        work: None,
    }
}

/// What every run of a directory's analysis shares.
struct RunContext<'a> {
    dir: &'a Path,
    meta: &'a Metadata,
    registry: &'a Registry,
    baseline: &'a BTreeMap<String, Solo>,
    /// Draw the run's plots (not with `--stats-only`).
    draw: bool,
}

/// One run: its logs → statistics, plots and warnings, unless the runner recorded it as
/// failed or interrupted. Logs that cannot be read fail the run, not the analysis; an error in
/// the metrics of logs that were read does fail it.
fn analyze_run(
    ctx: &RunContext,
    scheme: &str,
    run_id: u32,
    recorded: Option<&RunRecord>,
) -> anyhow::Result<RunResult> {
    let RunContext {
        dir, meta, draw, ..
    } = *ctx;
    let mut rr = RunResult {
        run_id,
        outcome: recorded.map_or(RunOutcome::Ok, |r| r.outcome.clone()),
        stats: None,
        // The runner's remarks (qdisc used, drain, tunnel warnings) come first.
        flags: recorded.map(|r| r.notes.clone()).unwrap_or_default(),
        short: false,
        invalid: false,
        competition: None,
        work: None,
    };
    if rr.outcome != RunOutcome::Ok {
        return Ok(rr);
    }
    let started = std::time::Instant::now();
    let frames = match analyzer::ingest::read_run(dir, scheme, run_id) {
        Ok(frames) => frames,
        Err(e) => {
            rr.outcome = RunOutcome::Failed {
                reason: e.to_string(),
            };
            return Ok(rr);
        }
    };
    let lost_time = recorded.and_then(RunRecord::lost_time);
    rr.invalid = !frames.problems.is_empty() || lost_time.is_some();
    rr.flags.extend(
        frames
            .problems
            .iter()
            .chain(&lost_time)
            .map(|p| format!("invalid: {p}")),
    );
    rr.flags.extend(frames.warnings.iter().cloned());
    rr.flags.extend(clock_warning(&frames.clock_offsets, meta));
    let stats = frames
        .stats()
        .with_context(|| format!("metrics of {scheme} run {run_id}"))?;
    let secs = started.elapsed().as_secs_f64();
    tracing::info!(
        "   {scheme} run {run_id}: {} packets read and measured in {secs:.2} s \
         ({:.2} M packets/s)",
        stats.total.arrived,
        stats.total.arrived as f64 / secs.max(1e-9) / 1e6
    );
    rr.work = crate::transfers::run_work(dir, meta, scheme, run_id, &stats, Some(&frames));
    if let Some(w) = &rr.work {
        rr.flags.extend(w.flags.iter().cloned());
    }
    // Judged against its own invocation's runtime (an --append may give another).
    let runtime_s = meta.runtime_of(scheme, run_id);
    let dur_s = stats.total.duration_ms / 1000.0;
    // A workload's traffic comes and goes (a single transfer ends early): not a short run.
    if dur_s < 0.8 * runtime_s && rr.work.is_none() {
        rr.short = true;
        rr.flags.push(format!(
            "short run: traffic lasted {dur_s:.1} s of {runtime_s} s (Pantheon ignores runs under 80 %)"
        ));
    }
    rr.flags.extend(implausible(&frames, meta, runtime_s)?);
    if stats.total.negative_delays > 0 {
        rr.flags.push(format!(
            "{} packets with negative one-way delay (clock problem)",
            stats.total.negative_delays
        ));
    }
    rr.flags.extend(bleaching(&stats));
    if let Err(e) = draw
        .then(|| run_plots(dir, scheme, run_id, &frames, &stats, &mut rr.flags))
        .transpose()
    {
        rr.flags.push(format!("plots not drawn: {e:#}"));
    }
    if let Some(mix) = meta.mix.as_ref().filter(|m| m.name == scheme) {
        rr.competition = Some(run_competition(
            ctx,
            mix,
            scheme,
            run_id,
            &frames,
            &stats,
            &mut rr.flags,
        )?);
    }
    rr.stats = Some(stats);
    Ok(rr)
}

/// A mixed run's competition ([`competition`]) and, unless `--stats-only`, its plot (a plot
/// that cannot be drawn is a note in `flags`).
fn run_competition(
    ctx: &RunContext,
    mix: &Mix,
    scheme: &str,
    run_id: u32,
    frames: &analyzer::ingest::RunFrames,
    stats: &RunStats,
    flags: &mut Vec<String>,
) -> anyhow::Result<Competition> {
    let series = |bin_ms| {
        analyzer::timeseries::time_series(
            &frames.arrivals,
            &frames.departures,
            frames.opportunities.as_ref(),
            stats,
            bin_ms,
        )
    };
    let ts = series(SHARING_BUCKET_MS)?;
    let c = competition(mix, frames, &ts, stats, ctx.baseline)
        .with_context(|| format!("competition of {scheme} run {run_id}"))?;
    if ctx.draw {
        let fine = series(PLOT_BIN_MS)?;
        let plotted = competition_plot(ctx.dir, scheme, run_id, mix, [&fine, &ts], ctx.registry);
        if let Err(e) = plotted {
            flags.push(format!("competition plot not drawn: {e:#}"));
        }
    }
    Ok(c)
}

/// How the flows of a run of `mix` competed: each flow's measured start and metrics, and
/// their sharing while all were active.
/// `ts`: the run in buckets of [`SHARING_BUCKET_MS`].
fn competition(
    mix: &Mix,
    frames: &analyzer::ingest::RunFrames,
    ts: &analyzer::timeseries::TimeSeries,
    stats: &RunStats,
    baseline: &BTreeMap<String, Solo>,
) -> anyhow::Result<Competition> {
    let times = analyzer::metrics::flow_times(&frames.arrivals, &frames.departures)?;
    let first_packet = times
        .values()
        .map(|t| t.first_arrival_ms)
        .fold(f64::INFINITY, f64::min);
    let first_start = mix
        .flows
        .iter()
        .map(|f| f.start)
        .fold(f64::INFINITY, f64::min);
    let flows = mix
        .flows
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let id = i as u32 + 1;
            CompetingFlow {
                id,
                spec: spec.clone(),
                measured_start_s: times
                    .get(&id)
                    .map(|t| (t.first_arrival_ms - first_packet) / 1000.0 + first_start),
                stats: stats.flows.get(&id).copied(),
                solo: baseline.get(&spec.scheme).copied(),
            }
        })
        .collect::<Vec<_>>();
    let empty = Vec::new();
    let active: Vec<(&[f64], (f64, f64))> = flows
        .iter()
        .map(|f| {
            let series = ts.flows.get(&f.id).map_or(&empty, |s| &s.egress);
            let span = times.get(&f.id).map_or((f64::NAN, f64::NAN), |t| {
                (t.first_departure_ms, t.last_departure_ms)
            });
            (series.as_slice(), span)
        })
        .collect();
    let sharing = if active.iter().any(|(_, (a, _))| a.is_nan()) {
        // A flow that delivered nothing never shared the link: no interval where all were active.
        analyzer::competition::sharing(&[], ts.first_ms, SHARING_BUCKET_MS, FAIR_JAIN)
    } else {
        analyzer::competition::sharing(&active, ts.first_ms, SHARING_BUCKET_MS, FAIR_JAIN)
    };
    let run_s = |ms: f64| (ms - first_packet) / 1000.0 + first_start;
    Ok(Competition {
        flows,
        active_s: sharing.active_ms.map(|(a, b)| (run_s(a), run_s(b))),
        sharing,
    })
}

/// `<mix>_competition_run<N>.png`: each flow's throughput (`series`: 500-ms and 1-s bins) and
/// one-way delay over time, one colour per scheme.
fn competition_plot(
    dir: &Path,
    name: &str,
    run_id: u32,
    mix: &Mix,
    series: [&analyzer::timeseries::TimeSeries; 2],
    registry: &Registry,
) -> anyhow::Result<()> {
    let mut seen: Vec<&str> = Vec::new();
    let styles: Vec<report::FlowStyle> = mix
        .flows
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let dash = seen.iter().filter(|s| **s == f.scheme).count();
            seen.push(&f.scheme);
            let color = registry
                .get(&f.scheme)
                .map_or_else(|_| "grey".to_owned(), |d| d.color.clone());
            report::FlowStyle {
                flow: i as u32 + 1,
                label: format!(
                    "Flow {}: {} ({})",
                    i + 1,
                    label(registry, &f.scheme),
                    f.short()
                ),
                color,
                dash,
            }
        })
        .collect();
    report::competition_plot(
        &dir.join(format!("{name}_competition_run{run_id}.png")),
        series[0],
        series[1],
        &styles,
    )?;
    Ok(())
}

/// Seconds a run's logs may go on after its first side's setup, runtime and drain: the tunnels'
/// handshake before, the scheme's own shutdown after.
const LATE_SLACK_S: f64 = 15.0;

/// What the logs of a run say that cannot be: packets logged long after the run ended
/// (`first_side_setup` + the run's `runtime_s` + drain + [`LATE_SLACK_S`]; Pantheon's 3 s setup and 1 s
/// drain where the metadata lacks them), more bytes delivered than the emulated link offered.
fn implausible(
    frames: &analyzer::ingest::RunFrames,
    meta: &Metadata,
    runtime_s: f64,
) -> anyhow::Result<Vec<String>> {
    let mut flags = Vec::new();
    let end_s = meta.first_side_setup.unwrap_or(3.0)
        + runtime_s
        + meta.drain_timeout.unwrap_or(1.0)
        + LATE_SLACK_S;
    let late = frames.packets_after(end_s * 1000.0)?;
    if late > 0 {
        flags.push(format!(
            "times outside the run: {late} packets logged more than {end_s:.0} s after the logs \
             began (a clock or a log is wrong)"
        ));
    }
    if let Some((delivered, offered)) = frames.delivered_and_offered()? {
        // One packet of slack per 100 (Mahimahi's 4-byte header in some sizes) and one packet.
        if delivered as f64 > offered as f64 * 1.01 + 1500.0 {
            flags.push(format!(
                "above capacity: {delivered} bytes delivered, the emulated link offered {offered} \
                 (the logs are wrong)"
            ));
        }
    }
    Ok(flags)
}

/// What the one-way delays of a run are worth given its clock offsets: missing offsets, or a
/// remote run without (or with unanswered) `--ntp-addr`.
fn clock_warning(offsets: &ClockOffsets, meta: &Metadata) -> Option<String> {
    match offsets {
        ClockOffsets::Missing(what) => Some(format!(
            "clock offsets missing ({}): one-way delays are uncorrected",
            what.join(", ")
        )),
        ClockOffsets::None if meta.mode == Some(Mode::Remote) && meta.ntp_addr.is_none() => Some(
            "remote run without --ntp-addr: one-way delays mix two unsynchronised clocks (the \
             queueing delay does not)"
                .into(),
        ),
        ClockOffsets::None if meta.ntp_addr.is_some() => Some(
            "NTP was requested but no clock offset was recorded: one-way delays are uncorrected"
                .into(),
        ),
        _ => None,
    }
}

/// The directory's [`Perf`] (`pantheon_perf.json`): `{scheme: {run_id: {"all": {tput, delay,
/// loss, …}, "1": {…}}}}`, as Pantheon; ours add `"flags"` (the run's warnings) where there
/// are any, and an invalid run (logs not to be believed) is `{"valid": false, "flags": […]}`,
/// without numbers. A mixed run is filed under the mix's name; each of its flows adds
/// `"scheme"`, `"start"`, `"stop"` and `"measured_start"` (s) and `"extra_delay"` (ms) (and
/// with a solo baseline, where defined, `"tput_ratio"`, `"tput_harm"` and `"delay_harm"`), and
/// the run adds `"competition"`: `{"jain", "jain_per_s", "convergence_time", "all_active":
/// [from, to], "tput_all_active", "tput_per_s": [[flow 1's Mbit/s in each second], …],
/// "per_scheme": {scheme: {"flows", "tput_all_active", "share"}}}`. A flow with a workload
/// adds its transfers ([`crate::transfers::FlowWork::perf`]).
fn perf(results: &Results) -> Perf {
    let mut perf = Perf::default();
    for (scheme, runs) in results {
        let by_run = perf.schemes.entry(scheme.clone()).or_default();
        for r in runs {
            let Some(stats) = &r.stats else { continue };
            let mut run = RunPerf {
                flags: r.flags.clone(),
                ..RunPerf::default()
            };
            if r.invalid {
                run.valid = false;
            } else {
                run.all = Some(flow_perf(&stats.total));
                for (id, f) in &stats.flows {
                    let competing = r.competition.as_ref().and_then(|c| c.flow(*id));
                    let work = r.work.as_ref().and_then(|w| w.flows.get(id));
                    let flow = FlowPerf {
                        competing: competing.map(CompetingFlow::perf),
                        work: work.map(crate::transfers::FlowWork::perf),
                        ..flow_perf(f)
                    };
                    run.flows.insert(*id, flow);
                }
                run.competition = r.competition.as_ref().map(Competition::perf);
            }
            by_run.insert(r.run_id, run);
        }
    }
    perf
}

/// The scheme's label in reports (its descriptor's, or its name for a scheme we have no
/// descriptor for, e.g. from Pantheon's archive).
fn label(registry: &Registry, scheme: &str) -> String {
    registry
        .get(scheme)
        .map_or_else(|_| scheme.to_owned(), |s| s.label.clone())
}

/// `pantheon_summary.md`: the means of the valid runs per scheme (as Pantheon), then every
/// run with its status and notes.
/// The transfers' tables and CDF plots of the workload runs, if any ([`crate::transfers::report`]).
type TransferReport = (Vec<Table>, Vec<Result<(String, String), String>>);

fn transfer_report(
    dir: &Path,
    meta: &Metadata,
    results: &Results,
    registry: &Registry,
) -> TransferReport {
    let work: Vec<(String, u32, &RunWork)> = results
        .iter()
        .flat_map(|(name, runs)| {
            runs.iter()
                .filter_map(move |r| Some((name.clone(), r.run_id, r.work.as_ref()?)))
        })
        .collect();
    // A flow of a mix is labelled with the flows beside it ("TCP Cubic with LEDBAT"): the
    // CDFs are per scheme and per background.
    let flow_style = |name: &str, flow: u32| {
        let (scheme, others) = match &meta.mix {
            Some(m) if m.name == name => {
                let i = flow as usize - 1;
                let others: Vec<String> = (m.flows.iter().enumerate())
                    .filter(|(j, _)| *j != i)
                    .map(|(_, f)| label(registry, &f.scheme))
                    .collect();
                (m.flows.get(i).map_or(name, |f| f.scheme.as_str()), others)
            }
            _ => (name, Vec::new()),
        };
        let color = registry
            .get(scheme)
            .map_or_else(|_| "grey".to_owned(), |d| d.color.clone());
        match others.is_empty() {
            true => (label(registry, scheme), color),
            false => (
                format!("{} with {}", label(registry, scheme), others.join(", ")),
                color,
            ),
        }
    };
    crate::transfers::report(dir, &work, &flow_style)
}

/// The summary's table of per-scheme means over the valid runs, each with its 95 % interval
/// (`FlowMeans::over_runs`, as the reports' table).
fn means_markdown(md: &mut String, results: &Results, registry: &Registry) {
    let _ = writeln!(
        md,
        "| scheme | valid runs | mean avg tput (Mbit/s) | mean 95th-%ile delay (ms) | mean loss rate (%) |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|");
    for (scheme, runs) in results {
        let valid: Vec<&RunStats> = runs.iter().filter_map(RunResult::valid_stats).collect();
        let over_runs = |f: &dyn Fn(&RunStats) -> Option<f64>| -> Vec<f64> {
            valid.iter().filter_map(|s| f(s)).collect()
        };
        let means = analyzer::document::FlowMeans::over_runs(
            &over_runs(&|s| Some(s.total.tput_mbps)),
            &over_runs(&|s| s.total.p95_delay_ms),
            &over_runs(&|s| Some(s.total.loss * 100.0)),
        );
        let fmt = |v: Option<analyzer::compare::MeanInterval>, p: usize| {
            v.map_or("N/A".to_owned(), |x| x.display(p))
        };
        let _ = writeln!(
            md,
            "| {} | {}/{} | {} | {} | {} |",
            label(registry, scheme),
            valid.len(),
            runs.len(),
            fmt(means.tput_mbps, 2),
            fmt(means.delay_ms, 2),
            fmt(means.loss_pct, 3),
        );
    }
}

fn summary_markdown(
    dir: &Path,
    meta: &Metadata,
    results: &Results,
    registry: &Registry,
    transfers: &TransferReport,
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Pantheon-rs summary: {}\n", dir.display());
    if let Some(cmd) = &meta.emulator_command {
        let _ = writeln!(md, "Emulated path: `{cmd}`  ");
    }
    // Appended invocations may have run for other lengths: each is named.
    let mut runtimes: Vec<String> = Vec::new();
    for r in meta.invocations.iter().filter_map(|i| i.runtime) {
        if !runtimes.contains(&r.to_string()) {
            runtimes.push(r.to_string());
        }
    }
    if runtimes.is_empty() {
        runtimes.push(meta.runtime.to_string());
    }
    let _ = writeln!(
        md,
        "{} run(s) of {} s per scheme, {} flow(s).\n",
        meta.run_times,
        runtimes.join(" s and "),
        meta.flows
    );
    means_markdown(&mut md, results, registry);
    let _ = writeln!(md, "\n{}", analyzer::compare::INTERVAL_NOTE);
    competition_markdown(&mut md, results, registry);
    for t in &transfers.0 {
        md.push_str(&t.markdown());
    }
    for p in &transfers.1 {
        let _ = match p {
            Ok((title, file)) => writeln!(md, "\n![{title}]({file})"),
            Err(e) => writeln!(md, "\n{e}"),
        };
    }
    let _ = writeln!(md, "\n## Runs\n");
    let _ = writeln!(
        md,
        "| scheme | run | status | tput (Mbit/s) | p95 delay (ms) | p95 queueing delay (ms) | loss (%) | notes |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    for (scheme, runs) in results {
        for r in runs {
            let ms = |v: Option<f64>| v.map_or("N/A".into(), |d| format!("{d:.2}"));
            let (t, d, q, l) = match &r.stats {
                Some(s) => (
                    format!("{:.2}", s.total.tput_mbps),
                    ms(s.total.p95_delay_ms),
                    ms(s.total.p95_queueing_delay_ms),
                    format!("{:.3}", s.total.loss * 100.0),
                ),
                None => ("—".into(), "—".into(), "—".into(), "—".into()),
            };
            let notes: Vec<&str> = r
                .reason()
                .into_iter()
                .chain(r.flags.iter().map(String::as_str))
                .collect();
            let _ = writeln!(
                md,
                "| {scheme} | {} | {} | {t} | {d} | {q} | {l} | {} |",
                r.run_id,
                r.status(),
                notes.join("; ").replace('|', "\\|")
            );
        }
    }
    md
}

/// The competition table of every mixed run, if any.
fn competition_markdown(md: &mut String, results: &Results, registry: &Registry) {
    for (name, runs) in results {
        for r in runs {
            let Some(c) = &r.competition else { continue };
            let (header, rows, notes) = c.table(registry);
            let _ = writeln!(md, "\n## Competition: {name} run {}\n", r.run_id);
            let _ = writeln!(md, "| {} |", header.join(" | "));
            let _ = writeln!(md, "|{}", "---|".repeat(header.len()));
            for row in rows {
                let _ = writeln!(md, "| {} |", row.join(" | "));
            }
            for n in notes {
                let _ = writeln!(md, "\n{n}");
            }
        }
    }
}

/// The files of run `run_id` of `scheme` in `dir` that a researcher opens to look inside it
/// (issue 54), sorted by name: `--capture`'s pcapng
/// (`<scheme>_{datalink,acklink}_run<N>_flow<i>.*.pcapng`), key logs and qlogs
/// (`<scheme>_run<N>_flow<i>.<side>.{keys,sqlog}`) and the time series' Parquet files
/// (`<scheme>_datalink_{throughput,delay,queue}_run<N>.parquet`). Another scheme whose name
/// starts with this one's (`quic` and `quic_bbr2`) is not matched.
fn files_to_look_inside(dir: &Path, scheme: &str, run_id: u32) -> Vec<String> {
    let flows = [
        format!("run{run_id}_flow"),
        format!("datalink_run{run_id}_flow"),
        format!("acklink_run{run_id}_flow"),
    ];
    let series = [
        format!("datalink_throughput_run{run_id}.parquet"),
        format!("datalink_delay_run{run_id}.parquet"),
        format!("datalink_queue_run{run_id}.parquet"),
    ];
    let ours = |name: &str| {
        let Some(rest) = name.strip_prefix(scheme).and_then(|r| r.strip_prefix('_')) else {
            return false;
        };
        let flow_file = flows.iter().any(|f| {
            rest.strip_prefix(f.as_str())
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        }) && [".pcapng", ".keys", ".sqlog"]
            .iter()
            .any(|e| rest.ends_with(e));
        flow_file || series.iter().any(|s| rest == s)
    };
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| ours(n))
        .collect();
    names.sort();
    names
}

/// `pantheon_summary.svg` and `pantheon_summary_mean.svg` (as Pantheon) and PNGs of both
/// (for the PDF report): 95th-percentile delay against throughput of the valid runs, titled
/// as Pantheon titles them.
fn summary_plots(
    dir: &Path,
    meta: &Metadata,
    results: &Results,
    registry: &Registry,
) -> anyhow::Result<()> {
    // Schemes we have no descriptor for (e.g. from Pantheon's archive) are plotted too,
    // under their own name in grey.
    let points: Vec<SchemePoints> = results
        .iter()
        .map(|(scheme, runs)| {
            let (label, color, marker) = match registry.get(scheme) {
                Ok(d) => (d.label.clone(), d.color.clone(), d.marker.clone()),
                Err(_) => (scheme.clone(), "grey".to_owned(), "o".to_owned()),
            };
            SchemePoints {
                label,
                color,
                marker,
                runs: runs
                    .iter()
                    .filter_map(RunResult::valid_stats)
                    .filter_map(|s| s.total.p95_delay_ms.map(|d| (d, s.total.tput_mbps)))
                    .collect(),
            }
        })
        .collect();
    let setting = match meta.mode {
        Some(Mode::Remote) => {
            // Pantheon's remote titles: "<sender side> to <receiver side>".
            let desc = |n: analyzer::results::Node| {
                meta.desc(n)
                    .map_or_else(|| format!("{} node", n.name()), str::to_owned)
            };
            format!("{} to {}", desc(meta.sender()), desc(meta.sender().other()))
        }
        _ if meta.simulated => "simulated test in emulator".to_owned(),
        _ => "local test in emulator".to_owned(),
    };
    let (run_times, runtime_s, flows) = (meta.run_times, meta.runtime, meta.flows);
    let title = format!(
        "{setting}, {run_times} run{} of {runtime_s}s each per scheme{}",
        if run_times == 1 { "" } else { "s" },
        if flows > 1 {
            format!(
                "\n{flows} flows with {}s interval between flows",
                meta.interval
            )
        } else {
            String::new()
        }
    );
    for ext in ["svg", "png"] {
        report::summary_plot(
            &dir.join(format!("pantheon_summary.{ext}")),
            &title,
            &points,
            false,
        )?;
        report::summary_plot(
            &dir.join(format!("pantheon_summary_mean.{ext}")),
            &format!("{title} (mean of all runs by scheme)"),
            &points,
            true,
        )?;
    }
    Ok(())
}

/// Pantheon's line on the report's path: `Tested in emulator: <command>` (ours),
/// `Tested in mahimahi: <the shells>` (Pantheon's local runs) or `Data path: <sender> on <if>
/// (local) → <receiver> … (remote).` (remote runs).
fn path_line(meta: &Metadata) -> String {
    use analyzer::results::Node;
    if let Some(cmd) = &meta.emulator_command {
        let how = if meta.simulated {
            "Simulated (virtual clock) in emulator"
        } else {
            "Tested in emulator"
        };
        return format!("{how}: {cmd}");
    }
    if meta.mode == Some(Mode::Local) {
        let words = |v: &Option<String>| v.as_deref().unwrap_or("").trim().to_owned();
        let link = format!(
            "mm-link {} {}",
            words(&meta.uplink_trace),
            words(&meta.downlink_trace)
        );
        let parts = [
            words(&meta.prepend_mm_cmds),
            link,
            words(&meta.extra_mm_link_args),
            words(&meta.append_mm_cmds),
        ];
        let parts: Vec<&str> = parts
            .iter()
            .map(String::as_str)
            .filter(|p| !p.is_empty())
            .collect();
        return format!("Tested in mahimahi: {}", parts.join(" "));
    }
    // Pantheon: "Data path: <desc> on <if> (remote) → <desc> on <if> (local)."
    let side = |n: Node| {
        let desc = meta
            .desc(n)
            .map_or_else(|| format!("{} node", n.name()), str::to_owned);
        let iface = meta
            .interface(n)
            .map_or(String::new(), |i| format!(" on {i}"));
        format!("{desc}{iface} ({})", n.name())
    };
    format!(
        "Data path: {} → {}.",
        side(meta.sender()),
        side(meta.sender().other())
    )
}

/// What ran, for the report: the harness, then each scheme's version as recorded when it ran
/// (for runs that did not record them, the version on this machine, said to be so).
fn versions(meta: &Metadata, results: &Results, registry: &Registry) -> Vec<(String, String)> {
    let harness = meta
        .harness
        .clone()
        .unwrap_or_else(|| format!("pantheon-rs {}", env!("CARGO_PKG_VERSION")));
    let mut versions = vec![("harness".to_owned(), harness)];
    for scheme in results.keys() {
        if let Ok(s) = registry.get(scheme) {
            let version = match meta.scheme_version(scheme) {
                Some(v) => v.to_owned(),
                None => format!(
                    "{} (on the machine of this analysis: the run recorded no version)",
                    s.version()
                ),
            };
            versions.push((s.label.clone(), version));
        }
    }
    versions
}

/// `pantheon_report.html` and `pantheon_report.pdf`: Pantheon's report from the analysed runs.
fn write_report(
    dir: &Path,
    meta: &Metadata,
    results: &Results,
    registry: &Registry,
    transfers: &TransferReport,
) -> anyhow::Result<()> {
    use analyzer::document::{FlowMeans, Report, RunSection, TableRow};
    let mut table = Vec::new();
    let mut runs = Vec::new();
    for (scheme, rs) in results {
        let valid: Vec<&RunStats> = rs.iter().filter_map(RunResult::valid_stats).collect();
        let k = valid.iter().map(|s| s.flows.len()).max().unwrap_or(1) as u32;
        // A flow's values over the valid runs.
        let over_runs = |f: &dyn Fn(&analyzer::FlowStats) -> Option<f64>, flow: u32| {
            valid
                .iter()
                .filter_map(|s| s.flows.get(&flow))
                .filter_map(f)
                .collect::<Vec<f64>>()
        };
        table.push(TableRow {
            label: label(registry, scheme),
            runs: (valid.len(), rs.len()),
            flows: (1..=k)
                .map(|i| {
                    FlowMeans::over_runs(
                        &over_runs(&|f| Some(f.tput_mbps), i),
                        &over_runs(&|f| f.p95_delay_ms, i),
                        &over_runs(&|f| Some(f.loss * 100.0), i),
                    )
                })
                .collect(),
        });
        for r in rs {
            let file = |kind: &str| {
                std::fs::read(dir.join(format!("{scheme}_datalink_{kind}_run{}.png", r.run_id)))
                    .ok()
            };
            runs.push(RunSection {
                label: label(registry, scheme),
                run_id: r.run_id,
                stats: std::fs::read_to_string(
                    dir.join(format!("{scheme}_stats_run{}.log", r.run_id)),
                )
                .unwrap_or_default(),
                throughput_png: file("throughput"),
                delay_png: file("delay"),
                files: files_to_look_inside(dir, scheme, r.run_id),
                competition: r.competition.as_ref().map(|c| {
                    let (header, rows, notes) = c.table(registry);
                    analyzer::document::CompetitionSection {
                        header,
                        rows,
                        notes,
                        plot_png: std::fs::read(
                            dir.join(format!("{scheme}_competition_run{}.png", r.run_id)),
                        )
                        .ok(),
                    }
                }),
            });
        }
    }
    let read_all = |files: [&str; 2]| files.map(|f| std::fs::read(dir.join(f)).ok());
    let report = Report {
        generated_at: chrono::Utc::now().format("%Y-%m-%d %H:%M:%S").to_string(),
        path: path_line(meta),
        schemes: results.len(),
        run_times: meta.run_times,
        runtime_s: meta.runtime,
        flows: (u64::from(meta.flows), meta.interval),
        ntp: meta.ntp_addr.clone(),
        system_info: system_info(),
        versions: versions(meta, results, registry),
        summary_svgs: read_all(["pantheon_summary_mean.svg", "pantheon_summary.svg"])
            .into_iter()
            .flatten()
            .filter_map(|b| String::from_utf8(b).ok())
            .collect(),
        summary_pngs: read_all(["pantheon_summary_mean.png", "pantheon_summary.png"])
            .into_iter()
            .flatten()
            .collect(),
        table,
        sections: transfer_sections(dir, transfers),
        runs,
    };
    let out = dir.join("pantheon_report.html");
    write_atomic(&out, analyzer::document::html(&report).as_bytes())?;
    let out = dir.join("pantheon_report.pdf");
    let pdf = analyzer::document::pdf(&report).map_err(|e| anyhow::anyhow!("PDF report: {e}"))?;
    Ok(write_atomic(&out, &pdf)?)
}

/// The transfers' tables as report sections, the last one with the CDF plots that were drawn.
fn transfer_sections(
    dir: &Path,
    (tables, plots): &TransferReport,
) -> Vec<analyzer::document::TableSection> {
    let mut sections: Vec<_> = tables
        .iter()
        .map(|t| analyzer::document::TableSection {
            title: t.title.clone(),
            note: t.note.clone(),
            header: t.header.clone(),
            rows: t.rows.clone(),
            plots_png: Vec::new(),
        })
        .collect();
    if let Some(last) = sections.last_mut() {
        last.plots_png = plots
            .iter()
            .flatten()
            .filter_map(|(_, file)| std::fs::read(dir.join(file)).ok())
            .collect();
    }
    sections
}

/// The sysctls Pantheon's report lists: the default qdisc and the socket-buffer sizes.
pub const REPORTED_SYSCTLS: &[&str] = &[
    "net.core.default_qdisc",
    "net.core.rmem_default",
    "net.core.rmem_max",
    "net.core.wmem_default",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// The value of sysctl `name` (dotted, e.g. `net.ipv4.tcp_rmem`) on this machine, runs of
/// whitespace made single spaces; `None` if it cannot be read.
pub fn read_sysctl(name: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/sys/{}", name.replace('.', "/"))).ok()?;
    Some(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Pantheon's system info of the machine writing the report: kernel, then the
/// [`REPORTED_SYSCTLS`] (`name = value`).
pub fn system_info() -> Vec<String> {
    let mut lines = vec![format!(
        "{} {}",
        read_sysctl("kernel.ostype").unwrap_or_else(|| "Linux".into()),
        read_sysctl("kernel.osrelease").unwrap_or_default()
    )];
    for name in REPORTED_SYSCTLS {
        if let Some(v) = read_sysctl(name) {
            lines.push(format!("{name} = {v}"));
        }
    }
    lines
}

/// Pantheon's per-run plots: `<scheme>_datalink_throughput_run<N>.png` (500 ms bins) and
/// `<scheme>_datalink_delay_run<N>.png`; with the feature `parquet`, their data beside them
/// as `<scheme>_datalink_throughput_run<N>.parquet` and `<scheme>_datalink_delay_run<N>.parquet`
/// ([`analyzer::timeseries::write_parquet`]) and, from the link log, the uplink queue's
/// `<scheme>_datalink_queue_run<N>.parquet` ([`analyzer::timeseries::write_queue_parquet`]);
/// a failure to write them is a note in `flags`.
fn run_plots(
    dir: &Path,
    scheme: &str,
    run_id: u32,
    frames: &analyzer::ingest::RunFrames,
    stats: &RunStats,
    flags: &mut Vec<String>,
) -> anyhow::Result<()> {
    let ts = analyzer::timeseries::time_series(
        &frames.arrivals,
        &frames.departures,
        frames.opportunities.as_ref(),
        stats,
        PLOT_BIN_MS,
    )?;
    report::throughput_plot(
        &dir.join(format!("{scheme}_datalink_throughput_run{run_id}.png")),
        &ts,
    )?;
    report::delay_plot(
        &dir.join(format!("{scheme}_datalink_delay_run{run_id}.png")),
        &ts,
    )?;
    #[cfg(feature = "parquet")]
    if let Err(e) = analyzer::timeseries::write_parquet(
        &ts,
        &frames.departures,
        &dir.join(format!("{scheme}_datalink_throughput_run{run_id}.parquet")),
        &dir.join(format!("{scheme}_datalink_delay_run{run_id}.parquet")),
    ) {
        flags.push(format!("time series not written: {e}"));
    }
    #[cfg(feature = "parquet")]
    if let Some(queue) = &frames.queue {
        let path = dir.join(format!("{scheme}_datalink_queue_run{run_id}.parquet"));
        if let Err(e) = analyzer::timeseries::write_queue_parquet(&ts, queue, &path) {
            flags.push(format!("queue series not written: {e}"));
        }
    }
    #[cfg(not(feature = "parquet"))]
    let _ = flags;
    Ok(())
}

/// A flag per flow whose packets lost their ECN field on the path (sent ECN-capable, delivered
/// Not-ECT: a middlebox "bleached" it), so that its transport could not hear marks.
fn bleaching(stats: &RunStats) -> Vec<String> {
    stats
        .flows
        .iter()
        .filter_map(|(flow, f)| Some((flow, f.ecn?)))
        .filter(|(_, e)| e.bleached > 0)
        .map(|(flow, e)| {
            format!(
                "ECN bleaching: {} packets of flow {flow} were sent ECN-capable and delivered \
                 Not-ECT (the path cleared their ECN field)",
                e.bleached
            )
        })
        .collect()
}

/// `x` if it is a number: a mean over no second of an interval (NaN) is written `null`, and
/// read back as `None`.
fn finite(x: f64) -> Option<f64> {
    Some(x).filter(|x| x.is_finite())
}

/// A flow's (or all flows') figures: Pantheon's three, plus our extras (ms), named as such:
/// the minimum one-way delay and the 95th-percentile queueing delay (one-way delay above the
/// flow's minimum), and the ECN counts when the logs recorded codepoints.
fn flow_perf(f: &analyzer::FlowStats) -> FlowPerf {
    FlowPerf {
        tput: Some(f.tput_mbps),
        delay: f.p95_delay_ms,
        loss: Some(f.loss),
        min_delay: f.min_delay_ms,
        queueing_delay: f.p95_queueing_delay_ms,
        ecn: f.ecn.map(Into::into),
        ..FlowPerf::default()
    }
}

/// Rewrites `<scheme>_stats_run<N>.log` as Pantheon's plot.py does: keep the runner's
/// `Start at:`/`End at:`/`clock offset:` lines, then append the datalink statistics.
fn write_stats_log(dir: &Path, scheme: &str, r: &RunResult) -> anyhow::Result<()> {
    let path = dir.join(format!("{scheme}_stats_run{}.log", r.run_id));
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let mut s: String = old
        .lines()
        .filter(|l| l.contains("Start at:") || l.contains("End at:") || l.contains("clock offset:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let _ = writeln!(
        s,
        "\n# Below is generated by pantheon-rs analyze at {}",
        crate::plan::utc_now()
    );
    match &r.stats {
        Some(stats) => {
            let _ = writeln!(s, "# Datalink statistics");
            s.push_str(&report::stats_text(stats));
        }
        None => {
            let _ = writeln!(
                s,
                "# Run {}: {}",
                r.status().to_uppercase(),
                r.reason().unwrap_or("no reason recorded")
            );
        }
    }
    for f in &r.flags {
        let _ = writeln!(s, "# Warning: {f}");
    }
    Ok(write_atomic(&path, s.as_bytes())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_s_files_to_look_inside_are_its_own() {
        let dir = std::env::temp_dir().join(format!("look-inside-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ours = [
            "quic_acklink_run1_flow1.ingress.pcapng",
            "quic_datalink_delay_run1.parquet",
            "quic_datalink_run1_flow2.egress.pcapng",
            "quic_datalink_throughput_run1.parquet",
            "quic_run1_flow1.sender.keys",
            "quic_run1_flow1.sender.sqlog",
        ];
        let others = [
            "quic_bbr2_run1_flow1.sender.keys", // another scheme
            "quic_run12_flow1.sender.keys",     // another run
            "quic_run1_flow1.sender.out",       // not to look inside
            "quic_datalink_run1_flow1.egress.ptlog",
            "quic_datalink_delay_run12.parquet",
        ];
        for f in ours.iter().chain(&others) {
            std::fs::write(dir.join(f), b"").unwrap();
        }
        let found = files_to_look_inside(&dir, "quic", 1);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(found, ours);
    }

    #[test]
    fn a_bleached_flow_is_flagged_and_a_clean_one_is_not() {
        let flow = |bleached| analyzer::FlowStats {
            tput_mbps: 1.0,
            p95_delay_ms: None,
            min_delay_ms: None,
            p95_queueing_delay_ms: None,
            loss: 0.0,
            arrived: 10,
            departed: 10,
            duration_ms: 1.0,
            negative_delays: 0,
            ecn: Some(analyzer::metrics::EcnCounts {
                bleached,
                ..Default::default()
            }),
        };
        let stats = RunStats {
            total: flow(3),
            flows: BTreeMap::from([(1, flow(0)), (2, flow(3))]),
            capacity_mbps: None,
        };
        assert_eq!(
            bleaching(&stats),
            [
                "ECN bleaching: 3 packets of flow 2 were sent ECN-capable and delivered Not-ECT \
              (the path cleared their ECN field)"
            ]
        );
    }

    #[test]
    fn an_analysed_directory_is_read_not_analysed_again() {
        // A perf file alone (Pantheon's, say; no metadata, no logs): analysing could only fail,
        // so figures coming back show it was read as it is.
        let dir = std::env::temp_dir().join(format!("perf-runs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(PERF_FILE),
            r#"{"cubic": {"1": {"all": {"tput": 90.0, "delay": 40.0, "loss": 0.01}},
                          "2": {"valid": false}},
                "vegas": {}}"#,
        )
        .unwrap();
        let registry = Registry::load(None).unwrap();
        let runs = perf_runs(&dir, &registry);
        std::fs::remove_file(dir.join(PERF_FILE)).unwrap();
        let missing = perf_runs(&dir, &registry).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        let runs = runs.unwrap();
        assert_eq!(runs["cubic"].tput_mbps, [90.0]);
        assert_eq!(runs["cubic"].loss_pct, [1.0]);
        assert!(runs["vegas"].tput_mbps.is_empty());
        assert!(
            missing.to_string().contains("not a results directory"),
            "{missing}"
        );
    }

    #[test]
    fn logs_that_cannot_be_are_flagged() {
        use analyzer::text::{Events, LinkTextLog};
        // A merged log: one packet sent, two received (the second at `t_last` ms, `size`
        // bytes), two opportunities of 1500 bytes.
        let frames = |t_last: f64, size: u64| {
            analyzer::ingest::from_link_text(LinkTextLog {
                init_ms: Some(0.0),
                arrivals: Events {
                    flow: vec![1],
                    t_ms: vec![0.0],
                    size: vec![1500],
                },
                departures: Events {
                    flow: vec![1, 1],
                    t_ms: vec![5.0, t_last],
                    size: vec![1500, size],
                },
                delay_ms: vec![5.0, 5.0],
                opportunities: Events {
                    flow: vec![0, 0],
                    t_ms: vec![1.0, 2.0],
                    size: vec![1500, 1500],
                },
                ..LinkTextLog::default()
            })
            .unwrap()
        };
        let meta = Metadata {
            runtime: 30.0,
            first_side_setup: Some(1.0),
            drain_timeout: Some(5.0),
            ..Metadata::default()
        };
        // Within 1 + 30 + 5 + 15 s, no more than offered: nothing to say.
        assert!(implausible(&frames(50_000.0, 1500), &meta, meta.runtime)
            .unwrap()
            .is_empty());
        let f = implausible(&frames(52_000.0, 9000), &meta, meta.runtime).unwrap();
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(
            f[0].starts_with("times outside the run: 1 packets"),
            "{f:?}"
        );
        assert!(f[1].starts_with("above capacity: 10500 bytes"), "{f:?}");
    }
}
