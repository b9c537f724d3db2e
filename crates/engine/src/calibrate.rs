//! `pantheon calibrate`: fits the paper's five-parameter emulator to a real path's results by
//! Bayesian optimisation ([`emucal::calibrate`]), measuring each candidate by running the
//! target's schemes over it, as the Pantheon paper did (§5) — on one machine, a few candidates
//! at a time (`--jobs`), each in namespaces of its own.
//!
//! The target is a results directory (ours, or Pantheon's archived logs) or a table of
//! per-scheme figures (CSV or JSON, [`load_target`]). The search runs once with constant and
//! once with Poisson deliveries; the best candidates are measured again at the end (the
//! objective is noisy) and the best mean wins. Everything lands in `--out` (default
//! `calibration/`):
//!
//! - `search.log`: one line per evaluation, Pantheon's `bw=…,delay=…,uplink_queue=…,
//!   tput_loss=…,delay_loss=…,overall_loss=…` plus our fields ([`Evaluation::to_line`]); a
//!   calibration started again with the same `--out` resumes from it;
//! - `emulator.json`: the best emulator as a preset for `pantheon run local --emulator
//!   calibration/emulator.json` and `pantheon shell --emulator …`;
//! - `mahimahi.txt` and its trace: the same emulator as a Mahimahi command line;
//! - `calibration.json`: target, bounds, best emulator and its error, leave-one-out check,
//!   wall time;
//! - `figure3.svg`: the paper's Figure 3, each scheme's real result (filled dot) and its result
//!   over the emulator (open dot); `convergence.svg`: every evaluation's error and the best so
//!   far.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use analyzer::compare::{median, replication_error, SchemeRuns};
use anyhow::{bail, Context};
use emucal::calibrate::{delivery_str, Bounds, Candidate, Evaluation, Observations, Search};
use emucal::mm::Delivery;
use serde_json::json;

use crate::compare::{load_runs, load_table, table_runs};
use crate::plan::{write_constant_trace, write_json, ExperimentPlan};
use crate::runner::{run_once, RunOutcome, INTERRUPTED};
use crate::schemes::Registry;

/// What the emulator must reproduce.
#[derive(Debug, Clone)]
pub struct Target {
    /// Per scheme, the target's per-run figures (a table gives one value: its median).
    pub schemes: BTreeMap<String, SchemeRuns>,
    /// What the target's runs show of the path (for the search bounds).
    pub observations: Observations,
    /// Candidates read off the target, evaluated first ([`initial_guesses`], and for a table
    /// [`shallow_queue_guess`] too).
    pub guesses: Vec<Candidate>,
    /// Where it came from, for the outputs.
    pub source: String,
}

