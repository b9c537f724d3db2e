//! Non-reactive cross traffic on an emulated bottleneck: other users' packets that enter the
//! link's queue at a given rate and take its delivery opportunities, as iBox (Ashok et al.,
//! HotNets 2020) replays the cross traffic it learned from Pantheon's traces — a UDP sender at
//! a rate that changes every second.
//!
//! - [`CrossTraffic`]: the rate, constant or a per-second series that repeats, as
//!   `mm-link --uplink-cross-traffic=RATES` writes it: `8` (Mbit/s, constant) or `8,2.5,0,12`
//!   (Mbit/s in seconds 0, 1, 2, 3, then again from the first).
//! - [`CrossSource`]: the sans-IO sender. Within a second of rate R it sends 1500-byte IP
//!   packets (1504 bytes with Mahimahi's header, one delivery opportunity each) evenly spaced,
//!   every `1500 × 8 ÷ R` seconds; the fractional packet left at a second's end carries over,
//!   so a series' mean rate is exact over any whole number of seconds.
//!
//! Cross packets are never delivered to an end host: [`crate::stage::LinkStage`] queues them
//! with the scheme's, serves them in the same opportunities and discards them when they leave,
//! logging them with marked events (`c+`, `c-`, `cd`; [`crate::linklog`]). A packet is known
//! as cross traffic by its first four bytes, [`CROSS_MARK`]: IP version 15 is no IP packet's
//! ([`is_cross`]).

use std::fmt;

use crate::Packet;

/// Bytes of a cross-traffic packet, as an IP datagram (1504 with Mahimahi's 4-byte header:
/// one delivery opportunity).
pub const CROSS_PACKET_BYTES: usize = 1500;

/// Highest rate accepted, Mbit/s (a second at this rate is 8.3 M packets).
pub const MAX_CROSS_MBPS: f64 = 100_000.0;

/// The rate of cross traffic on one direction of a link, Mbit/s, per second of the run; the
/// series repeats. One value is a constant rate.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CrossTraffic {
    /// Mbit/s in seconds 0, 1, 2, …, then again from the first; never empty, each in
    /// `0..=MAX_CROSS_MBPS`.
    pub mbps_per_second: Vec<f64>,
}

/// A rate series that does not parse: which value and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrossError(pub String);

impl fmt::Display for CrossError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CrossError {}

impl CrossTraffic {
    /// A constant rate, Mbit/s. Errors if negative, not finite or above [`MAX_CROSS_MBPS`].
    pub fn constant(mbps: f64) -> Result<CrossTraffic, CrossError> {
        CrossTraffic::series(vec![mbps])
    }

    /// A per-second series, Mbit/s, repeating. Errors if empty or if a value is negative, not
    /// finite or above [`MAX_CROSS_MBPS`] (naming its second).
    pub fn series(mbps_per_second: Vec<f64>) -> Result<CrossTraffic, CrossError> {
        if mbps_per_second.is_empty() {
            return Err(CrossError("no rate given".into()));
        }
        for (i, r) in mbps_per_second.iter().enumerate() {
            if !r.is_finite() || *r < 0.0 || *r > MAX_CROSS_MBPS {
                return Err(CrossError(format!(
                    "second {i}: {r} Mbit/s is not a rate in 0..={MAX_CROSS_MBPS}"
                )));
            }
        }
        Ok(CrossTraffic { mbps_per_second })
    }

    /// Parses `8` or `8,2.5,0,12` (Mbit/s per second, comma-separated). Errors name the value.
    pub fn parse(text: &str) -> Result<CrossTraffic, CrossError> {
        let rates = text
            .split(',')
            .enumerate()
            .map(|(i, v)| {
                v.trim().parse::<f64>().map_err(|_| {
                    CrossError(format!(
                        "value {} (`{}`) is not a rate in Mbit/s",
                        i + 1,
                        v.trim()
                    ))
                })
            })
            .collect::<Result<Vec<f64>, _>>()?;
        CrossTraffic::series(rates)
    }

    /// The words of [`CrossTraffic::parse`]: `8`, `8,2.5,0,12` (shortest exact numbers).
    pub fn words(&self) -> String {
        let rates: Vec<String> = self.mbps_per_second.iter().map(|r| r.to_string()).collect();
        rates.join(",")
    }

    /// Mean rate over the series, Mbit/s.
    pub fn mean_mbps(&self) -> f64 {
        self.mbps_per_second.iter().sum::<f64>() / self.mbps_per_second.len() as f64
    }
}

/// The first bytes of a cross-traffic packet (the rest are zeros): an IP header's version
/// nibble of 15, which no IP packet has.
pub const CROSS_MARK: [u8; 4] = [0xF0, b'C', b'R', b'S'];

/// True for a packet made by a [`CrossSource`] (it starts with [`CROSS_MARK`]).
pub fn is_cross(pkt: &[u8]) -> bool {
    pkt.starts_with(&CROSS_MARK)
}

/// A cross-traffic packet: [`CROSS_PACKET_BYTES`] bytes, [`CROSS_MARK`] first.
pub fn cross_packet() -> Packet {
    let mut pkt = vec![0u8; CROSS_PACKET_BYTES];
    pkt[..CROSS_MARK.len()].copy_from_slice(&CROSS_MARK);
    pkt
}

/// The sender of a [`CrossTraffic`] series, on the link's ns clock from time 0.
#[derive(Debug, Clone)]
pub struct CrossSource {
    bits_per_second: Vec<f64>,
    /// The second the next packet falls in, and the bits to send from that second's start
    /// until the next packet is complete.
    second: u64,
    bits_owed: f64,
    /// Time of the next packet, ns (`None` when the series has no traffic at all).
    next: Option<u64>,
}

