//! Indigo's view of the connection: the state vector a decision is made from, and the actions.
//!
//! The Pantheon paper (§6, "Indigo: extracting an algorithm from data") describes the state as
//! exponentially weighted moving averages of the queueing delay, the sending rate and the
//! delivery rate, the current congestion window and the previous action. This module computes
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

    /// The oracle's choice: the action whose result is nearest to the ideal window `ideal`
    /// (packets) from `cwnd`; of two equally near, the gentler (nearer to keeping).
    pub fn toward(cwnd: f64, ideal: f64) -> Action {
        let gentleness = |a: Action| (a.index() as i32 - Action::Keep.index() as i32).abs();
        Action::ALL
            .into_iter()
            .min_by(|&a, &b| {
                let da = (a.apply(cwnd) - ideal).abs();
                let db = (b.apply(cwnd) - ideal).abs();
                da.total_cmp(&db)
                    .then_with(|| gentleness(a).cmp(&gentleness(b)))
            })
            .expect("five actions")
    }
}

/// The number of features the network reads: the three EWMAs, the window, and the previous
/// action one-hot.
pub const FEATURES: usize = 4 + ACTIONS;

/// The state vector at one decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct State {
    /// EWMA of the queueing delay (RTT − min RTT), ms.
    pub delay_ms: f64,
    /// EWMA of the delivery rate, Mbit/s.
    pub delivery_mbps: f64,
    /// EWMA of the sending rate, Mbit/s.
    pub send_mbps: f64,
    /// The congestion window, packets.
    pub cwnd: f64,
    /// The previous action (`Keep` before the first decision).
    pub previous: Action,
}

impl State {
    /// What the network reads: each quantity on a log scale that maps the training ranges
    /// (delays of 0–1 000 ms, rates of 0–1 000 Mbit/s, windows of 2–50 000 packets) into about
    /// [0, 1], then the previous action one-hot. (Indigo fed raw values; a log scale lets one
    /// network serve 5 and 200 Mbit/s alike.)
    pub fn features(&self) -> [f32; FEATURES] {
        let scaled = |x: f64, top: f64| ((1.0 + x.max(0.0)).ln() / (1.0 + top).ln()) as f32;
        let mut f = [0f32; FEATURES];
        f[0] = scaled(self.delay_ms, 1000.0);
        f[1] = scaled(self.delivery_mbps, 1000.0);
        f[2] = scaled(self.send_mbps, 1000.0);
        f[3] = scaled(self.cwnd, MAX_CWND);
        f[4 + self.previous.index()] = 1.0;
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
    fn the_oracle_picks_the_action_nearest_the_ideal_window() {
        assert_eq!(Action::toward(12.0, 100.0), Action::Double); // 24 is nearest
                                                                 // 10 → 100: +10 and ×2 both give 20; the gentler wins.
        assert_eq!(Action::toward(10.0, 100.0), Action::Plus10);
        assert_eq!(Action::toward(100.0, 100.0), Action::Keep);
        assert_eq!(Action::toward(100.0, 104.0), Action::Keep); // 100 beats 110
        assert_eq!(Action::toward(100.0, 106.0), Action::Plus10);
        assert_eq!(Action::toward(100.0, 80.0), Action::Minus10);
        assert_eq!(Action::toward(100.0, 10.0), Action::Halve);
        // 100 → 105: keeping and +10 are equally near; the gentler wins.
        assert_eq!(Action::toward(100.0, 105.0), Action::Keep);
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
        let f = s.features();
        assert_eq!(f[4 + Action::Plus10.index()], 1.0);
        assert_eq!(f[4..].iter().sum::<f32>(), 1.0);
        assert!(f[..4].iter().all(|&x| (0.0..=1.0).contains(&x)), "{f:?}");
    }
}
