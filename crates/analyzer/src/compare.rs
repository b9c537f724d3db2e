//! `pantheon compare A B`: two experiments side by side, per scheme and metric, as Pantheon's
//! `compare_two_experiments.py` did (reference `pantheon.md` §4.6) — runs in each, mean 1,
//! mean 2, % difference, standard deviation 1 and 2 — plus what it lacked:
//!
//! - a **significance test** per row: Welch's unequal-variance t-test, two-sided. With fewer
//!   than two runs on a side (or no variance on either) there is no test, and the row says so
//!   instead of printing a misleading figure;
//! - the **replication error** of B as an emulation of A (DESIGN.md; Pantheon's
//!   `calibrated-emulators/compare.py`): per scheme |median_B − median_A| ÷ median_A for
//!   throughput and for p95 delay, each averaged over the schemes both have, then the two
//!   averaged; in percent.
//!
//! Pure functions on per-run numbers; reading `pantheon_perf.json` is the caller's job.

use std::collections::BTreeMap;

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

pub use crate::stats::{
    mean, mean_if_any, median, replication_error, std_dev, ReplicationError, SchemeRuns,
};

/// One row of the comparison table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Scheme name.
    pub scheme: String,
    /// `throughput (Mbit/s)`, `95th-percentile delay (ms)` or `loss rate (%)`.
    pub metric: &'static str,
    /// Runs in A and in B.
    pub runs: (usize, usize),
    /// Means in A and B.
    pub mean: (f64, f64),
    /// (mean B − mean A) ÷ mean A, percent; `None` when mean A is 0.
    pub diff_pct: Option<f64>,
    /// Sample standard deviations (n − 1) in A and B; `None` with a single run.
    pub std_dev: (Option<f64>, Option<f64>),
    /// Welch's t-test, two-sided p-value; `None` when it cannot be computed.
    pub p_value: Option<f64>,
    /// Half-widths of the 95 % confidence intervals of the means in A and B
    /// ([`mean_interval`]), the metric's unit; `None` with fewer than [`MIN_INTERVAL_RUNS`] runs.
    pub interval: (Option<f64>, Option<f64>),
    /// Whether the two intervals are disjoint — the experiments differ beyond their intervals;
    /// `None` when a side has no interval.
    pub beyond_intervals: Option<bool>,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Rows: per scheme both have, throughput, delay, loss.
    pub rows: Vec<Row>,
    /// B as an emulation of A; `None` when no scheme has a non-zero median in A.
    pub replication_error: Option<ReplicationError>,
    /// Schemes only A has.
    pub only_in_a: Vec<String>,
    /// Schemes only B has.
    pub only_in_b: Vec<String>,
    /// Which test the p-values come from.
    pub test: &'static str,
}

/// Fewest values for which [`mean_interval`] gives an interval: with two, Student's t at 95 %
/// is 12.7 and the interval spans most of anything; it says "too few runs" instead.
pub const MIN_INTERVAL_RUNS: usize = 3;

/// A mean over runs with its 95 % confidence interval, `mean ± half_width` (issue 54: "Once is
/// Never Enough" — a figure quoted without its uncertainty misleads).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MeanInterval {
    /// The mean, in the values' unit.
    pub mean: f64,
    /// Half the interval's width, same unit: Student's t quantile (0.975, n − 1 degrees of
    /// freedom) × sample standard deviation ÷ √n. `None` with fewer than
    /// [`MIN_INTERVAL_RUNS`] values.
    pub half_width: Option<f64>,
    /// How many values (runs) the mean is over.
    pub runs: usize,
    /// The percentile bootstrap interval of the mean, (low, high) in the values' unit, when
    /// it was asked for ([`bootstrap_mean_interval`]: p95 delays, ratios); it is then the
    /// interval shown, in place of `mean ± half_width`.
    pub bootstrap: Option<(f64, f64)>,
}

impl MeanInterval {
    /// `9.85 ± 0.02` (Student's t) or `80.1 [75.2, 86.0]` (bootstrap) with `decimals` after
    /// the point; the mean alone without an interval.
    pub fn display(&self, decimals: usize) -> String {
        match (self.bootstrap, self.half_width) {
            (Some((lo, hi)), _) => {
                format!(
                    "{:.decimals$} [{lo:.decimals$}, {hi:.decimals$}]",
                    self.mean
                )
            }
            (None, Some(h)) => format!("{:.decimals$} ± {h:.decimals$}", self.mean),
            (None, None) => format!("{:.decimals$}", self.mean),
        }
    }