impl Target {
    /// Its schemes' names, comma-separated, for messages.
    pub fn scheme_names(&self) -> String {
        self.schemes.keys().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// Reads a target: a results directory (`pantheon_perf.json` or its logs; the packet logs give
/// the observations), or a table ([`load_table`]: CSV or JSON of per-scheme medians).
/// A table has no packet logs, so its observations are read off its figures: the smallest p95
/// delay bounds the one-way delay (2 × "minimum delay" = smallest p95), the largest throughput
/// stands for the peak rate, and the largest throughput × largest p95 delay for the packets in
/// flight. Errors name the file (and the line for CSV).
pub fn load_target(path: &Path, registry: &Registry) -> anyhow::Result<Target> {
    let source = path.display().to_string();
    if path.is_dir() {
        return target_from_dir(path, registry);
    }
    let rows = load_table(path)?;
    let schemes = table_runs(&rows);
    let mut o = Observations {
        loss: rows
            .iter()
            .filter_map(|r| r.loss_pct.map(|l| l / 100.0))
            .collect(),
        ..Observations::default()
    };
    let max_tput = rows.iter().map(|r| r.tput_mbps).fold(0.0, f64::max);
    let min_p95 = rows
        .iter()
        .map(|r| r.delay_ms)
        .fold(f64::INFINITY, f64::min);
    let max_p95 = rows.iter().map(|r| r.delay_ms).fold(0.0, f64::max);
    o.min_delay_ms = vec![min_p95 / 2.0];
    o.peak_tput_mbps = vec![max_tput];
    o.max_in_flight = vec![packets_per_ms(max_tput) * max_p95];
    let mut guesses = initial_guesses(&o);
    guesses.extend(shallow_queue_guess(&o, min_p95, max_p95));
    Ok(Target {
        schemes,
        guesses,
        observations: o,
        source,
    })
}

/// 1500-byte packets per ms at `mbps`.
fn packets_per_ms(mbps: f64) -> f64 {
    mbps * 1000.0 / 12_000.0
}

fn target_from_dir(dir: &Path, registry: &Registry) -> anyhow::Result<Target> {
    let schemes = load_runs(dir, registry)?;
    if schemes.is_empty() {
        bail!("{}: no runs with figures", dir.display());
    }
    // A directory with only `pantheon_perf.json` has Pantheon's defaults: run 1, once.
    let meta = analyzer::results::Metadata::read(dir).unwrap_or_default();
    let (first, runs) = (meta.start_run_id, meta.run_times);
    let mut o = Observations::default();
    for scheme in schemes.keys() {
        for run in first..first + runs {
            let Ok(f) = analyzer::ingest::read_run(dir, scheme, run) else {
                continue;
            };
            let stats = f.stats()?;
            let shape = analyzer::metrics::path_shape(&f.departures, 500.0)?;
            o.min_delay_ms.extend(stats.total.min_delay_ms);
            o.peak_tput_mbps.push(shape.peak_tput_mbps);
            o.max_in_flight.push(shape.max_in_flight as f64);
            o.loss.push(stats.total.loss);
        }
    }
    if o.peak_tput_mbps.is_empty() {
        bail!(
            "{}: no packet logs could be read (a results directory's bounds come from its \
             logs; give the bounds with --rate-mbps, --delay-ms, --queue-packets, --loss, or a \
             table target)",
            dir.display()
        );
    }
    Ok(Target {
        schemes,
        guesses: initial_guesses(&o),
        observations: o,
        source: dir.display().to_string(),
    })
}

/// First guesses read off the observations, evaluated first: rate = median peak throughput,
/// delay = median minimum one-way delay less one packet's serialisation, queue = most packets
/// in flight less the path's one-way BDP; and loss = the smallest run's loss, then the same
/// with no loss — a run's loss counts its queue's drops too, so the random loss is somewhere
/// between (the search takes it from there).
pub fn initial_guesses(o: &Observations) -> Vec<Candidate> {
    initial_guess(o).map_or_else(Vec::new, with_loss_free_twin)
}

/// A table target's second first guess. A table has no minimum one-way delay: its smallest
/// p95 is the propagation delay plus the queueing of the scheme that queues least, in an
/// unknown split. [`initial_guesses`] assume half of it is queueing (a deep buffer); this one
/// assumes little is (`SHALLOW` of it: a path whose delay-based schemes keep p95 close to the
/// propagation delay), with the queue the largest p95 (`max_p95`, ms) then holds at the rate.
/// The two ends of the delay/queue ridge a table cannot resolve (docs/calibration.md); empty
/// if the observations are. With loss, also its loss-free twin.
pub fn shallow_queue_guess(o: &Observations, min_p95: f64, max_p95: f64) -> Vec<Candidate> {
    /// Share of the smallest p95 delay taken as queueing.
    const SHALLOW: f64 = 0.15;
    let Some(deep) = initial_guess(o) else {
        return Vec::new();
    };
    let rate = deep.rate_mbps;
    let delay = ((1.0 - SHALLOW) * min_p95 - 1.0 / packets_per_ms(rate)).max(0.0);
    let g = Candidate {
        delay_ms: delay.round() as u32,
        queue_packets: (packets_per_ms(rate) * (max_p95 - delay)).max(1.0).round() as u32,
        ..deep
    };
    with_loss_free_twin(g)
}

/// `g`, then `g` without loss if it has some.
fn with_loss_free_twin(g: Candidate) -> Vec<Candidate> {
    if g.loss > 0.0 {
        vec![g, Candidate { loss: 0.0, ..g }]
    } else {
        vec![g]
    }
}

fn initial_guess(o: &Observations) -> Option<Candidate> {
    let rate = median(&o.peak_tput_mbps)?;
    let min_delay = median(&o.min_delay_ms)?;
    let delay = (min_delay - 1.0 / packets_per_ms(rate)).max(0.0);
    let in_flight = o.max_in_flight.iter().copied().fold(0.0, f64::max);
    Some(Candidate {
        rate_mbps: rate,
        delay_ms: delay.round() as u32,
        queue_packets: (in_flight - packets_per_ms(rate) * delay).max(1.0).round() as u32,
        loss: o.loss.iter().copied().reduce(f64::min).unwrap_or(0.0),
        delivery: Delivery::Trace,
    })
}

/// Everything `pantheon calibrate` is asked to do.
#[derive(Debug, Clone)]
pub struct CalibrateOptions {
    /// Schemes to run over each candidate (default: every scheme of the target).
    pub schemes: Vec<String>,
    /// Duration of each run.
    pub runtime: Duration,
    /// Runs per scheme and candidate (their median is compared).
    pub run_times: u32,
    /// Candidates measured at once.
    pub jobs: usize,
    /// Evaluations per delivery process, the initial design included.
    pub max_evals: usize,
    /// Space-filling evaluations before the optimiser takes over (the first are the guesses).
    pub initial_evals: usize,
    /// Best candidates measured again at the end (0: none).
    pub confirm: usize,
    /// Delivery processes to search.
    pub deliveries: Vec<Delivery>,
    /// Bounds overriding the derived ones, per parameter.
    pub rate_mbps: Option<(f64, f64)>,
    /// One-way delay bounds, ms.
    pub delay_ms: Option<(u32, u32)>,
    /// DropTail bounds, packets.
    pub queue_packets: Option<(u32, u32)>,
    /// Loss bounds, fraction.
    pub loss: Option<(f64, f64)>,
    /// Output directory.
    pub out_dir: PathBuf,
    /// Seed of the search and of the emulator's loss.
    pub seed: u64,
    /// Keep every evaluation's packet logs (`evals/<n>/`).
    pub keep_runs: bool,
    /// Extra scheme descriptors (recorded in plans).
    pub schemes_dir: Option<PathBuf>,
    /// Prefix of network namespace names.
    pub netns_prefix: String,
}

/// The result of a calibration.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    /// The best emulator.
    pub best: Candidate,
    /// Its replication error, percent: the mean over its measurements.
    pub error_pct: f64,
    /// The mean throughput and delay parts, percent.
    pub tput_error_pct: f64,
    /// The delay part, percent.
    pub delay_error_pct: f64,
    /// Measurements of the best emulator.
    pub measurements: usize,
    /// Evaluations in the log (resumed ones included).
    pub evaluations: usize,
    /// Bounds searched.
    pub bounds: Bounds,
    /// Leave-one-out check per scheme: the best emulator of the other schemes' error, and that
    /// emulator's errors on this one (throughput, delay), percent.
    pub leave_one_out: BTreeMap<String, LeaveOneOut>,
}

/// One scheme held out.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct LeaveOneOut {
    /// The fit's replication error on the other schemes, percent.
    pub fit_error_pct: f64,
    /// Its throughput error on the held-out scheme, percent.
    pub tput_error_pct: f64,
    /// Its delay error on the held-out scheme, percent.
    pub delay_error_pct: f64,
}

