//! The guest's clock, set from the host's before its command runs.
//!
//! A guest boots with its real-time clock read from QEMU's emulated RTC, which has whole
//! seconds: it starts up to a second off the host's (0.4–1 s measured here). Whatever a side
//! in the guest timestamps with it — a workload's transfer starts, which its receiver on the
//! host turns into flow completion times — would be off by as much. The tunnel's logs are the
//! host's, so they are unaffected.
//!
//! `pantheon-guest-clock FILE` (run by the guest's script before it says it is up, `FILE` on a
//! 9p share of the host's filesystem) measures the offset as NTP measures one against a
//! server, with the share as the server: each sample reads the guest's clock (`before`),
//! writes a byte to `FILE` — the host's kernel stamps its mtime with the host's clock —, reads
//! that mtime back (`host`) and the guest's clock again (`after`). The host's time lies within
//! the sample's round trip, so `host − (before + after) / 2` is the offset to within half of
//! it; the sample with the shortest round trip wins ([`estimate`]). The guest's clock is then
//! stepped by that offset and the result written to `FILE` as text ([`Estimate::describe`]).

/// One exchange with the host, ns since the Unix epoch: the guest's clock before it, the
/// host's timestamp of it, the guest's clock after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// The guest's clock before the write, ns.
    pub before_ns: i128,
    /// The host's mtime of the written file, ns.
    pub host_ns: i128,
    /// The guest's clock after the mtime was read back, ns.
    pub after_ns: i128,
}

/// What the guest's clock is off by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// To add to the guest's clock to get the host's, ns.
    pub offset_ns: i128,
    /// Half the round trip of the sample it came from, ns: the host's time was within this of
    /// the sample's midpoint.
    pub uncertainty_ns: i128,
}

impl Estimate {
    /// `offset +412.345 ms, ±0.210 ms`.
    pub fn describe(&self) -> String {
        format!(
            "offset {:+.3} ms, ±{:.3} ms",
            self.offset_ns as f64 / 1e6,
            self.uncertainty_ns as f64 / 1e6
        )
    }
}

/// The estimate from the sample with the shortest round trip; `None` without a sample whose
/// round trip is not negative (the guest's clock stepped backwards during it).
pub fn estimate(samples: &[Sample]) -> Option<Estimate> {
    samples
        .iter()
        .filter(|s| s.after_ns >= s.before_ns)
        .min_by_key(|s| s.after_ns - s.before_ns)
        .map(|s| Estimate {
            offset_ns: s.host_ns - (s.before_ns + s.after_ns) / 2,
            uncertainty_ns: (s.after_ns - s.before_ns) / 2,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(before_ns: i128, host_ns: i128, after_ns: i128) -> Sample {
        Sample {
            before_ns,
            host_ns,
            after_ns,
        }
    }

    /// The shortest round trip wins: a guest 400 ms behind, one sample slowed by a 9p stall.
    #[test]
    fn the_shortest_round_trip_gives_the_offset() {
        let behind = 400_000_000;
        let samples = [
            s(1_000, 1_000 + behind + 9_000_000, 20_000_000),
            s(30_000_000, 30_000_000 + behind + 150_000, 30_300_000),
        ];
        let e = estimate(&samples).unwrap();
        assert_eq!(e.offset_ns, behind);
        assert_eq!(e.uncertainty_ns, 150_000);
        assert_eq!(e.describe(), "offset +400.000 ms, ±0.150 ms");
    }

    /// A sample whose guest clock went backwards is not one; none at all gives none.
    #[test]
    fn a_backwards_sample_or_none_gives_no_estimate() {
        assert_eq!(estimate(&[s(10, 5, 9)]), None);
        assert_eq!(estimate(&[]), None);
    }
}