    /// The interval's ends, (low, high): the bootstrap's, else `mean ± half_width`; `None`
    /// without an interval.
    pub fn bounds(&self) -> Option<(f64, f64)> {
        self.bootstrap
            .or_else(|| self.half_width.map(|h| (self.mean - h, self.mean + h)))
    }

    /// The same figure in another unit (`scale` × every value: a fraction as percent).
    pub fn scaled(&self, scale: f64) -> MeanInterval {
        MeanInterval {
            mean: self.mean * scale,
            half_width: self.half_width.map(|h| h * scale),
            runs: self.runs,
            bootstrap: self.bootstrap.map(|(lo, hi)| (lo * scale, hi * scale)),
        }
    }
}

/// The mean of `x` with its 95 % confidence interval (Student's t; [`MeanInterval`]); `None`
/// for no values.
pub fn mean_interval(x: &[f64]) -> Option<MeanInterval> {
    let m = mean_if_any(x)?;
    let half_width = std_dev(x)
        .filter(|_| x.len() >= MIN_INTERVAL_RUNS)
        .and_then(|sd| {
            let t = StudentsT::new(0.0, 1.0, (x.len() - 1) as f64).ok()?;
            Some(t.inverse_cdf(0.975) * sd / (x.len() as f64).sqrt())
        });
    Some(MeanInterval {
        mean: m,
        half_width,
        runs: x.len(),
        bootstrap: None,
    })
}

/// Resamples of [`bootstrap_mean_interval`].
pub const BOOTSTRAP_RESAMPLES: usize = 10_000;

/// [`mean_interval`] with the 95 % **percentile bootstrap** interval of the mean as the one
/// shown ([`MeanInterval::bootstrap`]): [`BOOTSTRAP_RESAMPLES`] resamples of the runs with
/// replacement, the 2.5th and 97.5th percentiles of their means. For figures whose runs are
/// skewed — a p95 delay with one run far out, a ratio — where Student's t, symmetric, reaches
/// below zero; the bootstrap stays within the runs' range. With 3 runs it is their range
/// (all three resamples the smallest run: 1/27 > 2.5 %), which says how little 3 runs tell.
/// Deterministic: the resampling generator is seeded from the values, so one set of runs
/// always gives one interval. None under [`MIN_INTERVAL_RUNS`] runs, as `mean_interval`.
pub fn bootstrap_mean_interval(x: &[f64]) -> Option<MeanInterval> {
    use rand_xoshiro::rand_core::{RngCore, SeedableRng};
    let mut m = mean_interval(x)?;
    if x.len() < MIN_INTERVAL_RUNS {
        return Some(m);
    }
    let seed = x.iter().fold(0x9E37_79B9_7F4A_7C15_u64, |s, v| {
        (s ^ v.to_bits())
            .rotate_left(17)
            .wrapping_mul(0xBF58_476D_1CE4_E5B9)
    });
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let n = x.len();
    let mut means: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            // A run drawn uniformly: the high bits of next_u64 × n (Lemire's multiply-shift).
            let draw = |r: &mut rand_xoshiro::Xoshiro256PlusPlus| {
                ((u128::from(r.next_u64()) * n as u128) >> 64) as usize
            };
            (0..n).map(|_| x[draw(&mut rng)]).sum::<f64>() / n as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| {
        means[((q * BOOTSTRAP_RESAMPLES as f64).ceil() as usize).clamp(1, BOOTSTRAP_RESAMPLES) - 1]
    };
    m.bootstrap = Some((at(0.025), at(0.975)));
    Some(m)
}

/// What a table of [`MeanInterval`]s says under it.
pub const INTERVAL_NOTE: &str = "± : the 95 % confidence interval of the mean over the valid \
    runs (Student's t); [low, high] for p95 delays: the 95 % percentile bootstrap interval of \
    the mean (10 000 resamples of the runs; a delay's runs are skewed, and a t interval can \
    reach below zero). A mean of fewer than 3 runs has none.";