/// Progress reports of [`calibrate`].
pub trait Progress {
    /// An evaluation finished; `done` of `total` planned; `best` so far.
    fn evaluated(&self, e: &Evaluation, done: usize, total: usize, best: Option<&Evaluation>);
    /// Evaluations are starting (`what` says which phase).
    fn phase(&self, what: &str);
}

/// Runs the calibration, measuring candidates with `evaluator` (e.g. [`LocalEvaluator`]); see
/// the module docs for the outputs. `registry` checks the scheme names and gives the plots'
/// labels and colors.
pub fn calibrate(
    target: &Target,
    opts: &CalibrateOptions,
    registry: &Registry,
    evaluator: &dyn Evaluator,
    progress: &dyn Progress,
) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let out = &opts.out_dir;
    std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
    for s in &opts.schemes {
        if !target.schemes.contains_key(s) {
            bail!(
                "{s} is not in the target ({}): the target has {}",
                target.source,
                target.scheme_names()
            );
        }
        registry.get(s)?;
    }
    let mut sub = target.clone();
    sub.schemes.retain(|k, _| opts.schemes.contains(k));
    let target = &sub;
    let bounds = resolve_bounds(&target.observations, opts)?;

    let log_path = out.join("search.log");
    let mut evals = resume(&log_path, target, opts)?;
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("open {}", log_path.display()))?;
    let total = opts.deliveries.len() * opts.max_evals + opts.confirm;
    let mut seq = evals.len();
    let mut record = |batch: Vec<Evaluation>, evals: &mut Vec<Evaluation>| -> anyhow::Result<()> {
        for e in batch {
            writeln!(log, "{}", e.to_line())
                .and_then(|()| log.flush())
                .with_context(|| format!("write {}", log_path.display()))?;
            evals.push(e);
            let best = best_single(evals);
            progress.evaluated(evals.last().expect("pushed"), evals.len(), total, best);
        }
        Ok(())
    };

    let guesses = &target.guesses;
    for &delivery in &opts.deliveries {
        let mut search = Search::new(bounds, delivery, opts.jobs, opts.seed)?;
        for e in evals.iter().filter(|e| e.candidate.delivery == delivery) {
            search.tell(&e.candidate, e.overall_error_pct);
        }
        progress.phase(&format!("{} deliveries", delivery_str(delivery)));
        let design = search.initial_design(opts.initial_evals.min(opts.max_evals), guesses);
        while search.told() < opts.max_evals && !INTERRUPTED.load(Ordering::SeqCst) {
            let room = (opts.max_evals - search.told()).min(opts.jobs.max(1));
            let batch: Vec<Candidate> = if search.told() < design.len() {
                design[search.told()..].iter().take(room).copied().collect()
            } else {
                search.suggest().into_iter().take(room).collect()
            };
            if batch.is_empty() {
                break;
            }
            let batch: Vec<(Candidate, u64)> = batch.into_iter().map(|c| (c, opts.seed)).collect();
            let results = evaluate_all(&batch, target, evaluator, &mut seq)?;
            for e in &results {
                search.tell(&e.candidate, e.overall_error_pct);
            }
            record(results, &mut evals)?;
        }
    }

    // The objective is noisy: measure the best few again, with other seeds of the emulator's
    // loss (the search used one seed for every candidate: common random numbers make
    // candidates comparable, but a candidate may fit that one loss pattern by chance); the
    // best mean wins.
    if opts.confirm > 0 && !INTERRUPTED.load(Ordering::SeqCst) {
        progress.phase("measuring the best candidates again, with other loss seeds");
        let top = ranked(&evals)
            .into_iter()
            .take(opts.confirm)
            .enumerate()
            .map(|(i, (c, _, _))| (c, opts.seed + 1000 + (evals.len() + i) as u64))
            .collect::<Vec<_>>();
        for chunk in top.chunks(opts.jobs.max(1)) {
            let results = evaluate_all(chunk, target, evaluator, &mut seq)?;
            record(results, &mut evals)?;
        }
    }
    if !opts.keep_runs {
        // Only the empty `evals/` is left of the runs (removed after each evaluation).
        let _ = std::fs::remove_dir(out.join("evals"));
    }
    let outcome = outcome(target, bounds, &evals, &log_path)?;
    write_outputs(target, opts, registry, &outcome, &evals, started.elapsed())?;
    Ok(outcome)
}

