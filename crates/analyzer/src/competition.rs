//! Competition metrics: how flows of different schemes share one bottleneck.
//!
//! Pure functions over per-flow figures that the analysis has already computed (a flow's
//! average throughput, its 95th-percentile one-way delay, its throughput in equal time buckets):
//! no Polars, no I/O.
//!
//! - [`jain`]: Jain's fairness index of a set of throughputs (Jain, Chiu and Hawe, DEC-TR-301,
//!   1984): `(Σx)² / (n·Σx²)`, 1 when all are equal, `1/n` when one flow has everything.
//! - [`jain_per_bucket`] and [`convergence_time`]: the index in each time bucket of the interval
//!   where every flow is active, and how long the flows take to reach a fair share and stay there
//!   (transperf's "convergence fairness", Google's transport test framework: Jain per 1-s bucket
//!   against a threshold).
//! - [`throughput_ratio`]: a flow's throughput in competition ÷ its throughput alone on the same
//!   emulator (the PCC Proteus paper's *primary flow throughput ratio*, seed 002, Fig. 10: a
//!   scavenger is good when the primary flow keeps a ratio near 1).
//! - [`harm`]: Ware, Mukerjee, Seshan and Sherry, "Beyond Jain's Fairness Index: Setting the Bar
//!   for the Deployment of Congestion Control Algorithms", HotNets 2019: the harm a new scheme
//!   does to a status-quo flow, relative to that flow's performance alone. For a metric where
//!   more is better (throughput) harm = (solo − competing) ÷ solo; where less is better (delay)
//!   harm = (competing − solo) ÷ competing. 0 is no harm, 1 the most; a negative harm is a
//!   benefit (the flow did better with the competitor than alone).

/// Jain's fairness index of `x` (throughputs of the flows, any one unit): `(Σx)² / (n·Σx²)`,
/// in `[1/n, 1]`. `None` when there is no flow or every flow has 0 (no share to judge), or a
/// value is negative or not finite.
pub fn jain(x: &[f64]) -> Option<f64> {
    if x.is_empty() || x.iter().any(|v| !v.is_finite() || *v < 0.0) {
        return None;
    }
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    (squares > 0.0).then(|| sum * sum / (x.len() as f64 * squares))
}

/// Jain's index in each time bucket of `buckets` (a range of bucket indices, e.g. the buckets
/// where every flow is active): `flows[f][b]` is flow `f`'s throughput in bucket `b` (all flows
/// bucketed alike, a missing bucket counts 0). One value per bucket of the range, in order; a
/// bucket where no flow delivered anything is `None`.
pub fn jain_per_bucket(flows: &[Vec<f64>], buckets: std::ops::Range<usize>) -> Vec<Option<f64>> {
    buckets
        .map(|b| {
            let x: Vec<f64> = flows
                .iter()
                .map(|f| f.get(b).copied().unwrap_or(0.0))
                .collect();
            jain(&x)
        })
        .collect()
}

/// The time to converge: seconds from the start of the first bucket of `per_bucket` (each
/// `bucket_s` long) to the start of the first bucket from which Jain's index stays at or above
/// `threshold` to the end. `Some(0.0)` when it is fair from the start; `None` when the last
/// bucket is below the threshold (it never converged), or there is no bucket. A bucket with no
/// index (nothing delivered) counts as below.
pub fn convergence_time(per_bucket: &[Option<f64>], bucket_s: f64, threshold: f64) -> Option<f64> {
    let fair = |j: &Option<f64>| j.is_some_and(|j| j >= threshold);
    if !per_bucket.last().is_some_and(fair) {
        return None;
    }
    let unfair_before = per_bucket.iter().rposition(|j| !fair(j));
    let first_fair = unfair_before.map_or(0, |i| i + 1);
    Some(first_fair as f64 * bucket_s)
}