/// Welch's t-test of equal means, two-sided: `(t, degrees of freedom, p)`. `None` with fewer
/// than two values on a side or no variance on both.
pub fn welch_t_test(x: &[f64], y: &[f64]) -> Option<(f64, f64, f64)> {
    let (sx, sy) = (std_dev(x)?, std_dev(y)?);
    let (vx, vy) = (sx * sx / x.len() as f64, sy * sy / y.len() as f64);
    if vx + vy == 0.0 {
        return None;
    }
    let t = (mean(x) - mean(y)) / (vx + vy).sqrt();
    let df = (vx + vy).powi(2) / (vx * vx / (x.len() - 1) as f64 + vy * vy / (y.len() - 1) as f64);
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    Some((t, df, 2.0 * (1.0 - dist.cdf(t.abs()))))
}

/// Compares experiment A with experiment B.
pub fn compare(a: &BTreeMap<String, SchemeRuns>, b: &BTreeMap<String, SchemeRuns>) -> Comparison {
    let mut rows = Vec::new();
    for (scheme, ra) in a {
        let Some(rb) = b.get(scheme) else { continue };
        for (metric, xa, xb) in [
            ("throughput (Mbit/s)", &ra.tput_mbps, &rb.tput_mbps),
            ("95th-percentile delay (ms)", &ra.delay_ms, &rb.delay_ms),
            ("loss rate (%)", &ra.loss_pct, &rb.loss_pct),
        ] {
            if xa.is_empty() || xb.is_empty() {
                continue;
            }
            let (ma, mb) = (mean(xa), mean(xb));
            let half = |x: &[f64]| mean_interval(x).and_then(|i| i.half_width);
            let interval = (half(xa), half(xb));
            rows.push(Row {
                scheme: scheme.clone(),
                metric,
                runs: (xa.len(), xb.len()),
                mean: (ma, mb),
                diff_pct: (ma != 0.0).then(|| (mb - ma) / ma * 100.0),
                std_dev: (std_dev(xa), std_dev(xb)),
                p_value: welch_t_test(xa, xb).map(|r| r.2),
                interval,
                beyond_intervals: interval
                    .0
                    .zip(interval.1)
                    .map(|(ha, hb)| (ma - mb).abs() > ha + hb),
            });
        }
    }
    let only = |x: &BTreeMap<String, SchemeRuns>, y: &BTreeMap<String, SchemeRuns>| {
        x.keys().filter(|k| !y.contains_key(*k)).cloned().collect()
    };
    Comparison {
        rows,
        replication_error: replication_error(a, b),
        only_in_a: only(a, b),
        only_in_b: only(b, a),
        test: "Welch's t-test (two-sided)",
    }
}