/// The evaluations of an earlier calibration with the same `--out` (`search.log`), to resume
/// from; none without a log. Errors on a line that cannot be read, or a log of other schemes
/// (a different calibration), naming the file and line.
fn resume(
    log_path: &Path,
    target: &Target,
    opts: &CalibrateOptions,
) -> anyhow::Result<Vec<Evaluation>> {
    let mut evals: Vec<Evaluation> = Vec::new();
    if !log_path.exists() {
        return Ok(evals);
    }
    let text = std::fs::read_to_string(log_path)
        .with_context(|| format!("read {}", log_path.display()))?;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let e = Evaluation::parse_line(line, i + 1)
            .with_context(|| format!("resume from {}", log_path.display()))?;
        // A log of other schemes is a different calibration.
        if e.failure.is_none() && e.schemes.keys().ne(target.schemes.keys()) {
            bail!(
                "{} line {}: its schemes are not {}: use another --out",
                log_path.display(),
                i + 1,
                opts.schemes.join(" ")
            );
        }
        evals.push(e);
    }
    Ok(evals)
}

/// The calibration's result from all its evaluations: the candidate with the best mean error,
/// its parts, the leave-one-out check. Errors if no evaluation succeeded.
fn outcome(
    target: &Target,
    bounds: Bounds,
    evals: &[Evaluation],
    log_path: &Path,
) -> anyhow::Result<Outcome> {
    let Some((best, error_pct, n)) = ranked(evals).into_iter().next() else {
        bail!(
            "no evaluation succeeded; see the failures in {}",
            log_path.display()
        );
    };
    let of_best: Vec<&Evaluation> = evals
        .iter()
        .filter(|e| e.candidate == best && e.overall_error_pct.is_some())
        .collect();
    let mean_of = |f: fn(&Evaluation) -> Option<f64>| {
        of_best.iter().filter_map(|e| f(e)).sum::<f64>() / of_best.len() as f64
    };
    Ok(Outcome {
        best,
        error_pct,
        tput_error_pct: mean_of(|e| e.tput_error_pct),
        delay_error_pct: mean_of(|e| e.delay_error_pct),
        measurements: n,
        evaluations: evals.len(),
        bounds,
        leave_one_out: leave_one_out(target, evals),
    })
}

fn resolve_bounds(o: &Observations, opts: &CalibrateOptions) -> anyhow::Result<Bounds> {
    let derived = Bounds::from_observations(o);
    let all_given = opts.rate_mbps.is_some()
        && opts.delay_ms.is_some()
        && opts.queue_packets.is_some()
        && opts.loss.is_some();
    let mut b = match derived {
        Ok(b) => b,
        Err(_) if all_given => Bounds {
            rate_mbps: (1.0, 2.0),
            delay_ms: (0, 1),
            queue_packets: (1, 2),
            loss: (0.0, 0.1),
        },
        Err(e) => return Err(e).context("derive the search bounds from the target"),
    };
    b.rate_mbps = opts.rate_mbps.unwrap_or(b.rate_mbps);
    b.delay_ms = opts.delay_ms.unwrap_or(b.delay_ms);
    b.queue_packets = opts.queue_packets.unwrap_or(b.queue_packets);
    b.loss = opts.loss.unwrap_or(b.loss);
    b.check()?;
    Ok(b)
}

