//! Indigo's view of the connection: the state vector a decision is made from, and the actions.
//!
//! The Pantheon paper (§6, "Indigo: extracting an algorithm from data") describes the state as
//! exponentially weighted moving averages of the queueing delay, the sending rate and the
//! delivery rate, the current congestion window and the previous action; we add the minimum
//! RTT ([`State::features`] says why). This module computes
//! them from what a QUIC congestion controller is told — packets sent (bytes, when), packets
//! acknowledged (when each was sent, its RTT sample, the path's minimum RTT) — with no clock of
//! its own: every method takes the instant, in ns on any monotonic clock.
//!
//! Samples, per acknowledged packet sent at `s` and acknowledged at `a`:
//! - **queueing delay** = its RTT (`a` − `s`, as Indigo's sender measures it) − the least RTT
//!   seen so far, ms;
//! - **delivery rate** = bytes acknowledged during the packet's flight (between `s` and `a`,
//!   itself included) ÷ (`a` − `s`), Mbit/s (a delivery-rate sample in the sense of BBR's);
//! - **sending rate** = bytes sent during the flight-long interval before `s` ÷ (`a` − `s`),
//!   Mbit/s: how fast the sender was sending when the packet left.
//!
//! Each is folded into an EWMA of weight [`ALPHA`] per sample (the paper names EWMAs; the
//! weight is TCP's SRTT gain, 1/8). The network sees them scaled ([`State::features`]).

use std::collections::VecDeque;

/// EWMA weight of a new sample (TCP's smoothed-RTT gain).
pub const ALPHA: f64 = 0.125;

/// Indigo's actions on the congestion window, in packets (the paper's set, Indigo's
/// `action_mapping`): ÷2, −10, +0, +10, ×2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Action {
    /// Halve the window.
    Halve,
    /// Ten packets fewer.
    Minus10,
    /// Keep it.
    Keep,
    /// Ten packets more.
    Plus10,
    /// Double it.
    Double,
}

/// How many actions there are (the softmax's width).
pub const ACTIONS: usize = 5;

/// The least congestion window, packets (Indigo's floor).
pub const MIN_CWND: f64 = 2.0;
/// The largest congestion window, packets (enough for 1 Gbit/s × 500 ms of 1436-byte packets).
pub const MAX_CWND: f64 = 50_000.0;

impl Action {
    /// Every action, in the order of the network's outputs.
    pub const ALL: [Action; ACTIONS] = [
        Action::Halve,
        Action::Minus10,
        Action::Keep,
        Action::Plus10,
        Action::Double,
    ];

    /// The action of output `i` (0–4); `None` past the last.
    pub fn from_index(i: usize) -> Option<Action> {
        Action::ALL.get(i).copied()
    }

    /// Its output index, 0–4.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The window `cwnd` (packets) after this action, kept within [`MIN_CWND`, `MAX_CWND`].
    pub fn apply(self, cwnd: f64) -> f64 {
        let w = match self {
            Action::Halve => cwnd / 2.0,
            Action::Minus10 => cwnd - 10.0,
            Action::Keep => cwnd,
            Action::Plus10 => cwnd + 10.0,
            Action::Double => cwnd * 2.0,
        };
        w.clamp(MIN_CWND, MAX_CWND)
    }

    /// The oracle's choice: the action whose result is nearest to the band of windows it
    /// keeps, [`keep_band`]`(ideal)` (0 inside it); of two equally near, the gentler (nearer
    /// to keeping).
    pub fn toward(cwnd: f64, ideal: f64) -> Action {
        let gentleness = |a: Action| (a.index() as i32 - Action::Keep.index() as i32).abs();
        let (lo, hi) = keep_band(ideal);
        let off = |a: Action| {
            let w = a.apply(cwnd);
            (lo - w).max(w - hi).max(0.0)
        };
        Action::ALL
            .into_iter()
            .min_by(|&a, &b| {
                off(a)
                    .total_cmp(&off(b))
                    .then_with(|| gentleness(a).cmp(&gentleness(b)))
            })
            .expect("five actions")
    }
}

/// The windows the oracle keeps, packets, for an ideal window `ideal`: from 10 % to 30 %
/// above it, and at least 10 packets wide (one step of ±10 never jumps over it).
///
/// Above the ideal, not at it, because the policy must be able to see which side of it the
/// window is on. At or below the BDP a link has no queue and delivers `cwnd / RTT`: a window
/// of exactly the BDP looks like any smaller one. Were the oracle to keep the window at the
/// BDP, "no queue" would mostly mean "keep" in its data, and a policy imitating it keeps any
/// window it happens to have (our first trainings did: 6–50 % of the link on most of the 24
/// emulators at 99 % accuracy; with a band of 10 packets above the BDP, a queue of under a
/// millisecond at 200 Mbit/s, it still did at high rates). In the band the queue holds 0.1–0.3
/// of the minimum RTT (more when 10 packets are more): visible at any rate, so the oracle's
/// labels are what the policy sees — raise without a queue, keep a small one, lower a larger
/// one.
pub fn keep_band(ideal: f64) -> (f64, f64) {
    let lo = ideal + ideal / 10.0;
    (lo, (ideal + ideal * 3.0 / 10.0).max(lo + 10.0))
}

