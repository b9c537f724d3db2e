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

use analyzer::stats::{median, SchemeRuns};
use anyhow::{bail, Context};
use emucal::calibrate::{delivery_str, Bounds, Candidate, Evaluation, Observations};
use emucal::fit::{best_single, fit, outcome, FitHooks, FitPlan};
/// The fit's parts that the calibration's callers see.
pub use emucal::fit::{Evaluator, LeaveOneOut, Outcome};
use emucal::mm::{Delivery, Shell};
use emucal::presets::Preset;
use serde_json::json;

use crate::compare::{load_runs, load_table, table_runs};
use crate::experiment::{run_all, Quiet, RunsOptions};
use crate::plan::{write_constant_trace, write_json, ExperimentPlan};
use crate::record::INTERRUPTED;
use crate::runner::run_once;
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

    /// Reads the target's scheme names as Pantheon's schemes of `era` (`--pantheon-era`,
    /// issue 55; without one, the names no descriptor carries are read as of the seed reports'
    /// era, [`Registry::read_as_of`]): a Pantheon name becomes the scheme here that runs it as
    /// Pantheon did that day (the target's `copa` of 2017 is measured with, and filed as,
    /// `copa_orig`); one with no scheme of that era is left out of the target, never measured
    /// with another era's program. Returns, per name that changed, the name and what became of
    /// it (`Ok(ours)` or why it was left out).
    pub fn as_pantheon_ran(
        &mut self,
        registry: &Registry,
        era: Option<crate::provenance::Day>,
    ) -> Vec<(String, Result<String, String>)> {
        let names: Vec<String> = self.schemes.keys().cloned().collect();
        let mut changes = Vec::new();
        for (asked, ours) in registry.read_as_of(&names, era) {
            let runs = self.schemes.remove(&asked).expect("a name of the target");
            match ours {
                Ok(ours) => {
                    if ours != asked {
                        changes.push((asked, Ok(ours.clone())));
                    }
                    self.schemes.insert(ours, runs);
                }
                Err(e) => changes.push((asked, Err(e.to_string()))),
            }
        }
        changes
    }
}

