//! The fit: the search of [`crate::calibrate`] driven to its end — candidates proposed,
//! measured by an [`Evaluator`], scored by their replication error against the target, the
//! best few measured again, and the outcome (best candidate, its error, a leave-one-out check).
//!
//! Measuring is the [`Evaluator`]'s business (the engine's runs the schemes on this machine;
//! one that runs them on testbed agents implements the same trait), and so are the search log
//! and the progress bar ([`FitHooks`]): this module holds no I/O of its own.

use std::collections::BTreeMap;

use analyzer::stats::{median, replication_error, SchemeRuns};

use crate::calibrate::{Bounds, Candidate, Evaluation, Search};
use crate::mm::Delivery;

/// Measures candidates: runs the target's schemes over an emulator and returns their per-run
/// figures.
pub trait Evaluator: Sync {
    /// Every scheme over `c`, the emulator's loss seeded with `seed`; `n` numbers the
    /// evaluation (unique within a calibration). Errors say which run failed and why.
    fn measure(
        &self,
        c: &Candidate,
        seed: u64,
        n: usize,
    ) -> Result<BTreeMap<String, SchemeRuns>, String>;
}

/// What the fit is asked to do.
#[derive(Debug, Clone)]
pub struct FitPlan {
    /// The search space.
    pub bounds: Bounds,
    /// Delivery processes to search, one search each.
    pub deliveries: Vec<Delivery>,
    /// Evaluations per delivery process, the initial design included.
    pub max_evals: usize,
    /// Space-filling evaluations before the optimiser takes over (the first are the guesses).
    pub initial_evals: usize,
    /// Best candidates measured again at the end (0: none).
    pub confirm: usize,
    /// Candidates measured at once.
    pub jobs: usize,
    /// Seed of the search and of the emulator's loss.
    pub seed: u64,
}

impl FitPlan {
    /// Evaluations the fit plans in all: `max_evals` per delivery process, then `confirm`.
    pub fn total(&self) -> usize {
        self.deliveries.len() * self.max_evals + self.confirm
    }
}

/// What the fit tells its caller, and asks it.
pub trait FitHooks {
    /// A batch of evaluations finished (failures included): record them (e.g. in the search
    /// log). An error stops the fit.
    fn record(&mut self, batch: &[Evaluation], all: &[Evaluation]) -> Result<(), String>;
    /// Evaluations of a new phase are starting (`what` says which).
    fn phase(&mut self, what: &str);
    /// Whether to stop (Ctrl-C): no new batch is started, evaluations cut short are dropped.
    fn stopped(&self) -> bool;
}

/// The target: per scheme, the real path's per-run figures (a table gives one value each).
pub type TargetRuns = BTreeMap<String, SchemeRuns>;

/// Runs the searches (one per delivery process), then measures the best `confirm` candidates
/// again with other seeds of the emulator's loss; appends every evaluation to `evals` (which
/// may hold those of an earlier, resumed calibration: they are told to the searches first).
/// `guesses` are evaluated first. Errors: the search refused its bounds, or a hook's error.
pub fn fit(
    plan: &FitPlan,
    target: &TargetRuns,
    guesses: &[Candidate],
    evaluator: &dyn Evaluator,
    hooks: &mut dyn FitHooks,
    evals: &mut Vec<Evaluation>,
) -> Result<(), String> {
    let mut seq = evals.len();
    for &delivery in &plan.deliveries {
        let mut search =
            Search::new(plan.bounds, delivery, plan.jobs, plan.seed).map_err(|e| e.to_string())?;
        for e in evals.iter().filter(|e| e.candidate.delivery == delivery) {
            search.tell(&e.candidate, e.overall_error_pct);
        }
        hooks.phase(&format!(
            "{} deliveries",
            crate::calibrate::delivery_str(delivery)
        ));
        let design = search.initial_design(plan.initial_evals.min(plan.max_evals), guesses);
        while search.told() < plan.max_evals && !hooks.stopped() {
            let room = (plan.max_evals - search.told()).min(plan.jobs.max(1));
            let batch: Vec<Candidate> = if search.told() < design.len() {
                design[search.told()..].iter().take(room).copied().collect()
            } else {
                let mut batch: Vec<Candidate> = search.suggest().into_iter().take(room).collect();
                // A suggestion measured already (the surrogate settles on one point when the
                // error is flat in most dimensions) is replaced by a random point.
                for k in 0..batch.len() {
                    let mut tries = 0;
                    while tries < 8
                        && (evals.iter().any(|e| e.candidate == batch[k])
                            || batch[..k].contains(&batch[k]))
                    {
                        batch[k] = search.explore(k as u64 * 8 + tries);
                        tries += 1;
                    }
                }
                batch
            };
            if batch.is_empty() {
                break;
            }
            let batch: Vec<(Candidate, u64)> = batch.into_iter().map(|c| (c, plan.seed)).collect();
            let results = evaluate_all(&batch, target, evaluator, &mut seq, hooks)?;
            for e in &results {
                search.tell(&e.candidate, e.overall_error_pct);
            }
            record(results, evals, hooks)?;
        }
    }
    // The objective is noisy: measure the best few again, with other seeds of the emulator's
    // loss (the search used one seed for every candidate: common random numbers make
    // candidates comparable, but a candidate may fit that one loss pattern by chance); the
    // best mean wins.
    if plan.confirm > 0 && !hooks.stopped() {
        hooks.phase("measuring the best candidates again, with other loss seeds");
        let top = ranked(evals)
            .into_iter()
            .take(plan.confirm)
            .enumerate()
            .map(|(i, (c, _, _))| (c, plan.seed + 1000 + (evals.len() + i) as u64))
            .collect::<Vec<_>>();
        for chunk in top.chunks(plan.jobs.max(1)) {
            let results = evaluate_all(chunk, target, evaluator, &mut seq, hooks)?;
            record(results, evals, hooks)?;
        }
    }
    Ok(())
}