/// Distinct successful candidates by mean error (with their number of measurements), best
/// first.
fn ranked(evals: &[Evaluation]) -> Vec<(Candidate, f64, usize)> {
    let mut by: Vec<(Candidate, Vec<f64>)> = Vec::new();
    for e in evals {
        let Some(err) = e.overall_error_pct else {
            continue;
        };
        match by.iter_mut().find(|(c, _)| *c == e.candidate) {
            Some((_, v)) => v.push(err),
            None => by.push((e.candidate, vec![err])),
        }
    }
    let mut out: Vec<(Candidate, f64, usize)> = by
        .into_iter()
        .map(|(c, v)| (c, v.iter().sum::<f64>() / v.len() as f64, v.len()))
        .collect();
    out.sort_by(|a, b| a.1.total_cmp(&b.1));
    out
}

fn best_single(evals: &[Evaluation]) -> Option<&Evaluation> {
    evals
        .iter()
        .filter_map(|e| Some((e.overall_error_pct?, e)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, e)| e)
}

/// Per-scheme medians as single-run [`SchemeRuns`], for [`replication_error`].
fn as_runs(m: &BTreeMap<String, (f64, f64)>) -> BTreeMap<String, SchemeRuns> {
    m.iter()
        .map(|(k, (t, d))| {
            (
                k.clone(),
                SchemeRuns {
                    tput_mbps: vec![*t],
                    delay_ms: vec![*d],
                    loss_pct: vec![],
                },
            )
        })
        .collect()
}

/// For each scheme: the evaluation that best fits the other schemes, and its error on this one
/// (from the log's per-scheme medians: no extra runs).
fn leave_one_out(target: &Target, evals: &[Evaluation]) -> BTreeMap<String, LeaveOneOut> {
    let mut out = BTreeMap::new();
    if target.schemes.len() < 2 {
        return out;
    }
    for held in target.schemes.keys() {
        let mut rest = target.schemes.clone();
        let held_runs = rest.remove(held).expect("key of the map");
        let fit = evals
            .iter()
            .filter(|e| e.failure.is_none())
            .filter_map(|e| {
                let r = replication_error(&rest, &as_runs(&e.schemes))?;
                Some((r.overall_pct, e))
            })
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let Some((fit_error, e)) = fit else { continue };
        let Some(&(t, d)) = e.schemes.get(held) else {
            continue;
        };
        let one =
            |x: f64, real: &[f64]| median(real).map_or(f64::NAN, |r| (x - r).abs() / r * 100.0);
        out.insert(
            held.clone(),
            LeaveOneOut {
                fit_error_pct: fit_error,
                tput_error_pct: one(t, &held_runs.tput_mbps),
                delay_error_pct: one(d, &held_runs.delay_ms),
            },
        );
    }
    out
}

/// Measures `batch` (candidates with the seed of their emulator's loss) in parallel, one
/// thread per candidate; `seq` numbers evaluations.
fn evaluate_all(
    batch: &[(Candidate, u64)],
    target: &Target,
    evaluator: &dyn Evaluator,
    seq: &mut usize,
) -> anyhow::Result<Vec<Evaluation>> {
    let first = *seq;
    *seq += batch.len();
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = batch
            .iter()
            .enumerate()
            .map(|(i, (c, seed))| {
                let n = first + i;
                s.spawn(move || evaluate(c, *seed, n, target, evaluator))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("an evaluation thread panicked"))
            })
            .collect::<anyhow::Result<Vec<_>>>()
    })?;
    if INTERRUPTED.load(Ordering::SeqCst) {
        // Evaluations cut short are not measurements: keep them out of the log.
        return Ok(results
            .into_iter()
            .filter(|e| e.failure.is_none())
            .collect());
    }
    Ok(results)
}

/// One candidate measured and scored against the target; never fails: a failure is recorded.
fn evaluate(
    c: &Candidate,
    seed: u64,
    n: usize,
    target: &Target,
    evaluator: &dyn Evaluator,
) -> Evaluation {
    let measured = evaluator.measure(c, seed, n);
    let mut e = Evaluation {
        candidate: *c,
        tput_error_pct: None,
        delay_error_pct: None,
        overall_error_pct: None,
        schemes: BTreeMap::new(),
        failure: None,
    };
    match measured {
        Ok(runs) => {
            for (k, r) in &runs {
                if let (Some(t), Some(d)) = (median(&r.tput_mbps), median(&r.delay_ms)) {
                    e.schemes.insert(k.clone(), (t, d));
                }
            }
            match replication_error(&target.schemes, &runs) {
                Some(r) if r.schemes == target.schemes.len() => {
                    e.tput_error_pct = Some(r.throughput_pct);
                    e.delay_error_pct = Some(r.delay_pct);
                    e.overall_error_pct = Some(r.overall_pct);
                }
                _ => e.failure = Some("some scheme has no throughput or delay".into()),
            }
        }
        Err(err) => e.failure = Some(format!("{err:#}")),
    }
    e
}