/// The number of features the network reads: the three EWMAs, the window, the minimum RTT,
/// and the previous action one-hot.
pub const FEATURES: usize = 5 + ACTIONS;

/// The state vector at one decision.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct State {
    /// EWMA of the queueing delay (RTT − min RTT), ms.
    pub delay_ms: f64,
    /// EWMA of the delivery rate, Mbit/s.
    pub delivery_mbps: f64,
    /// EWMA of the sending rate, Mbit/s.
    pub send_mbps: f64,
    /// The congestion window, packets.
    pub cwnd: f64,
    /// The least RTT seen so far, ms (0 before the first acknowledgement).
    pub min_rtt_ms: f64,
    /// The previous action (`Keep` before the first decision).
    pub previous: Action,
}

impl State {
    /// What the network reads: each quantity on a log scale that maps the training ranges
    /// (delays of 0–1 000 ms, rates of 0–1 000 Mbit/s, windows of 2–50 000 packets) into about
    /// [0, 1], then the previous action one-hot.
    ///
    /// Two departures from Indigo, which fed the four raw values: the log scale lets one
    /// network serve 5 and 200 Mbit/s alike, and the minimum RTT is a fifth input. On a log
    /// scale a window's ratio to the path's BDP (delivery rate × minimum RTT) is a sum of
    /// inputs, which a linear layer can form; without the minimum RTT it cannot, and the
    /// oracle's labels (which act on that ratio) could not be learned across the 24 emulators
    /// (our first training, with the paper's four, did not converge: docs/indigo.md).
    pub fn features(&self) -> [f32; FEATURES] {
        let scaled = |x: f64, top: f64| ((1.0 + x.max(0.0)).ln() / (1.0 + top).ln()) as f32;
        let mut f = [0f32; FEATURES];
        f[0] = scaled(self.delay_ms, 1000.0);
        f[1] = scaled(self.delivery_mbps, 1000.0);
        f[2] = scaled(self.send_mbps, 1000.0);
        f[3] = scaled(self.cwnd, MAX_CWND);
        f[4] = scaled(self.min_rtt_ms, 1000.0);
        f[5 + self.previous.index()] = 1.0;
        f
    }
}

/// Cumulative byte counts over time, for the rates: (instant ns, bytes so far), oldest first.
#[derive(Debug, Default, Clone)]
struct Cumulative {
    points: VecDeque<(u64, u64)>,
    total: u64,
}

impl Cumulative {
    fn add(&mut self, now: u64, bytes: u64) {
        self.total += bytes;
        match self.points.back_mut() {
            Some(last) if last.0 == now => last.1 = self.total,
            _ => self.points.push_back((now, self.total)),
        }
    }

    /// Bytes counted at or before `t` (0 before the first point).
    fn at(&self, t: u64) -> u64 {
        let i = self.points.partition_point(|p| p.0 <= t);
        if i == 0 {
            0
        } else {
            self.points[i - 1].1
        }
    }

    /// Forgets points older than `t` but the last one at or before it.
    fn prune(&mut self, t: u64) {
        while self.points.len() > 1 && self.points[1].0 <= t {
            self.points.pop_front();
        }
    }
}

/// Builds the state from a connection's events (module docs): sans-IO, times in ns.
#[derive(Debug, Clone, Default)]
pub struct Observer {
    sent: Cumulative,
    acked: Cumulative,
    min_rtt_ns: Option<u64>,
    delay_ms: Option<f64>,
    delivery_mbps: Option<f64>,
    send_mbps: Option<f64>,
}

fn ewma(old: Option<f64>, sample: f64) -> Option<f64> {
    Some(match old {
        None => sample,
        Some(o) => (1.0 - ALPHA) * o + ALPHA * sample,
    })
}

impl Observer {
    /// A packet of `bytes` sent at `now`.
    pub fn on_sent(&mut self, now: u64, bytes: u64) {
        self.sent.add(now, bytes);
    }

    /// A packet of `bytes` sent at `sent` acknowledged at `now` (ns).
    pub fn on_ack(&mut self, now: u64, sent: u64, bytes: u64) {
        self.acked.add(now, bytes);
        let flight = now.saturating_sub(sent);
        let min_rtt = *self
            .min_rtt_ns
            .insert(self.min_rtt_ns.map_or(flight, |m| m.min(flight)));
        self.delay_ms = ewma(self.delay_ms, (flight - min_rtt) as f64 / 1e6);
        if flight > 0 {
            let mbps = |b: u64| b as f64 * 8.0 / flight as f64 * 1e3;
            let delivered = self.acked.total - self.acked.at(sent);
            self.delivery_mbps = ewma(self.delivery_mbps, mbps(delivered));
            let sending = self.sent.at(sent) - self.sent.at(sent.saturating_sub(flight));
            self.send_mbps = ewma(self.send_mbps, mbps(sending));
        }
        // Nothing older than two flights back is looked up again.
        let keep = sent.saturating_sub(flight.saturating_mul(2));
        self.sent.prune(keep);
        self.acked.prune(keep);
    }