fn record(
    batch: Vec<Evaluation>,
    evals: &mut Vec<Evaluation>,
    hooks: &mut dyn FitHooks,
) -> Result<(), String> {
    let from = evals.len();
    evals.extend(batch);
    hooks.record(&evals[from..], evals)
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

/// The calibration's result from all its evaluations: the candidate with the best mean error,
/// its parts, the leave-one-out check. `None` if no evaluation succeeded.
pub fn outcome(target: &TargetRuns, bounds: Bounds, evals: &[Evaluation]) -> Option<Outcome> {
    let (best, error_pct, n) = ranked(evals).into_iter().next()?;
    let of_best: Vec<&Evaluation> = evals
        .iter()
        .filter(|e| e.candidate == best && e.overall_error_pct.is_some())
        .collect();
    let mean_of = |f: fn(&Evaluation) -> Option<f64>| {
        of_best.iter().filter_map(|e| f(e)).sum::<f64>() / of_best.len() as f64
    };
    Some(Outcome {
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

/// Distinct successful candidates by mean error (with their number of measurements), best
/// first.
pub fn ranked(evals: &[Evaluation]) -> Vec<(Candidate, f64, usize)> {
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

/// The evaluation with the smallest error so far, if any succeeded.
pub fn best_single(evals: &[Evaluation]) -> Option<&Evaluation> {
    evals
        .iter()
        .filter_map(|e| Some((e.overall_error_pct?, e)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, e)| e)
}

/// Per-scheme medians as single-run [`SchemeRuns`], for [`replication_error`].
fn as_runs(m: &BTreeMap<String, (f64, f64)>) -> TargetRuns {
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
fn leave_one_out(target: &TargetRuns, evals: &[Evaluation]) -> BTreeMap<String, LeaveOneOut> {
    let mut out = BTreeMap::new();
    if target.len() < 2 {
        return out;
    }
    for held in target.keys() {
        let mut rest = target.clone();
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
/// thread per candidate; `seq` numbers evaluations. When stopped, evaluations cut short are
/// not measurements: they are left out.
fn evaluate_all(
    batch: &[(Candidate, u64)],
    target: &TargetRuns,
    evaluator: &dyn Evaluator,
    seq: &mut usize,
    hooks: &dyn FitHooks,
) -> Result<Vec<Evaluation>, String> {
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
                    .map_err(|_| "an evaluation thread panicked".to_owned())
            })
            .collect::<Result<Vec<_>, String>>()
    })?;
    if hooks.stopped() {
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
    target: &TargetRuns,
    evaluator: &dyn Evaluator,
) -> Evaluation {
    let mut e = Evaluation {
        candidate: *c,
        tput_error_pct: None,
        delay_error_pct: None,
        overall_error_pct: None,
        schemes: BTreeMap::new(),
        failure: None,
    };
    match evaluator.measure(c, seed, n) {
        Ok(runs) => {
            for (k, r) in &runs {
                if let (Some(t), Some(d)) = (median(&r.tput_mbps), median(&r.delay_ms)) {
                    e.schemes.insert(k.clone(), (t, d));
                }
            }
            match replication_error(target, &runs) {
                Some(r) if r.schemes == target.len() => {
                    e.tput_error_pct = Some(r.throughput_pct);
                    e.delay_error_pct = Some(r.delay_pct);
                    e.overall_error_pct = Some(r.overall_pct);
                }
                _ => e.failure = Some("some scheme has no throughput or delay".into()),
            }
        }
        Err(err) => e.failure = Some(err),
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path whose throughput is the emulator's rate and whose p95 delay is twice its
    /// one-way delay: the target (10 Mbit/s, 60 ms) is fitted exactly by rate 10, delay 30.
    struct Model;

    impl Evaluator for Model {
        fn measure(&self, c: &Candidate, _: u64, _: usize) -> Result<TargetRuns, String> {
            let runs = SchemeRuns {
                tput_mbps: vec![c.rate_mbps],
                delay_ms: vec![2.0 * f64::from(c.delay_ms)],
                loss_pct: vec![],
            };
            Ok([("a".to_owned(), runs.clone()), ("b".to_owned(), runs)].into())
        }
    }

    #[derive(Default)]
    struct Hooks {
        batches: Vec<usize>,
        phases: Vec<String>,
        stop: bool,
    }

    impl FitHooks for Hooks {
        fn record(&mut self, batch: &[Evaluation], _: &[Evaluation]) -> Result<(), String> {
            self.batches.push(batch.len());
            Ok(())
        }
        fn phase(&mut self, what: &str) {
            self.phases.push(what.to_owned());
        }
        fn stopped(&self) -> bool {
            self.stop
        }
    }

    fn eval(rate: f64, err: Option<f64>, cubic: (f64, f64), bbr: (f64, f64)) -> Evaluation {
        Evaluation {
            candidate: Candidate {
                rate_mbps: rate,
                delay_ms: 30,
                queue_packets: 60,
                loss: 0.0,
                delivery: Delivery::Trace,
                cross_mbps: 0.0,
                host_buffer_bytes: 0,
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
        let target: TargetRuns = [
            ("cubic".to_owned(), runs(10.0, 100.0)),
            ("bbr".to_owned(), runs(20.0, 50.0)),
        ]
        .into();
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

    fn target() -> TargetRuns {
        let runs = SchemeRuns {
            tput_mbps: vec![10.0],
            delay_ms: vec![60.0],
            loss_pct: vec![],
        };
        [("a".to_owned(), runs.clone()), ("b".to_owned(), runs)].into()
    }

    fn plan() -> FitPlan {
        FitPlan {
            bounds: Bounds {
                rate_mbps: (5.0, 20.0),
                delay_ms: (0, 60),
                queue_packets: (10, 100),
                loss: (0.0, 0.01),
                cross_mbps: None,
                host_buffer_bytes: None,
            },
            deliveries: vec![Delivery::Trace],
            max_evals: 6,
            initial_evals: 4,
            confirm: 2,
            jobs: 2,
            seed: 7,
        }
    }

    #[test]
    fn the_fit_measures_what_it_plans_and_the_exact_guess_wins_after_confirmation() {
        let guess = Candidate {
            rate_mbps: 10.0,
            delay_ms: 30,
            queue_packets: 50,
            loss: 0.0,
            delivery: Delivery::Trace,
            cross_mbps: 0.0,
            host_buffer_bytes: 0,
        };
        let (plan, target) = (plan(), target());
        let mut hooks = Hooks::default();
        let mut evals = Vec::new();
        fit(&plan, &target, &[guess], &Model, &mut hooks, &mut evals).unwrap();
        assert_eq!(evals.len(), plan.total());
        assert_eq!(hooks.batches.iter().sum::<usize>(), plan.total());
        assert_eq!(hooks.phases.len(), 2, "{:?}", hooks.phases);
        let o = outcome(&target, plan.bounds, &evals).unwrap();
        assert_eq!(o.best, guess);
        assert!(o.error_pct.abs() < 1e-9, "{}", o.error_pct);
        // Measured in the search (the optimiser may ask for it again), then again among the
        // best; the error is the mean over every measurement.
        let of_guess = evals.iter().filter(|e| e.candidate == guess).count();
        assert!(o.measurements >= 2, "{}", o.measurements);
        assert_eq!(o.measurements, of_guess);
        assert_eq!(o.evaluations, plan.total());
        assert_eq!(o.leave_one_out.len(), 2);
        assert!(o.leave_one_out["a"].tput_error_pct.abs() < 1e-9);
    }

    #[test]
    fn a_stopped_fit_measures_nothing_and_has_no_outcome() {
        let mut hooks = Hooks {
            stop: true,
            ..Hooks::default()
        };
        let mut evals = Vec::new();
        fit(&plan(), &target(), &[], &Model, &mut hooks, &mut evals).unwrap();
        assert!(evals.is_empty());
        assert!(outcome(&target(), plan().bounds, &evals).is_none());
    }
}