/// A flow's throughput in competition ÷ its throughput alone on the same emulator (seed 002's
/// primary flow throughput ratio). `None` when the solo throughput is not positive or either
/// value is not finite.
pub fn throughput_ratio(competing: f64, solo: f64) -> Option<f64> {
    (competing.is_finite() && solo.is_finite() && solo > 0.0).then(|| competing / solo)
}

/// Whether more of a metric is better (throughput) or less (delay, loss), for [`harm`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Throughput: harm = (solo − competing) ÷ solo.
    More,
    /// One-way delay: harm = (competing − solo) ÷ competing.
    Less,
}

/// The harm (Ware et al., HotNets 2019) done to a flow whose metric was `solo` alone and
/// `competing` beside a competitor: (solo − competing) ÷ solo where more is better,
/// (competing − solo) ÷ competing where less is better. At most 1; negative when the flow did
/// better in competition. `None` when the divisor is not positive or a value is not finite.
pub fn harm(solo: f64, competing: f64, better: Better) -> Option<f64> {
    if !solo.is_finite() || !competing.is_finite() {
        return None;
    }
    match better {
        Better::More => (solo > 0.0).then(|| (solo - competing) / solo),
        Better::Less => (competing > 0.0).then(|| (competing - solo) / competing),
    }
}

/// The interval where every flow is active: from the latest first departure to the earliest
/// last departure of `spans` (each a flow's `(first, last)`, ms on one clock). `None` when
/// there is no flow or the flows never overlap.
pub fn all_active(spans: &[(f64, f64)]) -> Option<(f64, f64)> {
    let start = spans.iter().map(|s| s.0).fold(f64::NEG_INFINITY, f64::max);
    let end = spans.iter().map(|s| s.1).fold(f64::INFINITY, f64::min);
    (!spans.is_empty() && start < end).then_some((start, end))
}

/// The buckets (each `bucket_ms` long, bucket 0 starting at `first_ms`) that lie wholly in
/// `[start_ms, end_ms]`, as a range of bucket indices (empty when none does).
pub fn buckets_within(
    first_ms: f64,
    bucket_ms: f64,
    start_ms: f64,
    end_ms: f64,
) -> std::ops::Range<usize> {
    let from = ((start_ms - first_ms) / bucket_ms).ceil().max(0.0) as usize;
    let to = ((end_ms - first_ms) / bucket_ms).floor().max(0.0) as usize;
    from..to.max(from)
}

/// How the flows of one run shared the bottleneck while all were active.
#[derive(Debug, Clone, PartialEq)]
pub struct Sharing {
    /// The interval where every flow was active ([`all_active`]), ms; `None` if they never
    /// overlapped (then the rest is empty).
    pub active_ms: Option<(f64, f64)>,
    /// Each flow's mean throughput over the whole buckets of that interval, Mbit/s, in the
    /// order of the input.
    pub tput_mbps: Vec<f64>,
    /// Each flow's throughput in each whole bucket of that interval, Mbit/s (flow-major).
    pub tput_per_bucket: Vec<Vec<f64>>,
    /// Jain's index of the mean throughputs.
    pub jain: Option<f64>,
    /// Jain's index in each whole bucket of the interval.
    pub jain_per_bucket: Vec<Option<f64>>,
    /// Seconds from the interval's first whole bucket until the index stays ≥ the threshold
    /// ([`convergence_time`]).
    pub convergence_s: Option<f64>,
}