/// Reads a target: a results directory (`pantheon_perf.json` or its logs; the packet logs give
/// the observations), or a table ([`load_table`]: CSV or JSON of per-scheme medians).
/// A table has no packet logs, so its observations are read off its figures: the smallest p95
/// delay bounds the one-way delay (2 × "minimum delay" = smallest p95), each scheme's
/// throughput stands for a run's peak rate (the first guesses take the largest), and the
/// largest throughput × largest p95 delay for the packets in flight. Errors name the file (and
/// the line for CSV).
pub fn load_target(path: &Path, registry: &Registry) -> anyhow::Result<Target> {
    let source = path.display().to_string();
    if path.is_dir() {
        return target_from_dir(path, registry);
    }
    let rows = load_table(path)?;
    let schemes = table_runs(&rows);
    let max_tput = rows.iter().map(|r| r.tput_mbps).fold(0.0, f64::max);
    let min_p95 = rows
        .iter()
        .map(|r| r.delay_ms)
        .fold(f64::INFINITY, f64::min);
    let max_p95 = rows.iter().map(|r| r.delay_ms).fold(0.0, f64::max);
    // The search space takes every scheme's throughput as a run's peak, so its lower rate bound
    // is half the *median* scheme's, as Pantheon's heuristic is half the median run's peak; the
    // guesses take the largest for the link rate. With only the largest, a table whose
    // aggressive schemes outran the others (PCC 356 Mbit/s where Cubic got 86, Brazil →
    // Colombia) put the polite schemes' rates outside the space (178–712 Mbit/s).
    let o = Observations {
        loss: rows
            .iter()
            .filter_map(|r| r.loss_pct.map(|l| l / 100.0))
            .collect(),
        min_delay_ms: vec![min_p95 / 2.0],
        peak_tput_mbps: rows.iter().map(|r| r.tput_mbps).collect(),
        max_in_flight: vec![packets_per_ms(max_tput) * max_p95],
    };
    let largest = Observations {
        peak_tput_mbps: vec![max_tput],
        ..o.clone()
    };
    let mut guesses = initial_guesses(&largest);
    guesses.extend(shallow_queue_guess(&largest, min_p95, max_p95));
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
    // A directory with only `pantheon_perf.json`: Pantheon's defaults, run 1 of each scheme.
    let runs = match analyzer::results::Metadata::read(dir) {
        Ok(meta) => meta.runs(),
        Err(_) => schemes.keys().map(|s| (s.clone(), 1)).collect(),
    };
    let mut o = Observations::default();
    for scheme in schemes.keys() {
        for run in runs.iter().filter(|(s, _)| s == scheme).map(|&(_, id)| id) {
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
        cross_mbps: 0.0,
        host_buffer_bytes: 0,
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
    /// Uplink cross traffic bounds, Mbit/s: searched as a fifth parameter when given
    /// (`--cross-traffic LOW,HIGH`); `None`: candidates carry none.
    pub cross_mbps: Option<(f64, f64)>,
    /// End hosts' TCP buffer maximum bounds, bytes: searched (log₂ scale) when given
    /// (`--host-buffers LOW,HIGH`); `None`: `hosts`, or the machine's own.
    pub host_buffer_bytes: Option<(u64, u64)>,
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
    /// Evaluate candidates in simulated time ([`crate::simulate`]).
    pub simulate: bool,
    /// `pt-host` shells (end hosts' TCP buffers, [`emucal::host`]) every candidate carries:
    /// the target's hosts where they are known (`--hosts`), not searched. Empty: the
    /// machine's own.
    pub hosts: Vec<Shell>,
}

impl CalibrateOptions {
    /// Candidate `c` as a preset ([`Candidate::to_preset`]) with the options' `pt-host`
    /// shells first in its chain.
    pub fn preset(&self, c: &Candidate, name: &str, description: &str) -> Preset {
        let mut preset = c.to_preset(name, description);
        let shells = std::mem::take(&mut preset.emulator.shells);
        preset.emulator.shells = self.hosts.iter().cloned().chain(shells).collect();
        preset
    }
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
    SearchIdentity::of(target, opts).check_or_write(&out.join(SearchIdentity::FILE))?;
    let mut evals = resume(&log_path, target, opts)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("open {}", log_path.display()))?;
    let plan = FitPlan {
        bounds,
        deliveries: opts.deliveries.clone(),
        max_evals: opts.max_evals,
        initial_evals: opts.initial_evals,
        confirm: opts.confirm,
        jobs: opts.jobs,
        seed: opts.seed,
    };
    let mut hooks = SearchLog {
        file,
        path: &log_path,
        progress,
        total: plan.total(),
    };
    let guesses = &target.guesses;
    fit(
        &plan,
        &target.schemes,
        guesses,
        evaluator,
        &mut hooks,
        &mut evals,
    )
    .map_err(anyhow::Error::msg)?;
    if !opts.keep_runs {
        // Only the empty `evals/` is left of the runs (removed after each evaluation).
        let _ = std::fs::remove_dir(out.join("evals"));
    }
    let outcome = outcome(&target.schemes, bounds, &evals).ok_or_else(|| {
        anyhow::anyhow!(
            "no evaluation succeeded; see the failures in {}",
            log_path.display()
        )
    })?;
    write_outputs(target, opts, registry, &outcome, &evals, started.elapsed())?;
    Ok(outcome)
}

/// What a search's evaluations measured, beyond the candidate each log line names: kept in
/// `OUT/search-identity.json` when a search starts, so that resuming with flags that change
/// what a candidate's figures mean (another target, runtime, run count, simulated time, end
/// hosts, or cross traffic or host buffers searched or not) is refused instead of mixing two searches' figures.
/// `--max-evals`, `--delivery`, `--jobs` and the seed may change between runs: they change how
/// far the search goes, not what it measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct SearchIdentity {
    target: String,
    schemes: Vec<String>,
    runtime_s: f64,
    run_times: u32,
    simulate: bool,
    hosts: String,
    cross_traffic_searched: bool,
    host_buffers_searched: bool,
}

impl SearchIdentity {
    const FILE: &'static str = "search-identity.json";

