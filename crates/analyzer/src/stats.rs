//! Summary statistics of per-run figures (no Polars: the calibration model in `emucal` uses
//! them too).

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