/// Measures candidates: runs the target's schemes over an emulator and returns their per-run
/// figures. [`LocalEvaluator`] runs them on this machine; an evaluator that runs them on
/// testbed agents implements the same trait, and the search does not change.
pub trait Evaluator: Sync {
    /// Every scheme over `c`, the emulator's loss seeded with `seed`; `n` numbers the
    /// evaluation (unique within a calibration). Errors say which run failed and why.
    fn measure(
        &self,
        c: &Candidate,
        seed: u64,
        n: usize,
    ) -> anyhow::Result<BTreeMap<String, SchemeRuns>>;
}

/// Runs candidates here, as `pantheon run local` would: in `out_dir/evals/<n>/` (removed after
/// unless `keep_runs`), namespaces `<netns_prefix>-e<n>-<k>-…`.
pub struct LocalEvaluator<'a> {
    /// Where the schemes come from.
    pub registry: &'a Registry,
    /// The options (schemes, runtime, run times, output directory…).
    pub opts: &'a CalibrateOptions,
}

impl Evaluator for LocalEvaluator<'_> {
    fn measure(
        &self,
        c: &Candidate,
        seed: u64,
        n: usize,
    ) -> anyhow::Result<BTreeMap<String, SchemeRuns>> {
        let dir = self.opts.out_dir.join("evals").join(n.to_string());
        let tag = format!("{}-e{n}", self.opts.netns_prefix);
        let measured = self.run(c, seed, &dir, &tag);
        if !self.opts.keep_runs {
            let _ = std::fs::remove_dir_all(&dir);
        }
        measured
    }
}

impl LocalEvaluator<'_> {
    fn run(
        &self,
        c: &Candidate,
        seed: u64,
        dir: &Path,
        tag: &str,
    ) -> anyhow::Result<BTreeMap<String, SchemeRuns>> {
        let (opts, registry) = (self.opts, self.registry);
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        let preset = c.to_preset("candidate", "");
        let trace = dir.join(preset.trace_file_name());
        write_constant_trace(&trace, c.rate_mbps)?;
        let plan = ExperimentPlan {
            schemes: opts.schemes.clone(),
            run_times: opts.run_times,
            runtime: opts.runtime,
            data_dir: dir.to_owned(),
            seed,
            uplink_trace: trace.clone(),
            downlink_trace: trace,
            prepend_mm_cmds: preset.prepend,
            extra_mm_link_args: preset.link_args,
            schemes_dir: opts.schemes_dir.clone(),
            ..ExperimentPlan::default()
        };
        let path = plan.validate(registry)?;
        let mut out = BTreeMap::new();
        let mut k = 0;
        for name in &opts.schemes {
            let scheme = registry.get(name)?;
            let runs: &mut SchemeRuns = out.entry(name.clone()).or_default();
            for run in 1..=opts.run_times {
                let rec = run_once(&plan, &path, scheme, run, &format!("{tag}-{k}"), &|_| {});
                k += 1;
                match rec.outcome {
                    RunOutcome::Ok => {}
                    RunOutcome::Failed { reason } => bail!("{name} run {run} failed: {reason}"),
                    RunOutcome::Interrupted => bail!("interrupted"),
                }
                let f = analyzer::ingest::read_run(dir, name, run)?;
                let s = f.stats()?;
                runs.tput_mbps.push(s.total.tput_mbps);
                runs.delay_ms.extend(s.total.p95_delay_ms);
                runs.loss_pct.push(s.total.loss * 100.0);
            }
        }
        Ok(out)
    }
}