    fn of(target: &Target, opts: &CalibrateOptions) -> SearchIdentity {
        SearchIdentity {
            target: target.source.clone(),
            schemes: target.schemes.keys().cloned().collect(),
            runtime_s: opts.runtime.as_secs_f64(),
            run_times: opts.run_times,
            simulate: opts.simulate,
            hosts: opts
                .hosts
                .iter()
                .flat_map(Shell::words)
                .collect::<Vec<_>>()
                .join(" "),
            cross_traffic_searched: opts.cross_mbps.is_some(),
            host_buffers_searched: opts.host_buffer_bytes.is_some(),
        }
    }

    /// Compares with the identity recorded in `file` (errors name the first key that differs
    /// and both values), or records this one there if there is none (a new search, or one
    /// started before identities were kept).
    fn check_or_write(&self, file: &Path) -> anyhow::Result<()> {
        let mine = serde_json::to_value(self)?;
        if !file.exists() {
            return std::fs::write(file, serde_json::to_string_pretty(&mine)? + "\n")
                .with_context(|| format!("write {}", file.display()));
        }
        let text =
            std::fs::read_to_string(file).with_context(|| format!("read {}", file.display()))?;
        let earlier: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a search identity", file.display()))?;
        for (key, now) in mine.as_object().expect("a struct") {
            let then = &earlier[key];
            if then != now {
                bail!(
                    "{}: this search was started with {key} = {then}, now {now}: its evaluations \
                     measured something else; use another --out, or the same flags to resume",
                    file.display()
                );
            }
        }
        Ok(())
    }
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
            cross_mbps: None,
            host_buffer_bytes: None,
        },
        Err(e) => return Err(e).context("derive the search bounds from the target"),
    };
    b.rate_mbps = opts.rate_mbps.unwrap_or(b.rate_mbps);
    b.delay_ms = opts.delay_ms.unwrap_or(b.delay_ms);
    b.queue_packets = opts.queue_packets.unwrap_or(b.queue_packets);
    b.loss = opts.loss.unwrap_or(b.loss);
    b.cross_mbps = opts.cross_mbps;
    b.host_buffer_bytes = opts.host_buffer_bytes;
    if b.host_buffer_bytes.is_some() && !opts.hosts.is_empty() {
        bail!("--host-buffers searches the end hosts' buffers and --hosts fixes them: give one");
    }
    b.check()?;
    Ok(b)
}

/// The search log (`search.log`, one line per evaluation, appended as they finish) and the
/// progress reports, as the fit's hooks; Ctrl-C stops the fit.
struct SearchLog<'a> {
    file: std::fs::File,
    path: &'a Path,
    progress: &'a dyn Progress,
    total: usize,
}

impl FitHooks for SearchLog<'_> {
    fn record(&mut self, batch: &[Evaluation], all: &[Evaluation]) -> Result<(), String> {
        let before = all.len() - batch.len();
        for (i, e) in batch.iter().enumerate() {
            writeln!(self.file, "{}", e.to_line())
                .and_then(|()| self.file.flush())
                .map_err(|err| format!("write {}: {err}", self.path.display()))?;
            let done = before + i + 1;
            let best = best_single(&all[..done]);
            self.progress.evaluated(e, done, self.total, best);
        }
        Ok(())
    }

    fn phase(&mut self, what: &str) {
        self.progress.phase(what);
    }

    fn stopped(&self) -> bool {
        INTERRUPTED.load(Ordering::SeqCst)
    }
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
    ) -> Result<BTreeMap<String, SchemeRuns>, String> {
        let tag = format!("{}-e{n}", self.opts.netns_prefix);
        in_eval_dir(self.opts, n, |dir| self.run(c, seed, dir, &tag))
    }
}