/// The comparison as an aligned text table, then the replication error.
pub fn to_text(c: &Comparison) -> String {
    use std::fmt::Write as _;
    let opt = |v: Option<f64>, prec: usize| v.map_or("n/a".to_owned(), |v| format!("{v:.prec$}"));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<12} {:<27} {:>6} {:>6} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "scheme",
        "metric",
        "runs 1",
        "runs 2",
        "mean 1",
        "mean 2",
        "% diff",
        "std 1",
        "std 2",
        "p (Welch)",
        "±95% 1",
        "±95% 2",
        "apart"
    );
    for r in &c.rows {
        let diff = r.diff_pct.map_or("n/a".to_owned(), |d| format!("{d:+.1}%"));
        let p = match r.p_value {
            Some(p) => format!("{p:.3}"),
            None if r.runs.0 < 2 || r.runs.1 < 2 => "<2 runs".to_owned(),
            None => "n/a".to_owned(),
        };
        let apart = match r.beyond_intervals {
            Some(true) => "yes",
            Some(false) => "no",
            None => "<3 runs",
        };
        let _ = writeln!(
            s,
            "{:<12} {:<27} {:>6} {:>6} {:>10.3} {:>10.3} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
            r.scheme,
            r.metric,
            r.runs.0,
            r.runs.1,
            r.mean.0,
            r.mean.1,
            diff,
            opt(r.std_dev.0, 3),
            opt(r.std_dev.1, 3),
            p,
            opt(r.interval.0, 3),
            opt(r.interval.1, 3),
            apart
        );
    }
    let _ = writeln!(
        s,
        "(±95%: half-width of each mean's 95 % confidence interval, Student's t; apart: the \
         two intervals do not overlap)"
    );
    match &c.replication_error {
        Some(e) => {
            let _ = writeln!(
                s,
                "\nReplication error of 2 as an emulation of 1 (medians over runs, mean over {} \
                 scheme(s)): throughput {:.1}%, delay {:.1}%, overall {:.1}%",
                e.schemes, e.throughput_pct, e.delay_pct, e.overall_pct
            );
        }
        None => {
            let _ = writeln!(
                s,
                "\nReplication error: n/a (no scheme in common with data)"
            );
        }
    }
    for (label, list) in [("only in 1", &c.only_in_a), ("only in 2", &c.only_in_b)] {
        if !list.is_empty() {
            let _ = writeln!(s, "Schemes {label}: {}", list.join(", "));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_match_hand_computation() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(std_dev(&[1.0]), None);
        // 95 % interval by hand: mean 10, sd 1, t(0.975, 2) = 4.302653 → 4.302653 / √3.
        let iv = mean_interval(&[9.0, 10.0, 11.0]).unwrap();
        assert_eq!((iv.mean, iv.runs), (10.0, 3));
        assert!((iv.half_width.unwrap() - 2.484138).abs() < 1e-5, "{iv:?}");
        assert_eq!(iv.display(2), "10.00 ± 2.48");
        // Five runs: t(0.975, 4) = 2.776445, sd √2.5 → 2.776445 × 1.581139 / √5 = 1.963243.
        let iv = mean_interval(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert!((iv.half_width.unwrap() - 1.963243).abs() < 1e-5, "{iv:?}");
        // Two runs: a mean, no interval; none: nothing.
        let two = mean_interval(&[9.0, 11.0]).unwrap();
        assert_eq!((two.half_width, two.display(1)), (None, "10.0".to_owned()));
        assert_eq!(mean_interval(&[]), None);
        // Bootstrap: with 3 runs the 2.5th percentile is the smallest (all three draws of it:
        // 1/27 of the resamples) and the 97.5th the largest — the runs' range, shown instead
        // of t's mean ± 24.8, which reaches below zero.
        let b = bootstrap_mean_interval(&[10.0, 20.0, 30.0]).unwrap();
        assert_eq!((b.mean, b.bootstrap, b.runs), (20.0, Some((10.0, 30.0)), 3));
        assert_eq!(b.display(1), "20.0 [10.0, 30.0]");
        assert_eq!(b.bounds(), Some((10.0, 30.0)));
        // More runs: inside the range, around the mean, the same every time.
        let x = [5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 40.0];
        let (lo, hi) = bootstrap_mean_interval(&x).unwrap().bootstrap.unwrap();
        assert!(
            5.0 < lo && lo < 12.142_857 && 12.142_857 < hi && hi < 40.0,
            "{lo} {hi}"
        );
        assert_eq!(
            bootstrap_mean_interval(&x).unwrap().bootstrap,
            Some((lo, hi))
        );
        assert_eq!(
            bootstrap_mean_interval(&[1.0, 2.0]).unwrap().bootstrap,
            None
        );
        assert_eq!(
            iv.bounds(),
            Some((
                iv.mean - iv.half_width.unwrap(),
                iv.mean + iv.half_width.unwrap()
            ))
        );
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, Σ(x−m)² = 32, sample variance 32/7.
        let x = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert!((std_dev(&x).unwrap() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        // Welch by hand: x = 1 2 3 (var 1), y = 4 5 6 (var 1): t = −3/√(2/3) = −3.674,
        // df = (2/3)² / ((1/3)²/2 · 2) = 4, p = 0.02131 (t table, 4 df).
        let (t, df, p) = welch_t_test(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert!((t + 3.674_234_614).abs() < 1e-6, "{t}");
        assert!((df - 4.0).abs() < 1e-9, "{df}");
        assert!((p - 0.021_311).abs() < 1e-4, "{p}");
        assert!(welch_t_test(&[1.0], &[4.0, 5.0]).is_none());
        assert!(welch_t_test(&[1.0, 1.0], &[2.0, 2.0]).is_none());
    }

    #[test]
    fn comparison_rows_and_replication_error() {
        let runs = |t: &[f64], d: &[f64], l: &[f64]| SchemeRuns {
            tput_mbps: t.to_vec(),
            delay_ms: d.to_vec(),
            loss_pct: l.to_vec(),
        };
        let a = BTreeMap::from([
            (
                "cubic".to_owned(),
                runs(&[10.0, 12.0], &[100.0, 100.0], &[0.0, 0.0]),
            ),
            ("bbr".to_owned(), runs(&[8.0], &[50.0], &[1.0])),
            ("vegas".to_owned(), runs(&[1.0], &[1.0], &[1.0])),
            (
                "reno".to_owned(),
                runs(&[9.0, 10.0, 11.0], &[50.0, 60.0, 70.0], &[1.0, 1.0, 1.0]),
            ),
        ]);
        let b = BTreeMap::from([
            (
                "cubic".to_owned(),
                runs(&[11.0, 11.0], &[150.0, 150.0], &[0.0, 0.0]),
            ),
            ("bbr".to_owned(), runs(&[6.0], &[50.0], &[2.0])),
            ("copa".to_owned(), runs(&[1.0], &[1.0], &[1.0])),
            (
                "reno".to_owned(),
                runs(&[19.0, 20.0, 21.0], &[55.0, 65.0, 75.0], &[1.0, 1.0, 1.0]),
            ),
        ]);
        let c = compare(&a, &b);
        assert_eq!(c.rows.len(), 9);
        // Three runs a side: intervals ±2.484 (throughput; sd 1) and ±24.84 (delay; sd 10).
        // Throughput 10 vs 20: |10| > 4.97, apart; delay 60 vs 65: |5| < 49.7, not apart.
        let reno = |m: &str| {
            c.rows
                .iter()
                .find(|r| r.scheme == "reno" && r.metric.starts_with(m))
                .unwrap()
        };
        assert!((reno("throughput").interval.0.unwrap() - 2.484138).abs() < 1e-5);
        assert_eq!(reno("throughput").beyond_intervals, Some(true));
        assert_eq!(reno("95th").beyond_intervals, Some(false));
        // Loss 1 vs 1 with no spread: zero-width intervals, equal means: not apart.
        assert_eq!(reno("loss").beyond_intervals, Some(false));
        let cubic_tput = &c.rows.iter().find(|r| r.scheme == "cubic").unwrap();
        assert_eq!(cubic_tput.mean, (11.0, 11.0));
        assert_eq!(cubic_tput.diff_pct, Some(0.0));
        // A single run on a side: no std dev, no test — not a "−100 %" artefact.
        let bbr_tput = c.rows.iter().find(|r| r.scheme == "bbr").unwrap();
        assert_eq!(bbr_tput.diff_pct, Some(-25.0));
        assert_eq!((bbr_tput.std_dev, bbr_tput.p_value), ((None, None), None));
        assert_eq!(
            (bbr_tput.interval, bbr_tput.beyond_intervals),
            ((None, None), None)
        );
        // Loss 0 → 0: mean A is 0, no % difference.
        let cubic_loss = c
            .rows
            .iter()
            .find(|r| r.scheme == "cubic" && r.metric.starts_with("loss"));
        assert_eq!(cubic_loss.unwrap().diff_pct, None);
        // Replication error over bbr, cubic and reno: tput |6−8|/8 = 25 %, |11−11|/11 = 0,
        // |20−10|/10 = 100 % → 41.67 %; delay 0 %, |150−100|/100 = 50 %, |65−60|/60 = 8.33 %
        // → 19.44 %; overall 30.56 %.
        let e = c.replication_error.unwrap();
        assert_eq!(e.schemes, 3);
        assert!((e.throughput_pct - 125.0 / 3.0).abs() < 1e-9, "{e:?}");
        assert!(
            (e.delay_pct - (50.0 + 25.0 / 3.0) / 3.0).abs() < 1e-9,
            "{e:?}"
        );
        assert!((e.overall_pct - (125.0 / 3.0 + (50.0 + 25.0 / 3.0) / 3.0) / 2.0).abs() < 1e-9);
        assert_eq!(
            (c.only_in_a.clone(), c.only_in_b.clone()),
            (vec!["vegas".to_owned()], vec!["copa".to_owned()])
        );
        let text = to_text(&c);
        assert!(text.contains("<2 runs"), "{text}");
        assert!(text.contains("overall 30.6%"), "{text}");
        assert!(text.contains("<3 runs") && text.contains("yes"), "{text}");
    }
}