/// [`Sharing`] of flows given as `(series, span)`: the flow's throughput per bucket (Mbit/s,
/// buckets of `bucket_ms` from `first_ms`) and its active span `(first, last departure)`, ms;
/// `threshold` is the Jain index that counts as fair for the convergence time (0.9 in
/// transperf's tests).
pub fn sharing(
    flows: &[(&[f64], (f64, f64))],
    first_ms: f64,
    bucket_ms: f64,
    threshold: f64,
) -> Sharing {
    let spans: Vec<(f64, f64)> = flows.iter().map(|f| f.1).collect();
    let Some((start, end)) = all_active(&spans) else {
        return Sharing {
            active_ms: None,
            tput_mbps: Vec::new(),
            tput_per_bucket: Vec::new(),
            jain: None,
            jain_per_bucket: Vec::new(),
            convergence_s: None,
        };
    };
    let range = buckets_within(first_ms, bucket_ms, start, end);
    let series: Vec<Vec<f64>> = flows.iter().map(|f| f.0.to_vec()).collect();
    let tput_per_bucket: Vec<Vec<f64>> = series
        .iter()
        .map(|s| {
            range
                .clone()
                .map(|b| s.get(b).copied().unwrap_or(0.0))
                .collect()
        })
        .collect();
    let tput_mbps: Vec<f64> = tput_per_bucket
        .iter()
        .map(|v| crate::stats::mean(v))
        .collect();
    let jain_per_bucket = jain_per_bucket(&series, range);
    Sharing {
        active_ms: Some((start, end)),
        jain: jain(&tput_mbps),
        convergence_s: convergence_time(&jain_per_bucket, bucket_ms / 1000.0, threshold),
        jain_per_bucket,
        tput_mbps,
        tput_per_bucket,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn jain_by_hand() {
        // Equal shares: 1.
        assert_eq!(jain(&[5.0, 5.0, 5.0]), Some(1.0));
        // One flow has everything: 1/n.
        assert!(close(jain(&[10.0, 0.0, 0.0, 0.0]).unwrap(), 0.25));
        // 8 and 2: (10)² / (2 · (64 + 4)) = 100 / 136.
        assert!(close(jain(&[8.0, 2.0]).unwrap(), 100.0 / 136.0));
        // 1, 2, 3: 36 / (3 · 14) = 6/7.
        assert!(close(jain(&[1.0, 2.0, 3.0]).unwrap(), 6.0 / 7.0));
        // Nothing to judge.
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[0.0, 0.0]), None);
        assert_eq!(jain(&[1.0, -1.0]), None);
        assert_eq!(jain(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn jain_in_each_bucket_of_a_range() {
        // Two flows over five buckets; the second starts in bucket 1.
        let flows = vec![
            vec![10.0, 9.0, 6.0, 5.0, 5.0],
            vec![0.0, 1.0, 4.0, 5.0], // bucket 4 missing: 0
        ];
        let j = jain_per_bucket(&flows, 1..5);
        assert_eq!(j.len(), 4);
        // (9 + 1)² / (2 · 82) = 100/164; (10)² / (2 · 52) = 100/104; equal: 1; (5, 0): 1/2.
        assert!(close(j[0].unwrap(), 100.0 / 164.0));
        assert!(close(j[1].unwrap(), 100.0 / 104.0));
        assert_eq!(j[2], Some(1.0));
        assert!(close(j[3].unwrap(), 0.5));
        assert_eq!(jain_per_bucket(&[vec![0.0], vec![0.0]], 0..1), vec![None]);
    }

    #[test]
    fn convergence_is_the_start_of_the_last_fair_stretch() {
        let j = |v: &[f64]| v.iter().map(|&x| Some(x)).collect::<Vec<_>>();
        // Fair from bucket 3 on (0.5 s buckets): 1.5 s.
        assert_eq!(
            convergence_time(&j(&[0.5, 0.7, 0.95, 0.8, 0.92, 0.99]), 0.5, 0.9),
            Some(2.0)
        );
        assert_eq!(
            convergence_time(&j(&[0.5, 0.7, 0.85, 0.91, 0.92, 0.99]), 0.5, 0.9),
            Some(1.5)
        );
        // Fair all along: 0. The threshold itself counts as fair.
        assert_eq!(convergence_time(&j(&[0.9, 1.0]), 1.0, 0.9), Some(0.0));
        // Unfair at the end: never converged; a gap (nothing delivered) is unfair.
        assert_eq!(convergence_time(&j(&[0.95, 0.95, 0.5]), 1.0, 0.9), None);
        assert_eq!(
            convergence_time(&[Some(0.95), None, Some(0.95)], 1.0, 0.9),
            Some(2.0)
        );
        assert_eq!(convergence_time(&[], 1.0, 0.9), None);
    }

    #[test]
    fn sharing_while_all_flows_are_active() {
        // Flow A active 0–10 s at 8 Mbit/s, then 5; flow B from 3.2 s to 9.5 s at 2, then 5
        // (1-s buckets from 0). All active 3.2–9.5 s: whole buckets 4..9 (4 s to 9 s).
        let a = [8.0, 8.0, 8.0, 8.0, 8.0, 5.0, 5.0, 5.0, 5.0, 5.0];
        let b = [0.0, 0.0, 0.0, 1.0, 2.0, 5.0, 5.0, 5.0, 5.0, 2.0];
        let s = sharing(
            &[(&a, (0.0, 10_000.0)), (&b, (3_200.0, 9_500.0))],
            0.0,
            1000.0,
            0.9,
        );
        assert_eq!(s.active_ms, Some((3_200.0, 9_500.0)));
        assert_eq!(buckets_within(0.0, 1000.0, 3_200.0, 9_500.0), 4..9);
        // Means over buckets 4–8: A (8 + 4·5)/5 = 5.6, B (2 + 4·5)/5 = 4.4.
        assert!(close(s.tput_mbps[0], 5.6) && close(s.tput_mbps[1], 4.4));
        assert_eq!(s.tput_per_bucket[1], [2.0, 5.0, 5.0, 5.0, 5.0]);
        // Jain of (5.6, 4.4): 100 / (2 · (31.36 + 19.36)) = 100 / 101.44.
        assert!(close(s.jain.unwrap(), 100.0 / 101.44));
        // Per bucket: (8, 2) → 100/136, then equal shares.
        assert_eq!(s.jain_per_bucket.len(), 5);
        assert!(close(s.jain_per_bucket[0].unwrap(), 100.0 / 136.0));
        assert_eq!(s.jain_per_bucket[1..], [Some(1.0); 4]);
        // Fair from the interval's second whole bucket on: 1 s.
        assert_eq!(s.convergence_s, Some(1.0));
        // Flows that never overlap share nothing.
        let none = sharing(
            &[(&a, (0.0, 1000.0)), (&b, (2000.0, 3000.0))],
            0.0,
            1000.0,
            0.9,
        );
        assert_eq!((none.active_ms, none.jain), (None, None));
        assert_eq!(buckets_within(0.0, 1000.0, 3_200.0, 3_900.0), 4..4);
    }

    #[test]
    fn throughput_ratio_by_hand() {
        assert!(close(throughput_ratio(7.6, 9.5).unwrap(), 0.8));
        assert!(close(throughput_ratio(12.0, 10.0).unwrap(), 1.2));
        assert_eq!(throughput_ratio(5.0, 0.0), None);
        assert_eq!(throughput_ratio(f64::NAN, 1.0), None);
    }

    #[test]
    fn harm_in_both_directions_and_both_signs() {
        // Throughput 10 alone, 6 beside the competitor: harm (10 − 6)/10 = 0.4.
        assert!(close(harm(10.0, 6.0, Better::More).unwrap(), 0.4));
        // 12 beside it: it helped, harm (10 − 12)/10 = −0.2.
        assert!(close(harm(10.0, 12.0, Better::More).unwrap(), -0.2));
        // Starved: harm 1.
        assert_eq!(harm(10.0, 0.0, Better::More), Some(1.0));
        // p95 delay 40 ms alone, 100 ms beside it: (100 − 40)/100 = 0.6.
        assert!(close(harm(40.0, 100.0, Better::Less).unwrap(), 0.6));
        // 32 ms beside it: (32 − 40)/32 = −0.25.
        assert!(close(harm(40.0, 32.0, Better::Less).unwrap(), -0.25));
        // No divisor.
        assert_eq!(harm(0.0, 5.0, Better::More), None);
        assert_eq!(harm(40.0, 0.0, Better::Less), None);
        assert_eq!(harm(f64::INFINITY, 1.0, Better::More), None);
    }
}
