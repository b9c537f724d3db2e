//! A Prague congestion controller for quinn-proto: the L4S scheme that needs no guest kernel
//! (`quic_prague`, issue 52).
//!
//! L4S (RFC 9330) gives a flow that marks its packets ECT(1) a queue of its own in a DualQ
//! Coupled AQM (RFC 9332), where the AQM marks CE early and often instead of dropping late. A
//! *scalable* controller answers each mark by a small reduction, so its queue stays at about a
//! millisecond while it keeps the link full. RFC 9331 §4.3 lists what such a controller must
//! do (the "Prague requirements"); TCP Prague (Linux, `tcp_prague.c` of L4STeam/linux) is the
//! reference one. This is that control law over QUIC:
//!
//! - **Marked fraction α**, an EWMA over rounds (a round ends when a packet sent after it began
//!   is acknowledged, about one RTT): α ← α + g·(F − α), where F is the fraction of the round's
//!   acknowledged bytes that came back CE-marked, g = 1/16 (Linux's `prague_alpha_bits` = 4;
//!   DCTCP's g). α starts at 1, as Linux's.
//! - **Reduction on CE**, at most once per round: cwnd ← cwnd·(1 − α/2), ssthresh ← cwnd
//!   (DCTCP's law, RFC 8257 §3.3). The first mark in slow start (α near 1) halves the window.
//! - **Additive increase** of one datagram per round in congestion avoidance (appropriate byte
//!   counting, RFC 3465), slow start below ssthresh; no growth for packets sent before the last
//!   reduction.
//! - **Loss**: the classic response, at most once per round (cwnd halved, as NewReno; the
//!   minimum window on persistent congestion) — RFC 9331 §4.3's "fall back to Reno-friendly on
//!   loss".
//!
//! QUIC's ACK frames carry exact ECN counts (RFC 9000 §13.4), which is the "accurate feedback"
//! Prague needs; quinn-proto passes a controller only *that* an ACK frame raised the CE count
//! (`on_congestion_event` with no lost bytes), not by how much. The scheme therefore asks its
//! peer to acknowledge every packet (the ACK-frequency extension, threshold 0,
//! [`super::Settings::ack_each_packet`]) — and a receiver acknowledges a CE-marked packet at
//! once anyway — so that the bytes an ACK frame newly acknowledged are the bytes its CE count
//! is about. Where an ACK frame covers several packets (a lost ACK), all of them count as
//! marked: α errs high, the safe side.
//!
//! Not done (deviations from RFC 9331 §4.3's SHOULDs, listed in the scheme's descriptor):
//! RTT-independence (the additive increase is one datagram per RTT, as Reno's), detecting a
//! classic ECN AQM on the path, and windows below two datagrams.
//!
//! The controller marks nothing itself: the codepoint is the I/O's (quinn sends ECT(0);
//! [`super::EcnMarking::L4s`] turns it into ECT(1) on the wire and back on receipt).

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

use quinn_proto::congestion::{Controller, ControllerFactory, ControllerMetrics};
use quinn_proto::RttEstimator;

/// Prague's EWMA gain g: 1/16.
pub const GAIN: f64 = 1.0 / 16.0;

/// A Prague controller's configuration: its initial window.
#[derive(Debug, Clone)]
pub struct PragueConfig {
    /// Initial congestion window, bytes: RFC 9002 §7.2's min(10 × 1 200, max(2 × 1 200, 14 720))
    /// = 12 000 by default (quinn-proto's NewReno and Cubic use its `BASE_DATAGRAM_SIZE` the same
    /// way).
    pub initial_window: u64,
}

impl Default for PragueConfig {
    fn default() -> Self {
        PragueConfig {
            initial_window: 14_720u64.clamp(2 * 1200, 10 * 1200),
        }
    }
}

impl ControllerFactory for PragueConfig {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Prague::new(self.initial_window, now, current_mtu))
    }
}

/// One connection's Prague state. Sans-IO: quinn-proto calls it with the times packets were
/// sent and acknowledged.
#[derive(Debug, Clone)]
pub struct Prague {
    initial_window: u64,
    mtu: u64,
    /// Congestion window, bytes.
    window: u64,
    /// Slow-start threshold, bytes (`u64::MAX` until the first reduction).
    ssthresh: u64,
    /// Congestion avoidance's byte counter: a datagram more each time it passes the window.
    ca_acked: u64,
    /// The marked fraction's EWMA, 0 to 1.
    alpha: f64,
    /// The current round began at this time: acknowledging a packet sent at or after it ends
    /// the round.
    round_start: Instant,
    /// Bytes acknowledged and bytes acknowledged CE-marked in the current round.
    round_acked: u64,
    round_marked: u64,
    /// Bytes the ACK frame being processed (or the last one, once it ended) newly acknowledged.
    frame_acked: u64,
    /// The last ACK frame ended ([`Controller::on_end_acks`]): the next acknowledgement starts
    /// a new frame.
    frame_ended: bool,
    /// Time of the last reduction (CE or loss): signals about packets sent before it belong to
    /// that reduction's round and are not answered again, and those packets' acknowledgements
    /// do not grow the window.
    reduced_at: Instant,
}