fn write_outputs(
    target: &Target,
    opts: &CalibrateOptions,
    registry: &Registry,
    o: &Outcome,
    evals: &[Evaluation],
    wall: Duration,
) -> anyhow::Result<()> {
    let out = &opts.out_dir;
    write_plots(target, registry, o, evals, out)?;
    let description = format!(
        "calibrated to {} by pantheon calibrate ({}): {}; replication error {:.1} %",
        target.source,
        opts.schemes.join(", "),
        o.best.describe(),
        o.error_pct
    );
    let preset = o.best.to_preset("calibrated", &description);
    write_json(&out.join("emulator.json"), &serde_json::to_value(&preset)?)?;
    let trace = out.join(preset.trace_file_name());
    write_constant_trace(&trace, preset.rate_mbps)?;
    let words = emucal::mm::link_chain_words(
        &preset.prepend,
        Path::new(&preset.trace_file_name()),
        Path::new(&preset.trace_file_name()),
        &preset.link_args,
    );
    let mut mm = format!("{}\n", words.join(" "));
    if o.best.delivery == Delivery::Poisson {
        mm.push_str(
            "# --uplink-delivery=poisson is Pantheon-rs's (deliveries as a Poisson process at the \
             trace's rate); for Mahimahi itself, drop it and use a Poisson trace: `pantheon trace \
             poisson RATE`.\n",
        );
    }
    std::fs::write(out.join("mahimahi.txt"), mm)
        .with_context(|| format!("write {}", out.join("mahimahi.txt").display()))?;
    let mut targets = serde_json::Map::new();
    for (k, r) in &target.schemes {
        targets.insert(
            k.clone(),
            json!({"runs": r.tput_mbps.len(), "tput_mbps": median(&r.tput_mbps),
                   "delay_ms": median(&r.delay_ms)}),
        );
    }
    write_json(
        &out.join("calibration.json"),
        &json!({
            "target": target.source,
            "target_schemes": targets,
            "observations": target.observations,
            "schemes": opts.schemes,
            "runtime": opts.runtime.as_secs_f64(),
            "run_times": opts.run_times,
            "deliveries": opts.deliveries.iter().map(|d| delivery_str(*d)).collect::<Vec<_>>(),
            "max_evals": opts.max_evals,
            "jobs": opts.jobs,
            "seed": opts.seed,
            "outcome": o,
            "mahimahi_command": words.join(" "),
            "wall_time_s": wall.as_secs_f64(),
        }),
    )?;
    Ok(())
}