/// Runs `measure` in evaluation `n`'s directory (`out_dir/evals/<n>/`), removed after unless
/// `keep_runs`; errors as the fit takes them (a string with the whole chain).
fn in_eval_dir(
    opts: &CalibrateOptions,
    n: usize,
    measure: impl FnOnce(&Path) -> anyhow::Result<BTreeMap<String, SchemeRuns>>,
) -> Result<BTreeMap<String, SchemeRuns>, String> {
    let dir = opts.out_dir.join("evals").join(n.to_string());
    let measured = measure(&dir);
    if !opts.keep_runs {
        let _ = std::fs::remove_dir_all(&dir);
    }
    measured.map_err(|e| format!("{e:#}"))
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
        let preset = opts.preset(c, "candidate", "");
        write_constant_trace(&dir.join(preset.trace_file_name()), c.rate_mbps)?;
        let plan = ExperimentPlan {
            schemes: opts.schemes.clone(),
            run_times: opts.run_times,
            runtime: opts.runtime,
            data_dir: dir.to_owned(),
            seed,
            emulator: Some(preset.emulator_in(dir)),
            schemes_dir: opts.schemes_dir.clone(),
            simulate: opts.simulate,
            ..ExperimentPlan::default()
        };
        let path = plan.validate(registry)?;
        let runs = RunsOptions {
            tag_prefix: tag.to_owned(),
            done: Default::default(),
            // Every run counts in the figures: the first that fails fails the evaluation.
            stop_at_first_failure: true,
        };
        let ran = run_all(
            &plan,
            registry,
            &runs,
            &|run, progress| Ok(run_once(&plan, &path, run, progress)),
            &Quiet,
        )?;
        if let Some(f) = ran.failed.first() {
            bail!("{} run {} failed: {}", f.name, f.run_id, f.reason);
        }
        if ran.interrupted {
            bail!("interrupted");
        }
        let mut out = BTreeMap::new();
        for name in &opts.schemes {
            let runs: &mut SchemeRuns = out.entry(name.clone()).or_default();
            for run in 1..=opts.run_times {
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

/// One evaluation as a job step: what [`StepEvaluator`] asks (`evals/<n>/request.json`) and
/// what `pantheon calibrate step` answers (`evals/<n>/result.json`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StepRequest {
    /// The candidate emulator.
    pub candidate: Candidate,
    /// The emulator's loss seed.
    pub seed: u64,
    /// The evaluation's number.
    pub n: usize,
    /// Schemes to run over it.
    pub schemes: Vec<String>,
    /// Seconds per run.
    pub runtime_s: f64,
    /// Runs per scheme.
    pub run_times: u32,
    /// The calibration's output directory (the evaluation runs in `evals/<n>/` of it).
    pub out_dir: PathBuf,
    /// Extra scheme descriptors.
    pub schemes_dir: Option<PathBuf>,
    /// Simulated time.
    pub simulate: bool,
    /// The candidate's `pt-host` shells ([`CalibrateOptions::hosts`]).
    #[serde(default)]
    pub hosts: Vec<Shell>,
}

/// A job step's answer: the runs' figures, or why they failed; where it ran.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StepResult {
    /// Per scheme, its runs' figures (when the evaluation succeeded).
    pub runs: Option<BTreeMap<String, SchemeRuns>>,
    /// Why it failed.
    pub error: Option<String>,
    /// The machine it ran on.
    pub host: String,
    /// Slurm's `JOB.STEP` ids, when it ran as a job step.
    pub slurm_step: Option<String>,
}

/// Measures each candidate as a Slurm job step (`srun --exact -n1 -c<cpus>` running
/// `pantheon calibrate step`), inside the allocation this process runs in: as many at once
/// as the fit asks (`--jobs`), each on whichever node of the allocation has the CPUs. The
/// output directory must be on a filesystem the allocation's nodes share.
pub struct StepEvaluator<'a> {
    /// The options (schemes, runtime, run times, output directory…).
    pub opts: &'a CalibrateOptions,
    /// The `pantheon` program (at the same path on the nodes).
    pub exe: PathBuf,
    /// CPUs per evaluation.
    pub cpus: usize,
}

impl Evaluator for StepEvaluator<'_> {
    fn measure(
        &self,
        c: &Candidate,
        seed: u64,
        n: usize,
    ) -> Result<BTreeMap<String, SchemeRuns>, String> {
        in_eval_dir(self.opts, n, |dir| self.step(c, seed, n, dir))
    }
}