impl Prague {
    /// A connection's controller at `now`, with `initial_window` bytes and datagrams of
    /// `current_mtu` bytes.
    pub fn new(initial_window: u64, now: Instant, current_mtu: u16) -> Prague {
        Prague {
            initial_window,
            mtu: u64::from(current_mtu),
            window: initial_window,
            ssthresh: u64::MAX,
            ca_acked: 0,
            alpha: 1.0,
            round_start: now,
            round_acked: 0,
            round_marked: 0,
            frame_acked: 0,
            frame_ended: true,
            reduced_at: now,
        }
    }

    /// The marked fraction's EWMA α, 0 to 1.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Slow-start threshold, bytes.
    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    fn minimum_window(&self) -> u64 {
        2 * self.mtu
    }

    /// `bytes` of a packet sent at `sent` were acknowledged at `now`; `app_limited` if the
    /// sender had nothing to send before (then the window does not grow).
    pub fn acked(&mut self, now: Instant, sent: Instant, bytes: u64, app_limited: bool) {
        if self.frame_ended {
            self.frame_acked = 0;
            self.frame_ended = false;
        }
        self.frame_acked += bytes;
        self.round_acked += bytes;
        if sent >= self.round_start {
            self.end_round(now);
        }
        if app_limited || sent <= self.reduced_at {
            return;
        }
        if self.window < self.ssthresh {
            self.window += bytes;
        } else {
            self.ca_acked += bytes;
            if self.ca_acked >= self.window {
                self.ca_acked -= self.window;
                self.window += self.mtu;
            }
        }
    }

    /// The round ends: α takes in its marked fraction.
    fn end_round(&mut self, now: Instant) {
        if self.round_acked > 0 {
            let fraction = (self.round_marked as f64 / self.round_acked as f64).min(1.0);
            self.alpha += GAIN * (fraction - self.alpha);
        }
        self.round_acked = 0;
        self.round_marked = 0;
        self.round_start = now;
    }

    /// The ACK frame just processed raised the peer's CE count; its largest newly acknowledged
    /// packet was sent at `sent`. Its newly acknowledged bytes count as marked, and the window
    /// shrinks by α/2 unless it already did for this round.
    pub fn ce(&mut self, now: Instant, sent: Instant) {
        self.round_marked += self.frame_acked;
        if sent <= self.reduced_at {
            return;
        }
        self.reduced_at = now;
        let cut = (self.window as f64 * self.alpha / 2.0) as u64;
        self.window = self.window.saturating_sub(cut).max(self.minimum_window());
        self.ssthresh = self.window;
        self.ca_acked = 0;
    }

    /// Packets were lost, the last of them sent at `sent`: Reno's halving, once per round; the
    /// minimum window on persistent congestion.
    pub fn lost(&mut self, now: Instant, sent: Instant, persistent: bool) {
        if persistent {
            self.window = self.minimum_window();
            self.reduced_at = now;
            return;
        }
        if sent <= self.reduced_at {
            return;
        }
        self.reduced_at = now;
        self.window = (self.window / 2).max(self.minimum_window());
        self.ssthresh = self.window;
        self.ca_acked = 0;
    }
}