/// `figure3.svg` (real vs emulated per scheme, the paper's Figure 3) and `convergence.svg`.
fn write_plots(
    target: &Target,
    registry: &Registry,
    o: &Outcome,
    evals: &[Evaluation],
    out: &Path,
) -> anyhow::Result<()> {
    use analyzer::report::{calibration_plot, convergence_plot, CalibrationPoint};
    let of_best: Vec<&Evaluation> = evals
        .iter()
        .filter(|e| e.candidate == o.best && e.failure.is_none())
        .collect();
    let mut points = Vec::new();
    for (name, runs) in &target.schemes {
        let emulated: Vec<(f64, f64)> = of_best
            .iter()
            .filter_map(|e| e.schemes.get(name).copied())
            .collect();
        let (Some(t), Some(d)) = (median(&runs.tput_mbps), median(&runs.delay_ms)) else {
            continue;
        };
        if emulated.is_empty() {
            continue;
        }
        let n = emulated.len() as f64;
        let (label, color) = registry
            .get(name)
            .map_or((name.clone(), "gray".to_owned()), |s| {
                (s.label.clone(), s.color.clone())
            });
        points.push(CalibrationPoint {
            label,
            color,
            real: (d, t),
            emulated: (
                emulated.iter().map(|p| p.1).sum::<f64>() / n,
                emulated.iter().map(|p| p.0).sum::<f64>() / n,
            ),
        });
    }
    let title = format!(
        "{} (filled) vs emulator (open): {:.1} % replication error",
        Path::new(&target.source)
            .file_name()
            .map_or(target.source.clone(), |f| f.to_string_lossy().into_owned()),
        o.error_pct
    );
    calibration_plot(&out.join("figure3.svg"), &title, &points)?;
    let conv: Vec<(Option<f64>, String)> = evals
        .iter()
        .map(|e| {
            (
                e.overall_error_pct,
                delivery_str(e.candidate.delivery).to_owned(),
            )
        })
        .collect();
    convergence_plot(&out.join("convergence.svg"), "Calibration search", &conv)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(rate: f64, err: Option<f64>, cubic: (f64, f64), bbr: (f64, f64)) -> Evaluation {
        Evaluation {
            candidate: Candidate {
                rate_mbps: rate,
                delay_ms: 30,
                queue_packets: 60,
                loss: 0.0,
                delivery: Delivery::Trace,
            },
            tput_error_pct: err,
            delay_error_pct: err,
            overall_error_pct: err,
            schemes: [("cubic".to_owned(), cubic), ("bbr".to_owned(), bbr)].into(),
            failure: err.is_none().then(|| "x".to_owned()),
        }
    }

    #[test]
    fn ranking_averages_repeated_measurements_and_skips_failures() {
        let evals = vec![
            eval(10.0, Some(2.0), (1.0, 1.0), (1.0, 1.0)),
            eval(20.0, Some(1.0), (1.0, 1.0), (1.0, 1.0)),
            eval(20.0, Some(5.0), (1.0, 1.0), (1.0, 1.0)),
            eval(30.0, None, (1.0, 1.0), (1.0, 1.0)),
        ];
        let r = ranked(&evals);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].0.rate_mbps, r[0].1, r[0].2), (10.0, 2.0, 1));
        assert_eq!((r[1].0.rate_mbps, r[1].1, r[1].2), (20.0, 3.0, 2));
        assert_eq!(best_single(&evals).unwrap().candidate.rate_mbps, 20.0);
    }

    #[test]
    fn leave_one_out_fits_the_others_and_scores_the_held_out_scheme() {
        let runs = |t: f64, d: f64| SchemeRuns {
            tput_mbps: vec![t],
            delay_ms: vec![d],
            loss_pct: vec![],
        };
        let target = Target {
            schemes: [
                ("cubic".to_owned(), runs(10.0, 100.0)),
                ("bbr".to_owned(), runs(20.0, 50.0)),
            ]
            .into(),
            observations: Observations::default(),
            guesses: Vec::new(),
            source: "t".into(),
        };
        // A fits bbr exactly and cubic badly; B the other way round.
        let evals = vec![
            eval(1.0, Some(10.0), (5.0, 100.0), (20.0, 50.0)),
            eval(2.0, Some(10.0), (10.0, 100.0), (10.0, 50.0)),
        ];
        let l = leave_one_out(&target, &evals);
        // Holding out cubic: A fits bbr (0 %); A's cubic throughput is 50 % off.
        assert_eq!(l["cubic"].fit_error_pct, 0.0);
        assert!((l["cubic"].tput_error_pct - 50.0).abs() < 1e-9);
        assert_eq!(l["cubic"].delay_error_pct, 0.0);
        // Holding out bbr: B fits cubic; B's bbr throughput is 50 % off.
        assert!((l["bbr"].tput_error_pct - 50.0).abs() < 1e-9);
    }

    #[test]
    fn table_targets_read_csv_and_json_and_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::load(None).unwrap();
        let csv = dir.path().join("t.csv");
        std::fs::write(
            &csv,
            "# California → Mexico (Pantheon report 000)\nscheme,tput_mbps,delay_ms,loss_pct\n\
             cubic, 96.27, 64.37, 0.1\nbbr,95.47,58.41,0.3\n",
        )
        .unwrap();
        let t = load_target(&csv, &registry).unwrap();
        assert_eq!(t.schemes["cubic"].tput_mbps, vec![96.27]);
        assert_eq!(t.observations.min_delay_ms, vec![58.41 / 2.0]);
        // Deep-queue guesses (with and without loss), then shallow-queue ones: 85 % of the
        // smallest p95 less a packet's serialisation (8.02 packets per ms) is propagation, the
        // queue holds the largest p95's rest: 8.02 × (64.37 − 49.52) = 119 packets.
        let g: Vec<_> = t
            .guesses
            .iter()
            .map(|c| (c.rate_mbps, c.delay_ms, c.queue_packets, c.loss))
            .collect();
        assert_eq!(
            g,
            vec![
                (96.27, 29, 283, 0.001),
                (96.27, 29, 283, 0.0),
                (96.27, 50, 119, 0.001),
                (96.27, 50, 119, 0.0)
            ]
        );
        let b = Bounds::from_observations(&t.observations).unwrap();
        assert_eq!(b.delay_ms, (0, 59));
        assert_eq!(b.rate_mbps, (48.14, 192.54));
        let json = dir.path().join("t.json");
        std::fs::write(
            &json,
            r#"[{"scheme": "cubic", "tput_mbps": 96.27, "delay_ms": 64.37}]"#,
        )
        .unwrap();
        assert_eq!(load_target(&json, &registry).unwrap().schemes.len(), 1);
        std::fs::write(&csv, "scheme,tput_mbps,delay_ms\ncubic,fast,1\n").unwrap();
        let e = format!("{:#}", load_target(&csv, &registry).unwrap_err());
        assert!(e.contains("t.csv line 2"), "{e}");
    }

    #[test]
    fn the_guesses_read_rate_delay_queue_and_loss_off_the_observations() {
        let o = Observations {
            min_delay_ms: vec![30.5],
            peak_tput_mbps: vec![24.0],
            max_in_flight: vec![120.0],
            loss: vec![0.02, 0.005],
        };
        let g = initial_guesses(&o);
        // 24 Mbit/s = 2 packets per ms: 0.5 ms of serialisation, 60 packets of one-way BDP.
        assert_eq!(
            (g[0].rate_mbps, g[0].delay_ms, g[0].queue_packets),
            (24.0, 30, 60)
        );
        assert_eq!(g[0].loss, 0.005);
        assert_eq!(g[1], Candidate { loss: 0.0, ..g[0] });
        assert_eq!(g.len(), 2);
    }
}
