//! Summary statistics of per-run figures, and the replication error of one experiment as an
//! emulation of another (no Polars: the calibration in `emucal` uses them too).

use std::collections::BTreeMap;

pub use tunnel::log::percentile_nearest as percentile;

/// Arithmetic mean (NaN for no values).
pub fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Arithmetic mean, `None` for no values (for tables that print N/A).
pub fn mean_if_any(x: &[f64]) -> Option<f64> {
    (!x.is_empty()).then(|| mean(x))
}

/// Sample standard deviation (n − 1); `None` for fewer than two values.
pub fn std_dev(x: &[f64]) -> Option<f64> {
    (x.len() >= 2).then(|| {
        let m = mean(x);
        (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() - 1) as f64).sqrt()
    })
}

/// Median (mean of the two middle values for an even count); `None` for no values.
pub fn median(x: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = x.iter().copied().filter(|v| !v.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// p50, p95 and p99 of some values (Pantheon's nearest-index percentile,
/// [`percentile`]).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl Percentiles {
    /// `None` for no values.
    pub fn of(values: &[f64]) -> Option<Percentiles> {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        Some(Percentiles {
            p50: percentile(&v, 0.50)?,
            p95: percentile(&v, 0.95)?,
            p99: percentile(&v, 0.99)?,
        })
    }
}

/// One scheme's per-run totals in one experiment.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SchemeRuns {
    /// Average throughput of each run, Mbit/s.
    pub tput_mbps: Vec<f64>,
    /// 95th-percentile one-way delay of each run, ms.
    pub delay_ms: Vec<f64>,
    /// Loss rate of each run, percent.
    pub loss_pct: Vec<f64>,
}

/// The replication error of B as an emulation of A, percent.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ReplicationError {
    /// Mean over schemes of |median tput B − median tput A| ÷ median tput A, percent.
    pub throughput_pct: f64,
    /// The same for the median p95 delay, percent.
    pub delay_pct: f64,
    /// The two averaged, percent.
    pub overall_pct: f64,
    /// Schemes it is computed over.
    pub schemes: usize,
}

/// The replication error of `b` as an emulation of `a` over the schemes both have with a
/// median in each (and a non-zero one in `a`); `None` when there is no such scheme.
pub fn replication_error(
    a: &BTreeMap<String, SchemeRuns>,
    b: &BTreeMap<String, SchemeRuns>,
) -> Option<ReplicationError> {
    let rel = |real: &[f64], emu: &[f64]| match (median(real), median(emu)) {
        (Some(r), Some(e)) if r != 0.0 => Some((e - r).abs() / r),
        _ => None,
    };
    let (mut tput_err, mut delay_err) = (Vec::new(), Vec::new());
    for (scheme, ra) in a {
        let Some(rb) = b.get(scheme) else { continue };
        if let (Some(t), Some(d)) = (
            rel(&ra.tput_mbps, &rb.tput_mbps),
            rel(&ra.delay_ms, &rb.delay_ms),
        ) {
            tput_err.push(t);
            delay_err.push(d);
        }
    }
    (!tput_err.is_empty()).then(|| {
        let (t, d) = (mean(&tput_err) * 100.0, mean(&delay_err) * 100.0);
        ReplicationError {
            throughput_pct: t,
            delay_pct: d,
            overall_pct: (t + d) / 2.0,
            schemes: tput_err.len(),
        }
    })
}