impl Controller for Prague {
    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        _rtt: &RttEstimator,
    ) {
        self.acked(now, sent, bytes, app_limited);
    }

    fn on_end_acks(
        &mut self,
        _now: Instant,
        _in_flight: u64,
        _app_limited: bool,
        _largest_packet_num_acked: Option<u64>,
    ) {
        self.frame_ended = true;
    }

    /// quinn-proto reports an ECN signal with `lost_bytes` = 0 (`process_ecn`), a loss with the
    /// bytes lost.
    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        if lost_bytes == 0 && !is_persistent_congestion {
            self.ce(now, sent);
        } else {
            self.lost(now, sent, is_persistent_congestion);
        }
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.mtu = u64::from(new_mtu);
        self.window = self.window.max(self.minimum_window());
    }

    fn window(&self) -> u64 {
        self.window
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut m = ControllerMetrics::default();
        m.congestion_window = self.window;
        m.ssthresh = Some(self.ssthresh);
        m
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        self.initial_window
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const MTU: u64 = 1436;

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    /// One ACK frame at `now` acknowledging `packets` packets sent at `sent`, CE-marked or not.
    fn frame(p: &mut Prague, now: Instant, sent: Instant, packets: u64, marked: bool) {
        for _ in 0..packets {
            p.acked(now, sent, MTU, false);
        }
        p.on_end_acks(now, 0, false, None);
        if marked {
            p.on_congestion_event(now, sent, false, 0);
        }
    }

    #[test]
    fn slow_start_grows_by_what_is_acknowledged_and_the_first_mark_halves() {
        let t0 = Instant::now();
        let mut p = Prague::new(10 * MTU, t0, MTU as u16);
        frame(&mut p, ms(t0, 20), ms(t0, 1), 10, false);
        assert_eq!(p.window(), 20 * MTU);
        // α decayed once, by its one unmarked round: 1 − 1/16.
        assert!((p.alpha() - 15.0 / 16.0).abs() < 1e-12, "{}", p.alpha());
        // The first mark (α = 15/16, its packet sent in the round that began at t0 + 20 ms):
        // the window grows by it, then cwnd·(1 − 15/32), ssthresh there.
        frame(&mut p, ms(t0, 40), ms(t0, 15), 1, true);
        let expected = 21 * MTU - (21.0 * MTU as f64 * 15.0 / 32.0) as u64;
        assert_eq!(p.window(), expected);
        assert_eq!(p.ssthresh(), expected);
    }

    #[test]
    fn alpha_is_the_ewma_of_the_marked_fraction_per_round() {
        let t0 = Instant::now();
        let mut p = Prague::new(10 * MTU, t0, MTU as u16);
        // Round 1 (packets sent before t0 + 0): closes at the first acknowledgement of a packet
        // sent after it began. 4 frames of 1 packet, one marked → F = 1/4 in the next round.
        frame(&mut p, ms(t0, 10), ms(t0, 0), 1, false); // ends round 0 (nothing marked): α 15/16
        let a0 = p.alpha();
        frame(&mut p, ms(t0, 11), ms(t0, 1), 1, true);
        frame(&mut p, ms(t0, 12), ms(t0, 2), 1, false);
        frame(&mut p, ms(t0, 13), ms(t0, 3), 1, false);
        // A packet sent after the round began (t0 + 10) ends it: F = 1 marked of 3 packets + this
        // one (counted in the round it closes) = 1/4.
        frame(&mut p, ms(t0, 30), ms(t0, 11), 1, false);
        let expected = a0 + GAIN * (0.25 - a0);
        assert!(
            (p.alpha() - expected).abs() < 1e-12,
            "{} {expected}",
            p.alpha()
        );
        // Rounds without marks decay α geometrically toward 0.
        let mut now = 30;
        for _ in 0..100 {
            frame(&mut p, ms(t0, now + 20), ms(t0, now + 1), 1, false);
            now += 20;
        }
        assert!(p.alpha() < expected * (15.0f64 / 16.0).powi(99));
    }

    #[test]
    fn a_round_answers_one_mark_and_grows_one_datagram_in_congestion_avoidance() {
        let t0 = Instant::now();
        let mut p = Prague::new(100 * MTU, t0, MTU as u16);
        // Leave slow start at 100 datagrams with α brought low: 64 unmarked rounds.
        let mut now = 0;
        for _ in 0..64 {
            frame(&mut p, ms(t0, now + 20), ms(t0, now + 1), 1, false);
            now += 20;
        }
        p.ssthresh = p.window;
        let alpha = p.alpha();
        let before = p.window();
        // Sent before the current round began (at `now`): α is not updated before the cut.
        frame(&mut p, ms(t0, now + 20), ms(t0, now - 5), 1, true);
        let after_cut = before - (before as f64 * alpha / 2.0) as u64;
        assert_eq!(p.window(), after_cut);
        // More marks for packets sent before the reduction: no second cut, no growth.
        frame(&mut p, ms(t0, now + 21), ms(t0, now + 2), 5, true);
        assert_eq!(p.window(), after_cut);
        // A window's worth of bytes sent after it, acknowledged unmarked: one datagram more.
        let packets = after_cut.div_ceil(MTU);
        frame(&mut p, ms(t0, now + 60), ms(t0, now + 40), packets, false);
        assert_eq!(p.window(), after_cut + MTU);
    }

    #[test]
    fn loss_halves_once_per_round_and_persistent_congestion_leaves_two_datagrams() {
        let t0 = Instant::now();
        let mut p = Prague::new(40 * MTU, t0, MTU as u16);
        p.on_congestion_event(ms(t0, 50), ms(t0, 10), false, MTU);
        assert_eq!(p.window(), 20 * MTU);
        p.on_congestion_event(ms(t0, 51), ms(t0, 11), false, MTU);
        assert_eq!(p.window(), 20 * MTU, "a loss of the same round");
        p.on_congestion_event(ms(t0, 120), ms(t0, 60), false, MTU);
        assert_eq!(p.window(), 10 * MTU);
        p.on_congestion_event(ms(t0, 300), ms(t0, 200), true, MTU);
        assert_eq!(p.window(), 2 * MTU);
    }

    #[test]
    fn the_cut_never_goes_below_two_datagrams() {
        let t0 = Instant::now();
        let mut p = Prague::new(3 * MTU, t0, MTU as u16);
        for i in 0..10u64 {
            frame(&mut p, ms(t0, 100 * i + 50), ms(t0, 100 * i + 10), 1, true);
        }
        assert_eq!(p.window(), 2 * MTU);
    }
}