    /// The least RTT seen, ns (`None` before the first acknowledgement).
    pub fn min_rtt_ns(&self) -> Option<u64> {
        self.min_rtt_ns
    }

    /// The state with window `cwnd` (packets) and the previous action; zeros before the first
    /// acknowledgement.
    pub fn state(&self, cwnd: f64, previous: Action) -> State {
        State {
            delay_ms: self.delay_ms.unwrap_or(0.0),
            delivery_mbps: self.delivery_mbps.unwrap_or(0.0),
            send_mbps: self.send_mbps.unwrap_or(0.0),
            cwnd,
            min_rtt_ms: self.min_rtt_ns.map_or(0.0, |n| n as f64 / 1e6),
            previous,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn actions_act_on_packets_within_bounds() {
        assert_eq!(Action::Halve.apply(100.0), 50.0);
        assert_eq!(Action::Minus10.apply(100.0), 90.0);
        assert_eq!(Action::Plus10.apply(100.0), 110.0);
        assert_eq!(Action::Double.apply(100.0), 200.0);
        assert_eq!(Action::Minus10.apply(5.0), MIN_CWND);
        assert_eq!(Action::Double.apply(40_000.0), MAX_CWND);
        for (i, a) in Action::ALL.into_iter().enumerate() {
            assert_eq!(Action::from_index(i), Some(a));
            assert_eq!(a.index(), i);
        }
        assert_eq!(Action::from_index(5), None);
    }

    #[test]
    fn the_oracle_picks_the_action_nearest_its_band_above_the_ideal_window() {
        use Action::*;
        assert_eq!(keep_band(100.0), (110.0, 130.0));
        assert_eq!(keep_band(20.0), (22.0, 32.0)); // 10 packets wide at least
        assert_eq!(Action::toward(12.0, 100.0), Double); // 24 is nearest
                                                         // 10 → 110: +10 and ×2 both give 20; the gentler wins.
        assert_eq!(Action::toward(10.0, 100.0), Plus10);
        // The band [110, 130] is kept, whatever is inside it.
        for w in [110.0, 120.0, 130.0] {
            assert_eq!(Action::toward(w, 100.0), Keep, "{w}");
        }
        // At the ideal and just under the band: raised.
        assert_eq!(Action::toward(100.0, 100.0), Plus10);
        assert_eq!(Action::toward(108.0, 100.0), Plus10);
        // Above the band: lowered.
        assert_eq!(Action::toward(131.0, 100.0), Minus10);
        assert_eq!(Action::toward(145.0, 100.0), Minus10);
        assert_eq!(Action::toward(260.0, 100.0), Halve);
        assert_eq!(Action::toward(100.0, 10.0), Halve);
    }

    /// A hand-made ACK sequence: a sender of one 1500-byte packet per ms (12 Mbit/s) over a
    /// path of 20 ms RTT whose queue grows by 0.5 ms per packet after the 10th, so that
    /// acknowledgements come every 1.5 ms (8 Mbit/s delivered).
    #[test]
    fn the_state_vector_follows_a_hand_made_ack_sequence() {
        let mut o = Observer::default();
        assert_eq!(o.state(10.0, Action::Keep).delivery_mbps, 0.0);
        let min_rtt = 20 * MS;
        let rtt = |i: u64| min_rtt + i.saturating_sub(10) * MS / 2;
        for i in 0..200u64 {
            o.on_sent(i * MS, 1500);
        }
        // Acknowledgements of packets 0..150, each at its send time + RTT, in order.
        let mut samples = Vec::new();
        for i in 0..150u64 {
            let sent = i * MS;
            o.on_ack(sent + rtt(i), sent, 1500);
            samples.push((rtt(i) - min_rtt) as f64 / 1e6);
        }
        let s = o.state(40.0, Action::Plus10);
        // The delay EWMA, folded by hand; a ramp of 0.5 ms per sample leaves the EWMA
        // (1 − α)/α × 0.5 = 3.5 ms behind the last sample (69.5 ms).
        let mut e = samples[0];
        for &x in &samples[1..] {
            e = (1.0 - ALPHA) * e + ALPHA * x;
        }
        assert!((s.delay_ms - e).abs() < 1e-9, "{} vs {e}", s.delay_ms);
        assert!((s.delay_ms - 66.0).abs() < 0.1, "{}", s.delay_ms);
        // Sent at 12 Mbit/s, delivered at 8.
        assert!(
            (s.send_mbps - 12.0).abs() < 0.3,
            "sending rate {}",
            s.send_mbps
        );
        assert!(
            (s.delivery_mbps - 8.0).abs() < 0.3,
            "delivery rate {}",
            s.delivery_mbps
        );
        assert_eq!(s.cwnd, 40.0);
        assert_eq!(s.min_rtt_ms, 20.0);
        let f = s.features();
        assert_eq!(f[5 + Action::Plus10.index()], 1.0);
        assert_eq!(f[5..].iter().sum::<f32>(), 1.0);
        assert!(f[..5].iter().all(|&x| (0.0..=1.0).contains(&x)), "{f:?}");
    }
}