const PACKET_BITS: f64 = (CROSS_PACKET_BYTES * 8) as f64;
/// ns per second (the emulator's clock is in ns).
const SECOND: u64 = 1_000_000_000;

impl CrossSource {
    /// The sender of `traffic`, its first packet due when the first packet's bits are sent.
    pub fn new(traffic: &CrossTraffic) -> CrossSource {
        let mut s = CrossSource {
            bits_per_second: traffic.mbps_per_second.iter().map(|r| r * 1e6).collect(),
            second: 0,
            bits_owed: PACKET_BITS,
            next: None,
        };
        s.next = s.schedule();
        s
    }

    fn rate(&self, second: u64) -> f64 {
        self.bits_per_second[(second % self.bits_per_second.len() as u64) as usize]
    }

    /// When the packet whose bits are owed from `self.second` on is complete: skips seconds
    /// too slow to finish it, carrying their bits over. `None` if the series is all zeros.
    fn schedule(&mut self) -> Option<u64> {
        if self.bits_per_second.iter().all(|r| *r == 0.0) {
            return None;
        }
        loop {
            let start = self.second * SECOND;
            let rate = self.rate(self.second);
            // Time into this second at which the owed bits are sent, given that the second
            // began with `bits_owed` still to send.
            let needed_s = self.bits_owed / rate;
            if rate > 0.0 && needed_s < 1.0 {
                return Some(start + (needed_s * 1e9).round() as u64);
            }
            self.bits_owed -= rate;
            self.second += 1;
        }
    }

    /// Time of the next cross packet, ns; `None` if the series is all zeros.
    pub fn next_arrival(&self) -> Option<u64> {
        self.next
    }

    /// The packet due at [`CrossSource::next_arrival`], and the next one scheduled.
    pub fn take(&mut self) -> Option<(u64, Packet)> {
        let t = self.next?;
        // The next packet's bits follow this one's, counted from the same second's start.
        self.bits_owed += PACKET_BITS;
        self.next = self.schedule();
        Some((t, cross_packet()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = SECOND / 1000;

    #[test]
    fn cross_packets_have_no_ecn_field_and_are_never_marked() {
        let mut cross = cross_packet();
        assert_eq!(crate::ecn::codepoint(&cross), None);
        assert!(!crate::ecn::set_ce(&mut cross));
        assert_eq!(cross, cross_packet());
    }

    fn times(traffic: &CrossTraffic, until_ns: u64) -> Vec<u64> {
        let mut s = CrossSource::new(traffic);
        let mut out = Vec::new();
        while s.next_arrival().is_some_and(|t| t < until_ns) {
            out.push(s.take().unwrap().0);
        }
        out
    }

    /// 12 Mbit/s of 1500-byte packets: one per ms, the first when its bits are sent.
    #[test]
    fn a_constant_rate_sends_evenly_spaced_packets() {
        let t = times(&CrossTraffic::constant(12.0).unwrap(), 10 * MS + 1);
        assert_eq!(t, (1..=10).map(|i| i * MS).collect::<Vec<_>>());
    }

    /// A series' seconds each carry their own rate, the fraction of a packet carrying over:
    /// 6 Mbit/s then 0.006 Mbit/s (half a packet per second) then 12 Mbit/s.
    #[test]
    fn a_series_changes_rate_every_second_and_repeats() {
        let traffic = CrossTraffic::parse("6, 0.006,12").unwrap();
        let t = times(&traffic, 6 * SECOND);
        let in_second = |k: u64| t.iter().filter(|x| **x / SECOND == k).count();
        // 500 packets' bits in second 0, the last complete at its very end (1.000 s).
        assert_eq!(in_second(0), 499);
        assert_eq!(
            in_second(1),
            1,
            "the packet completed at 1.000 s; then half a packet"
        );
        assert_eq!(in_second(2), 1000);
        assert!((499..=500).contains(&in_second(3)), "the series repeats");
        // The half packet of second 1 completes early in second 2.
        let first_in_2 = *t.iter().find(|x| **x >= 2 * SECOND).unwrap();
        assert!(first_in_2 - 2 * SECOND <= MS / 2 + 1, "{first_in_2}");
        // Mean rate exact over whole seconds: 6 + 0.006 + 12 Mbit/s over 3 s.
        let total: usize = (0..3).map(in_second).sum();
        assert!(
            (total as f64 - 18.006e6 / PACKET_BITS).abs() <= 1.0,
            "{total}"
        );
        assert!(t.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn zero_traffic_sends_nothing_and_bad_rates_are_named() {
        assert!(times(&CrossTraffic::parse("0,0").unwrap(), 10 * SECOND).is_empty());
        assert_eq!(
            CrossTraffic::parse("8,x").unwrap_err().0,
            "value 2 (`x`) is not a rate in Mbit/s"
        );
        assert!(CrossTraffic::parse("8,-1")
            .unwrap_err()
            .0
            .starts_with("second 1:"));
        assert!(CrossTraffic::parse("inf").is_err());
        assert_eq!(CrossTraffic::parse("8,2.5,0").unwrap().words(), "8,2.5,0");
        assert!(is_cross(
            &CrossSource::new(&CrossTraffic::constant(1.0).unwrap())
                .take()
                .unwrap()
                .1
        ));
        assert!(!is_cross(&[0x45, 0, 0, 0]) && !is_cross(&[0u8; 1500]));
    }
}
