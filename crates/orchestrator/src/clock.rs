//! Clock correction of remote runs (sans-IO): NTP samples → the offset to apply to each log.
//!
//! A one-way delay between two machines is `receive time − send time` read on two different
//! clocks; it is right only once each clock's offset to a common reference (an NTP server) is
//! added. Pantheon queried `ntpdate` once per run before it started and applied that constant to
//! the whole run; a clock that drifts during a 30 s run, or a failed query, silently gives wrong
//! (even negative: Pantheon issue #71) delays. Here:
//!
//! - each node takes several SNTP samples and keeps the one with the smallest round trip (its
//!   offset error is bounded by half that round trip): [`best_sample`];
//! - offsets are measured **before and after** each run on both nodes, and interpolated linearly
//!   over the run: [`Correction::between`] gives the offset at a log's base time and its drift;
//! - a run whose offset could not be measured, or moved by more than a threshold during the run,
//!   is flagged ([`Correction::flags`]), as is one whose corrected delays go negative (by the
//!   analysis).
//!
//! Sign convention (NTP's θ): `offset = server time − local time`, so `true time = local time +
//! offset`. A node whose clock is 5 ms behind has offset +5 ms; its timestamps move 5 ms later.

/// One SNTP measurement on a node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement {
    /// Offset of the node's clock to the server's, ns (`server − local`).
    pub offset_ns: i64,
    /// Round-trip delay of the query, ns.
    pub rtt_ns: i64,
    /// The node's CLOCK_REALTIME when it was taken, ns since the Unix epoch.
    pub at_ns: i64,
}

/// The sample with the smallest round trip (its offset error is bounded by rtt/2), or `None`
/// for no samples.
pub fn best_sample(samples: &[Measurement]) -> Option<Measurement> {
    samples.iter().copied().min_by_key(|m| m.rtt_ns)
}

/// A node's clock over one run: the offset to add to a log whose base time is `base_ns`
/// ([`Correction::offset_at`]) and its drift.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Correction {
    /// Offset at `at_ns`, ns.
    pub offset_ns: i64,
    /// Where `offset_ns` holds, node's CLOCK_REALTIME ns.
    pub at_ns: i64,
    /// Change of the offset per second of the node's time, ns/s (= parts per billion); 0 with a
    /// single measurement.
    pub drift_ppb: i64,
    /// How far the offset moved between the two measurements, ns (0 with one).
    pub moved_ns: i64,
    /// Whether only one of the two measurements succeeded.
    pub single: bool,
}

impl Correction {
    /// The correction from the measurements before and after a run, either of which may have
    /// failed; `None` when neither succeeded. With both, the offset is interpolated linearly
    /// between them (and extrapolated beyond).
    pub fn between(before: Option<Measurement>, after: Option<Measurement>) -> Option<Correction> {
        match (before, after) {
            (Some(b), Some(a)) if a.at_ns != b.at_ns => {
                let moved = a.offset_ns - b.offset_ns;
                let drift = (moved as i128 * 1_000_000_000 / i128::from(a.at_ns - b.at_ns)) as i64;
                Some(Correction {
                    offset_ns: b.offset_ns,
                    at_ns: b.at_ns,
                    drift_ppb: drift,
                    moved_ns: moved,
                    single: false,
                })
            }
            (Some(m), _) | (None, Some(m)) => Some(Correction {
                offset_ns: m.offset_ns,
                at_ns: m.at_ns,
                drift_ppb: 0,
                moved_ns: 0,
                single: before.is_none() || after.is_none(),
            }),
            (None, None) => None,
        }
    }

    /// The offset to add to a timestamp `t_ns` of this node, ns.
    pub fn offset_at(&self, t_ns: i64) -> i64 {
        let dt = i128::from(t_ns - self.at_ns);
        self.offset_ns + (dt * i128::from(self.drift_ppb) / 1_000_000_000) as i64
    }

    /// What is doubtful about this correction, one sentence each (`node` names the node):
    /// a missing measurement, or an offset that moved more than `max_move_ns` during the run.
    pub fn flags(&self, node: &str, max_move_ns: i64) -> Vec<String> {
        let mut f = Vec::new();
        if self.single {
            f.push(format!(
                "{node}: the clock offset was measured only once (before or after the run); \
                 it is applied as a constant"
            ));
        }
        if self.moved_ns.abs() > max_move_ns {
            f.push(format!(
                "{node}: the clock offset moved by {:.3} ms during the run (more than {:.3} ms)",
                self.moved_ns as f64 / 1e6,
                max_move_ns as f64 / 1e6
            ));
        }
        f
    }
}

/// Flags for a node whose offset could not be measured at all.
pub fn unmeasured_flag(node: &str, why: &str) -> String {
    format!("{node}: clock offset not measured ({why}); its one-way delays are uncorrected")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(offset_ms: f64, rtt_ms: f64, at_s: f64) -> Measurement {
        Measurement {
            offset_ns: (offset_ms * 1e6) as i64,
            rtt_ns: (rtt_ms * 1e6) as i64,
            at_ns: (at_s * 1e9) as i64,
        }
    }

    #[test]
    fn the_sample_with_the_shortest_round_trip_wins() {
        let s = [m(3.0, 2.0, 0.0), m(1.0, 0.5, 1.0), m(7.0, 9.0, 2.0)];
        assert_eq!(best_sample(&s), Some(s[1]));
        assert_eq!(best_sample(&[]), None);
    }

    #[test]
    fn offsets_are_interpolated_between_before_and_after() {
        // +2 ms at t = 100 s, +2.5 ms at t = 150 s: 10 µs per second = 10 000 ppb.
        let c = Correction::between(Some(m(2.0, 1.0, 100.0)), Some(m(2.5, 1.0, 150.0))).unwrap();
        assert_eq!(c.drift_ppb, 10_000);
        assert_eq!(c.offset_at((100.0 * 1e9) as i64), 2_000_000);
        assert_eq!(c.offset_at((125.0 * 1e9) as i64), 2_250_000);
        assert_eq!(c.offset_at((150.0 * 1e9) as i64), 2_500_000);
        assert!(c.flags("a", 1_000_000).is_empty());
        // 0.5 ms moved is more than a 0.1 ms threshold.
        let f = c.flags("node a", 100_000);
        assert!(
            f[0].contains("node a") && f[0].contains("0.500 ms"),
            "{f:?}"
        );
    }

    #[test]
    fn one_measurement_is_a_constant_and_is_flagged() {
        let c = Correction::between(None, Some(m(-4.0, 1.0, 10.0))).unwrap();
        assert_eq!(c.offset_at(0), -4_000_000);
        assert_eq!(c.offset_at(i64::MAX / 2), -4_000_000);
        assert!(c.flags("b", i64::MAX)[0].contains("only once"));
        assert_eq!(Correction::between(None, None), None);
    }
}