impl StepEvaluator<'_> {
    fn step(
        &self,
        c: &Candidate,
        seed: u64,
        n: usize,
        dir: &Path,
    ) -> anyhow::Result<BTreeMap<String, SchemeRuns>> {
        let o = self.opts;
        let request = StepRequest {
            candidate: *c,
            seed,
            n,
            schemes: o.schemes.clone(),
            runtime_s: o.runtime.as_secs_f64(),
            run_times: o.run_times,
            out_dir: o.out_dir.clone(),
            schemes_dir: o.schemes_dir.clone(),
            simulate: o.simulate,
            hosts: o.hosts.clone(),
        };
        let result: StepResult = crate::slurm::step_round_trip(
            self.cpus,
            &format!("pantheon-eval-{n}"),
            &self.exe,
            &["calibrate", "step"],
            dir,
            &request,
            &INTERRUPTED,
        )?;
        match (result.runs, result.error) {
            (Some(runs), _) => Ok(runs),
            (None, e) => bail!(
                "on {}: {}",
                result.host,
                e.unwrap_or_else(|| "no result".into())
            ),
        }
    }
}

/// `pantheon calibrate step REQUEST`: measures the candidate of `request` (a
/// [`StepRequest`]) here, as [`LocalEvaluator`] does, and writes [`StepResult`] beside it.
/// Errors only when the request cannot be read or the result written; a failed evaluation is
/// a result.
pub fn run_step(request: &Path) -> anyhow::Result<StepResult> {
    let text =
        std::fs::read_to_string(request).with_context(|| format!("read {}", request.display()))?;
    let r: StepRequest =
        serde_json::from_str(&text).with_context(|| format!("read {}", request.display()))?;
    let measured = (|| -> anyhow::Result<BTreeMap<String, SchemeRuns>> {
        let registry = Registry::load(r.schemes_dir.as_deref())?;
        if !r.simulate {
            crate::clean::before_creating_namespaces("pantheon calibrate step")?;
        }
        let opts = CalibrateOptions {
            schemes: r.schemes.clone(),
            runtime: crate::bounds::seconds(r.runtime_s, "runtime_s", crate::bounds::MAX_RUNTIME)?,
            run_times: r.run_times,
            jobs: 1,
            max_evals: 1,
            initial_evals: 1,
            confirm: 0,
            deliveries: vec![r.candidate.delivery],
            rate_mbps: None,
            delay_ms: None,
            queue_packets: None,
            loss: None,
            cross_mbps: None,
            host_buffer_bytes: None,
            out_dir: r.out_dir.clone(),
            seed: r.seed,
            // The caller removes the evaluation's directory (this request in it).
            keep_runs: true,
            schemes_dir: r.schemes_dir.clone(),
            // This process's own id: steps on one node never share names, and the stale-name
            // cleanup of another step never takes this one's for a dead process's.
            netns_prefix: format!("pt-{}", std::process::id()),
            simulate: r.simulate,
            hosts: r.hosts.clone(),
        };
        let local = LocalEvaluator {
            registry: &registry,
            opts: &opts,
        };
        local
            .measure(&r.candidate, r.seed, r.n)
            .map_err(anyhow::Error::msg)
    })();
    let (host, slurm_step) = crate::slurm::here();
    let (runs, error) = match measured {
        // This step ran again rootless and that run wrote the result: nothing to add.
        Err(e) if crate::rootless::ran_rootless(&e).is_some() => return Err(e),
        Ok(runs) => (Some(runs), None),
        Err(e) => (None, Some(format!("{e:#}"))),
    };
    let result = StepResult {
        runs,
        error,
        host,
        slurm_step,
    };
    crate::slurm::write_answer(request, &result)?;
    Ok(result)
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
    let preset = opts.preset(&o.best, "calibrated", &description);
    write_json(&out.join("emulator.json"), &serde_json::to_value(&preset)?)?;
    let trace = out.join(preset.trace_file_name());
    write_constant_trace(&trace, preset.rate_mbps)?;
    let mut mm = format!("{}\n", preset.emulator.command_line());
    if o.best.delivery == Delivery::Poisson {
        mm.push_str(
            "# --uplink-delivery=poisson is Pantheon-rs's (deliveries as a Poisson process at the \
             trace's rate); for Mahimahi itself, drop it and use a Poisson trace: `pantheon trace \
             poisson RATE`.\n",
        );
    }
    if !opts.hosts.is_empty() {
        mm.push_str(
            "# pt-host is Pantheon-rs's (the end hosts' TCP buffers, docs/emulator.md): for \
             Mahimahi itself, drop it and set the same net.ipv4.tcp_rmem/tcp_wmem with `sysctl \
             -w` on the hosts it names.\n",
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
            "mahimahi_command": preset.emulator.command_line(),
            "hosts": opts.hosts.iter().flat_map(Shell::words).collect::<Vec<_>>().join(" "),
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

    /// A search records what it measured; resuming with the same is fine, with another
    /// runtime, hosts or cross-traffic search is refused naming the key and both values.
    #[test]
    fn a_resumed_search_must_measure_the_same_thing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(SearchIdentity::FILE);
        let first = SearchIdentity {
            target: "real/".into(),
            schemes: vec!["bbr".into(), "cubic".into()],
            runtime_s: 5.0,
            run_times: 1,
            simulate: false,
            hosts: String::new(),
            cross_traffic_searched: false,
            host_buffers_searched: false,
        };
        first.check_or_write(&file).unwrap();
        first.check_or_write(&file).unwrap();
        let changed = [
            (
                SearchIdentity {
                    runtime_s: 10.0,
                    ..first.clone()
                },
                "runtime_s = 5.0, now 10.0",
            ),
            (
                SearchIdentity {
                    hosts: "pt-host both tcp_rmem=1,2,3".into(),
                    ..first.clone()
                },
                "hosts = \"\", now \"pt-host both tcp_rmem=1,2,3\"",
            ),
            (
                SearchIdentity {
                    cross_traffic_searched: true,
                    ..first.clone()
                },
                "cross_traffic_searched = false, now true",
            ),
        ];
        for (other, says) in changed {
            let e = other.check_or_write(&file).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
            assert!(e.contains("use another --out"), "{e}");
        }
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
        // Half the median scheme's throughput (95.87) to twice the largest.
        assert_eq!(b.rate_mbps, (47.94, 192.54));
        // Seed 001's rates: an aggressive scheme raises the upper bound only; the guesses
        // still start at the largest throughput.
        std::fs::write(
            &csv,
            "scheme,tput_mbps,delay_ms\ncubic,85.83,91.76\npcc,356.02,86.31\nbbr,67.69,97.13\n",
        )
        .unwrap();
        let t = load_target(&csv, &registry).unwrap();
        let b = Bounds::from_observations(&t.observations).unwrap();
        assert_eq!(b.rate_mbps, (42.92, 712.04));
        assert_eq!(t.guesses[0].rate_mbps, 356.02);
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

    /// Issue 55: a target of Pantheon's 2017 runs names `copa` and `default_tcp`; read as of
    /// seed 001's day they are measured with `copa_orig` and `cubic`, and a scheme Pantheon
    /// did not have yet is left out, not measured with another era's program.
    #[test]
    fn a_target_of_pantheon_s_day_is_measured_with_that_day_s_schemes() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::load(None).unwrap();
        let csv = dir.path().join("t.csv");
        std::fs::write(
            &csv,
            "scheme,tput_mbps,delay_ms\ncopa,76.87,87.57\ndefault_tcp,85.83,91.76\n\
             vivace,50,90\nquic_bbr,60,95\n",
        )
        .unwrap();
        let mut t = load_target(&csv, &registry).unwrap();
        let day = crate::provenance::Day::parse("2017-08-30").unwrap();
        let changes = t.as_pantheon_ran(&registry, Some(day));
        assert_eq!(t.scheme_names(), "copa_orig, cubic, quic_bbr");
        assert_eq!(t.schemes["copa_orig"].tput_mbps, vec![76.87]);
        let left_out = changes.iter().find(|(n, _)| n == "vivace").unwrap();
        assert!(left_out.1.as_ref().unwrap_err().contains("2018-05-04"));
        assert_eq!(changes.len(), 3, "{changes:?}");
        // Without an era only the names no descriptor carries are read, as of the seeds' era:
        // Pantheon's `copa` and `default_tcp`; `vivace` is ours as it is.
        let mut t = load_target(&csv, &registry).unwrap();
        let changes = t.as_pantheon_ran(&registry, None);
        assert_eq!(t.scheme_names(), "copa_orig, cubic, quic_bbr, vivace");
        assert_eq!(changes.len(), 2, "{changes:?}");
    }
}
