//! Chromium's QUIC of 2017 — proto-quic at 77961f1 (2017-05-23), the `third_party/proto-quic`
//! of Pantheon's commit 5ea146a that seed 001 names — as far as it shapes a bulk flow: the
//! limits (initial and maximum congestion window, packet size, the client's flow-control
//! windows) and the congestion controller itself, `TcpCubicSenderBytes` with `CubicBytes` and
//! `HybridSlowStart`, ported line by line. Every item names its source file under `src/net/`.
//!
//! # What Chromium's Cubic does that quinn's does not
//!
//! - **Two emulated connections** (`kDefaultNumConnections` = 2): a loss cuts the window to
//!   0.85 of itself, not 0.7, and the Reno-friendly estimate grows by α ≈ 0.97 packets per
//!   window acknowledged.
//! - **Hybrid slow start** (HyStart's delay test): slow start ends as soon as the smallest of the
//!   first 8 RTT samples of a round exceeds the connection's minimum RTT by min_rtt/8 (between
//!   4 and 16 ms), once the window is at least 16 packets. Over an infinite queue this is what
//!   stops the first doubling long before any loss.
//! - **Cubic growth in whole packets, at most every 30 ms**, measured from the epoch plus the
//!   minimum RTT, and never more than half the bytes acknowledged since the last update.
//! - **A ceiling** of 2 000 packets (`kDefaultMaxCongestionWindowPackets`), and no growth while
//!   the window is not used (`IsCwndLimited`).
//!
//! The port keeps Chromium's integer and `float` arithmetic (its unit tests' exact figures hold
//! here, see the tests) and the flags as the toy `quic_server` ran them: none of the connection
//! options that would turn on the convex-mode, quantization, β-last-max or per-ack fixes was
//! sent by the toy `quic_client`.
//!
//! # Where quinn's callbacks differ from Chromium's
//!
//! Chromium hands its sender one congestion event per ACK frame (its RTT sample, then the lost
//! packets, then the acknowledged ones). quinn calls [`Controller::on_ack`] per acknowledged
//! packet, then [`Controller::on_end_acks`], then (after loss detection)
//! [`Controller::on_congestion_event`] once per batch of losses. [`TcpCubicSenderBytes`]
//! therefore collects a frame's acknowledgements and runs Chromium's event at `on_end_acks`:
//! the HyStart test on the frame's RTT sample, then each acknowledgement with the bytes in
//! flight before the frame. Losses of that frame come after its acknowledgements, not before; a
//! recovery is bounded by send times instead of packet numbers (equivalent: a packet sent
//! before the cut is one numbered before it). Left out: PRR during recovery (quinn sends when
//! the bytes in flight fall below the window) and Chromium's pacing rates (2× the window per
//! RTT in slow start, 1.25× after; quinn's pacer uses 1.25× throughout).

use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn_proto::congestion::{Controller, ControllerFactory, ControllerMetrics};
use quinn_proto::RttEstimator;

/// `kDefaultTCPMSS`, bytes: the unit of Chromium's congestion windows
/// (quic/core/quic_constants.h).
pub const MSS: u64 = 1460;
/// `kInitialCongestionWindow`, packets (quic/core/quic_constants.h).
pub const INITIAL_WINDOW_PACKETS: u64 = 32;
/// `kDefaultMaxCongestionWindowPackets`, packets: Cubic's window never grows beyond it
/// (quic/core/congestion_control/send_algorithm_interface.cc passes it to
/// `TcpCubicSenderBytes`, which stops increasing there).
pub const MAX_WINDOW_PACKETS: u64 = 2000;
/// The client's stream flow-control receive window, bytes: `kStreamMaxRecvWindowSize`, "the
/// same values that Chrome uses", set by `QuicClientBase::Initialize`
/// (tools/quic/quic_client_base.cc). A client does not auto-tune it (quic/core/
/// quic_session.cc: auto-tuning only on the server's side).
pub const STREAM_WINDOW: u32 = 6 << 20;
/// The client's connection (session) flow-control receive window, bytes:
/// `kSessionMaxRecvWindowSize` (tools/quic/quic_client_base.cc).
pub const CONNECTION_WINDOW: u32 = 15 << 20;
/// The QUIC packet size, bytes: the client's `kDefaultMaxPacketSize` (quic/core/
/// quic_constants.h), which the server adopts from the client's first packet (quic/core/
/// quic_connection.cc, `ProcessValidatedPacket`); no path-MTU probing without a
/// connection option the toy client and server do not set.
pub const UDP_PAYLOAD: u16 = 1350;

/// `kDefaultNumConnections`: the number of Reno connections one Cubic flow emulates
/// (congestion_control/cubic_bytes.cc, tcp_cubic_sender_base.cc).
const NUM_CONNECTIONS: u32 = 2;
/// `kBeta`: one connection's window multiplier after a loss (cubic_bytes.cc).
const BETA: f32 = 0.7;
/// `kBetaLastMax`: the extra backoff of the remembered maximum when a loss comes before the
/// window got back to it (cubic_bytes.cc; not scaled to N connections without the `BLMX`
/// connection option).
const BETA_LAST_MAX: f32 = 0.85;
/// `kCubeScale`: time is in 1/1024 s, and 1024³ · 1024 scales the cube (cubic_bytes.cc).
const CUBE_SCALE: u32 = 40;
/// `kCubeCongestionWindowScale`: Cubic's C = 410/1024 ≈ 0.4 packets per s³ (cubic_bytes.cc).
const CUBE_CONGESTION_WINDOW_SCALE: i128 = 410;
/// `kCubeFactor`, 1/(C · MSS) in Chromium's fixed point (cubic_bytes.cc).
const CUBE_FACTOR: u64 = (1 << CUBE_SCALE) / CUBE_CONGESTION_WINDOW_SCALE as u64 / MSS;
/// `MaxCubicTimeInterval()`: Cubic's target is recomputed at most this often while the
/// window is unchanged (cubic_bytes.h).
const MAX_CUBIC_TIME_INTERVAL: Duration = Duration::from_millis(30);
/// `kMaxBurstBytes`: a window with no more than this free still counts as used
/// (tcp_cubic_sender_base.cc).
const MAX_BURST_BYTES: u64 = 3 * MSS;
/// `kDefaultMinimumCongestionWindow`, bytes (tcp_cubic_sender_bytes.cc).
const MIN_WINDOW: u64 = 2 * MSS;

/// `kHybridStartLowWindow`, packets: HyStart never ends slow start below it
/// (hybrid_slow_start.cc).
const HYSTART_LOW_WINDOW: u64 = 16;
/// `kHybridStartMinSamples`: RTT samples per round that HyStart looks at.
const HYSTART_MIN_SAMPLES: u32 = 8;
/// `kHybridStartDelayFactorExp`: the threshold is min_rtt / 2³.
const HYSTART_DELAY_FACTOR_EXP: u32 = 3;
/// `kHybridStartDelayMinThresholdUs`, µs.
const HYSTART_MIN_THRESHOLD_US: i64 = 4000;
/// `kHybridStartDelayMaxThresholdUs`, µs.
const HYSTART_MAX_THRESHOLD_US: i64 = 16000;

/// Chromium's `CubicBytes` (congestion_control/cubic_bytes.cc): the window after a loss, and
/// the window Cubic and its Reno-friendly estimate reach after an acknowledgement. Windows are
/// bytes; times are the caller's clock.
#[derive(Debug, Clone, Default)]
pub struct CubicBytes {
    /// Start of the current growth epoch (`epoch_`); `None` after a loss or an
    /// application-limited period.
    epoch: Option<Instant>,
    /// `last_update_time_`.
    last_update_time: Option<Instant>,
    /// `last_congestion_window_`.
    last_congestion_window: u64,
    /// `last_max_congestion_window_`: the window Cubic grows back towards.
    last_max_congestion_window: u64,
    /// `acked_bytes_count_`, since the last update.
    acked_bytes_count: u64,
    /// `estimated_tcp_congestion_window_`: the Reno-friendly window.
    estimated_tcp_congestion_window: u64,
    /// `origin_point_congestion_window_`.
    origin_point_congestion_window: u64,
    /// `time_to_origin_point_`, 1/1024 s.
    time_to_origin_point: u32,
    /// `last_target_congestion_window_`.
    last_target_congestion_window: u64,
}

impl CubicBytes {
    /// `Beta()`: the window multiplier after a loss, (N − 1 + 0.7)/N = 0.85.
    fn beta() -> f32 {
        (NUM_CONNECTIONS as f32 - 1.0 + BETA) / NUM_CONNECTIONS as f32
    }

    /// `Alpha()`: the Reno-friendly growth, packets per window acknowledged,
    /// 3N²(1 − β)/(1 + β) ≈ 0.973.
    fn alpha() -> f32 {
        let beta = Self::beta();
        (3 * NUM_CONNECTIONS * NUM_CONNECTIONS) as f32 * (1.0 - beta) / (1.0 + beta)
    }

    /// The window Cubic grows back towards after its last loss, bytes (0 before any).
    pub fn last_max_congestion_window(&self) -> u64 {
        self.last_max_congestion_window
    }

    /// `ResetCubicState()` (after a retransmission timeout).
    pub fn reset(&mut self) {
        *self = CubicBytes::default();
    }

    /// `OnApplicationLimited()`: the window was not used, so the epoch restarts with the next
    /// acknowledgement and growth pauses meanwhile.
    pub fn on_application_limited(&mut self) {
        self.epoch = None;
    }

    /// `CongestionWindowAfterPacketLoss()`: the window after a loss cuts `cwnd` (bytes).
    pub fn congestion_window_after_packet_loss(&mut self, cwnd: u64) -> u64 {
        if cwnd < self.last_max_congestion_window {
            // The old maximum was never reached again: another flow competes; leave it room.
            self.last_max_congestion_window = (BETA_LAST_MAX * cwnd as f32) as i32 as u64;
        } else {
            self.last_max_congestion_window = cwnd;
        }
        self.epoch = None;
        (cwnd as f32 * Self::beta()) as i32 as u64
    }

    /// `CongestionWindowAfterAck()`: the window after `acked` bytes are acknowledged at `now`,
    /// the window being `cwnd` bytes and the connection's minimum RTT `delay_min`.
    pub fn congestion_window_after_ack(
        &mut self,
        acked: u64,
        cwnd: u64,
        delay_min: Duration,
        now: Instant,
    ) -> u64 {
        self.acked_bytes_count += acked;
        let recent = self
            .last_update_time
            .is_some_and(|t| now.saturating_duration_since(t) <= MAX_CUBIC_TIME_INTERVAL);
        if self.last_congestion_window == cwnd && recent {
            return self
                .last_target_congestion_window
                .max(self.estimated_tcp_congestion_window);
        }
        self.last_congestion_window = cwnd;
        self.last_update_time = Some(now);
        let epoch = *self.epoch.get_or_insert_with(|| {
            // The first acknowledgement after a loss.
            self.acked_bytes_count = acked;
            self.estimated_tcp_congestion_window = cwnd;
            if self.last_max_congestion_window <= cwnd {
                self.time_to_origin_point = 0;
                self.origin_point_congestion_window = cwnd;
            } else {
                let below = CUBE_FACTOR * (self.last_max_congestion_window - cwnd);
                self.time_to_origin_point = (below as f64).cbrt() as u32;
                self.origin_point_congestion_window = self.last_max_congestion_window;
            }
            now
        });
        // Time since the epoch plus one minimum RTT, in 1/1024 s.
        let since = (now + delay_min).saturating_duration_since(epoch);
        let elapsed = ((since.as_micros() as i64) << 10) / 1_000_000;
        let offset = i64::from(self.time_to_origin_point) - elapsed;
        // Chromium shifts the signed cube (arithmetic shift) before multiplying by the MSS:
        // whole packets only, and one more below zero.
        let offset = i128::from(offset);
        let delta = ((CUBE_CONGESTION_WINDOW_SCALE * offset * offset * offset) >> CUBE_SCALE)
            * i128::from(MSS);
        let target = i128::from(self.origin_point_congestion_window) - delta;
        // Unsigned in Chromium: a negative target wraps to a huge one.
        let target = u64::try_from(target).unwrap_or(u64::MAX);
        // At most half the bytes acknowledged since the last update.
        let target = target.min(cwnd + self.acked_bytes_count / 2);
        // The Reno-friendly window grows by α MSS per window acknowledged (in `float`, as
        // Chromium computes it).
        let estimated = self.estimated_tcp_congestion_window as f32;
        let growth = self.acked_bytes_count as f32 * (Self::alpha() * MSS as f32) / estimated;
        self.estimated_tcp_congestion_window = (estimated + growth) as u64;
        self.acked_bytes_count = 0;
        self.last_target_congestion_window = target;
        target.max(self.estimated_tcp_congestion_window)
    }
}

/// Chromium's `HybridSlowStart` (congestion_control/hybrid_slow_start.cc), its delay test: a
/// round is the packets acknowledged until the last one sent when the round started.
#[derive(Debug, Clone, Default)]
pub struct HybridSlowStart {
    /// `started_`: a round is being measured.
    started: bool,
    /// `hystart_found_ != NOT_FOUND`: the delay increase was seen.
    found: bool,
    /// `last_sent_packet_number_`.
    last_sent_packet: u64,
    /// `end_packet_number_`: the round ends when this packet is acknowledged.
    end_packet: u64,
    /// `rtt_sample_count_`, this round.
    rtt_sample_count: u32,
    /// `current_min_rtt_`: the smallest of this round's first samples.
    current_min_rtt: Option<Duration>,
}

impl HybridSlowStart {
    /// `OnPacketSent()`.
    pub fn on_packet_sent(&mut self, packet: u64) {
        self.last_sent_packet = packet;
    }

    /// `OnPacketAcked()`: the round ends with the acknowledgement of its last packet.
    pub fn on_packet_acked(&mut self, packet: u64) {
        if self.is_end_of_round(packet) {
            self.started = false;
        }
    }

    /// `Restart()` (after a retransmission timeout).
    pub fn restart(&mut self) {
        self.started = false;
        self.found = false;
    }

    /// `StartReceiveRound()`: a round that ends with `last_sent`.
    pub fn start_receive_round(&mut self, last_sent: u64) {
        self.end_packet = last_sent;
        self.current_min_rtt = None;
        self.rtt_sample_count = 0;
        self.started = true;
    }

    /// `IsEndOfRound()`.
    pub fn is_end_of_round(&self, ack: u64) -> bool {
        self.end_packet <= ack
    }

    /// `ShouldExitSlowStart()`: whether slow start ends, given the latest RTT sample, the
    /// connection's minimum RTT and the window in packets.
    pub fn should_exit_slow_start(
        &mut self,
        latest_rtt: Duration,
        min_rtt: Duration,
        window_packets: u64,
    ) -> bool {
        if !self.started {
            self.start_receive_round(self.last_sent_packet);
        }
        if self.found {
            return true;
        }
        self.rtt_sample_count += 1;
        if self.rtt_sample_count <= HYSTART_MIN_SAMPLES
            && self.current_min_rtt.is_none_or(|m| m > latest_rtt)
        {
            self.current_min_rtt = Some(latest_rtt);
        }
        if self.rtt_sample_count == HYSTART_MIN_SAMPLES {
            let threshold_us = ((min_rtt.as_micros() as i64) >> HYSTART_DELAY_FACTOR_EXP)
                .clamp(HYSTART_MIN_THRESHOLD_US, HYSTART_MAX_THRESHOLD_US);
            let threshold = Duration::from_micros(threshold_us as u64);
            if self
                .current_min_rtt
                .is_some_and(|m| m > min_rtt + threshold)
            {
                self.found = true;
            }
        }
        window_packets >= HYSTART_LOW_WINDOW && self.found
    }
}

/// The factory of [`TcpCubicSenderBytes`], as quinn's transport settings take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Initial congestion window, packets of [`MSS`] bytes ([`INITIAL_WINDOW_PACKETS`]).
    pub initial_window_packets: u64,
    /// The window's ceiling, packets of [`MSS`] bytes ([`MAX_WINDOW_PACKETS`]).
    pub max_window_packets: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            initial_window_packets: INITIAL_WINDOW_PACKETS,
            max_window_packets: MAX_WINDOW_PACKETS,
        }
    }
}

impl ControllerFactory for Config {
    fn build(self: Arc<Self>, _now: Instant, _current_mtu: u16) -> Box<dyn Controller> {
        Box::new(TcpCubicSenderBytes::new(*self))
    }
}

/// Chromium's `TcpCubicSenderBytes` with `TcpCubicSenderBase` (Cubic, not Reno), as a quinn
/// congestion controller: see the module's documentation for how its events map onto quinn's.
#[derive(Debug, Clone)]
pub struct TcpCubicSenderBytes {
    cubic: CubicBytes,
    hystart: HybridSlowStart,
    /// `congestion_window_`, bytes.
    congestion_window: u64,
    /// `max_congestion_window_`, bytes.
    max_congestion_window: u64,
    /// `slowstart_threshold_`, bytes: slow start while the window is below it.
    slowstart_threshold: u64,
    /// `initial_tcp_congestion_window_`, bytes.
    initial_window: u64,
    /// When the window was last cut (`largest_sent_at_last_cutback_`): a loss of a packet sent
    /// before then belongs to the event that cut it (a packet sent at that instant was sent
    /// after the cut); `None` before any cut and after a timeout.
    last_cutback: Option<Instant>,
    /// Send time of the latest-sent packet acknowledged so far (`largest_acked_packet_number_`).
    largest_acked_sent: Option<Instant>,
    /// The largest packet number acknowledged so far: a frame that raises it carries an RTT
    /// sample (`rtt_updated`).
    largest_acked_packet: Option<u64>,
    /// The connection's minimum RTT (`RttStats::min_rtt()`).
    min_rtt: Option<Duration>,
    /// The acknowledgements of the ACK frame being processed: (send time, bytes) each.
    frame_acks: Vec<(Instant, u64)>,
}

impl TcpCubicSenderBytes {
    /// A sender at the start of a connection.
    pub fn new(config: Config) -> Self {
        let max = config.max_window_packets * MSS;
        TcpCubicSenderBytes {
            cubic: CubicBytes::default(),
            hystart: HybridSlowStart::default(),
            congestion_window: config.initial_window_packets * MSS,
            max_congestion_window: max,
            slowstart_threshold: max,
            initial_window: config.initial_window_packets * MSS,
            last_cutback: None,
            largest_acked_sent: None,
            largest_acked_packet: None,
            min_rtt: None,
            frame_acks: Vec::new(),
        }
    }

    /// The slow-start threshold, bytes.
    pub fn slowstart_threshold(&self) -> u64 {
        self.slowstart_threshold
    }

    /// `InSlowStart()`.
    pub fn in_slow_start(&self) -> bool {
        self.congestion_window < self.slowstart_threshold
    }

    /// `InRecovery()`: the packets acknowledged so far were all sent before the last cut.
    fn in_recovery(&self) -> bool {
        matches!((self.largest_acked_sent, self.last_cutback), (Some(a), Some(c)) if a < c)
    }

    /// `IsCwndLimited()`: whether `bytes_in_flight` used the window (so that it may grow).
    fn is_cwnd_limited(&self, bytes_in_flight: u64) -> bool {
        let cwnd = self.congestion_window;
        if bytes_in_flight >= cwnd {
            return true;
        }
        let slow_start_limited = self.in_slow_start() && bytes_in_flight > cwnd / 2;
        slow_start_limited || cwnd - bytes_in_flight <= MAX_BURST_BYTES
    }

    /// `MaybeIncreaseCwnd()`: one packet of `acked` bytes acknowledged.
    fn maybe_increase_cwnd(&mut self, acked: u64, prior_in_flight: u64, now: Instant) {
        if !self.is_cwnd_limited(prior_in_flight) {
            self.cubic.on_application_limited();
            return;
        }
        if self.congestion_window >= self.max_congestion_window {
            return;
        }
        if self.in_slow_start() {
            // One MSS per packet acknowledged, whatever its size.
            self.congestion_window += MSS;
            return;
        }
        let min_rtt = self.min_rtt.unwrap_or(Duration::ZERO);
        let cubic =
            self.cubic
                .congestion_window_after_ack(acked, self.congestion_window, min_rtt, now);
        self.congestion_window = cubic.min(self.max_congestion_window);
    }

    /// `OnPacketLost()` for a loss event whose latest lost packet was sent at `sent`.
    fn on_packet_lost(&mut self, now: Instant, sent: Instant) {
        if self.last_cutback.is_some_and(|c| sent < c) {
            return; // part of the loss event that already cut the window
        }
        self.congestion_window = self
            .cubic
            .congestion_window_after_packet_loss(self.congestion_window)
            .max(MIN_WINDOW);
        self.slowstart_threshold = self.congestion_window;
        self.last_cutback = Some(now);
    }

    /// One packet of an ACK frame acknowledged: sent at `sent`, `bytes` long. The frame's
    /// event runs at [`Controller::on_end_acks`] (quinn's `on_ack` comes here).
    pub fn on_packet_acked(&mut self, sent: Instant, bytes: u64) {
        self.frame_acks.push((sent, bytes));
    }

    /// `OnRetransmissionTimeout(true)`: back to the minimum window and to slow start.
    fn on_retransmission_timeout(&mut self) {
        self.last_cutback = None;
        self.hystart.restart();
        self.cubic.reset();
        self.slowstart_threshold = self.congestion_window / 2;
        self.congestion_window = MIN_WINDOW;
    }
}

impl Controller for TcpCubicSenderBytes {
    fn on_sent(&mut self, _now: Instant, _bytes: u64, last_packet_number: u64) {
        self.hystart.on_packet_sent(last_packet_number);
    }

    fn on_ack(
        &mut self,
        _now: Instant,
        sent: Instant,
        bytes: u64,
        _app_limited: bool,
        _rtt: &RttEstimator,
    ) {
        self.on_packet_acked(sent, bytes);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        _app_limited: bool,
        largest_packet_num_acked: Option<u64>,
    ) {
        let acks = std::mem::take(&mut self.frame_acks);
        let Some(newest_sent) = acks.iter().map(|&(sent, _)| sent).max() else {
            return;
        };
        let prior_in_flight = in_flight + acks.iter().map(|&(_, bytes)| bytes).sum::<u64>();
        // The frame's RTT sample: its largest packet, if newly acknowledged.
        let new_largest = largest_packet_num_acked > self.largest_acked_packet;
        self.largest_acked_packet = self.largest_acked_packet.max(largest_packet_num_acked);
        if new_largest {
            let latest = now.saturating_duration_since(newest_sent);
            let min_rtt = *self
                .min_rtt
                .insert(self.min_rtt.map_or(latest, |m| m.min(latest)));
            let window_packets = self.congestion_window / MSS;
            if self.in_slow_start()
                && self
                    .hystart
                    .should_exit_slow_start(latest, min_rtt, window_packets)
            {
                self.slowstart_threshold = self.congestion_window;
            }
        }
        for &(sent, bytes) in &acks {
            self.largest_acked_sent = self.largest_acked_sent.max(Some(sent));
            if self.in_recovery() {
                continue;
            }
            self.maybe_increase_cwnd(bytes, prior_in_flight, now);
            if let (true, Some(largest)) = (self.in_slow_start(), largest_packet_num_acked) {
                self.hystart.on_packet_acked(largest);
            }
        }
        self.frame_acks = acks;
        self.frame_acks.clear();
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        _lost_bytes: u64,
    ) {
        if is_persistent_congestion {
            self.on_retransmission_timeout();
        } else {
            self.on_packet_lost(now, sent);
        }
    }

    fn on_mtu_update(&mut self, _new_mtu: u16) {
        // Chromium's windows count MSS-sized units whatever the packet size.
    }

    fn window(&self) -> u64 {
        self.congestion_window
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut m = ControllerMetrics::default();
        m.congestion_window = self.congestion_window;
        m.ssthresh = Some(self.slowstart_threshold);
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
    //! Chromium's own unit tests at 77961f1 (cubic_bytes_test.cc, hybrid_slow_start_test.cc),
    //! in the configuration the toy server ran (no convex-mode, quantization, β-last-max or
    //! per-ack fix), with their exact figures.
    use super::*;

    const HUNDRED_MS: Duration = Duration::from_millis(100);

    /// `kNConnectionAlpha` of the tests.
    fn alpha() -> f32 {
        CubicBytes::alpha()
    }

    /// `ConservativeCwndInBytes()`.
    fn conservative(cwnd: u64) -> u64 {
        cwnd + MSS / 2
    }

    fn near(a: u64, b: u64, tolerance: u64) -> bool {
        a.abs_diff(b) <= tolerance
    }

    /// `TEST_P(CubicBytesTest, AboveOrigin)` without the convex-mode fix: Reno-friendly
    /// growth of one MSS per 100 ms for 48 RTTs, then Cubic's 0.4 t³: 423 packets after 10.1 s.
    #[test]
    fn above_origin_as_chromium_s_test() {
        let mut clock = Instant::now();
        let mut cubic = CubicBytes::default();
        let rtt_min = HUNDRED_MS;
        let mut cwnd = 10 * MSS;
        let mut expected = conservative(cwnd);
        clock += Duration::from_millis(1);
        assert_eq!(
            cubic.congestion_window_after_ack(MSS, cwnd, rtt_min, clock),
            expected
        );
        cwnd = expected;
        let initial = expected;
        for _ in 0..48 {
            let mut n = 1u64;
            while (n as f32) < (cwnd / MSS) as f32 / alpha() {
                let next = cubic.congestion_window_after_ack(MSS, cwnd, rtt_min, clock);
                assert!(near(cwnd, next, MSS), "{cwnd} vs {next}");
                n += 1;
            }
            clock += HUNDRED_MS;
            cwnd = cubic.congestion_window_after_ack(MSS, cwnd, rtt_min, clock);
            assert!(near(expected, cwnd, MSS), "{expected} vs {cwnd}");
            expected += MSS;
        }
        for _ in 0..52 {
            for _ in 1..cwnd / MSS {
                let next = cubic.congestion_window_after_ack(MSS, cwnd, rtt_min, clock);
                assert!(near(cwnd, next, MSS), "{cwnd} vs {next}");
            }
            clock += HUNDRED_MS;
            cwnd = cubic.congestion_window_after_ack(MSS, cwnd, rtt_min, clock);
        }
        let elapsed_s: f32 = 10.0 + 0.1;
        let expected =
            (initial / MSS) as f32 + (elapsed_s * elapsed_s * elapsed_s * 410.0) / 1024.0;
        // "Without the convex mode fix, the result is off by one."
        assert_eq!(cwnd / MSS, expected as u64 + 1);
        assert_eq!(cwnd / MSS, 423);
    }

    /// `TEST_P(CubicBytesTest, LossEvents)` without the β-last-max fix.
    #[test]
    fn loss_events_as_chromium_s_test() {
        let mut clock = Instant::now();
        let mut cubic = CubicBytes::default();
        let mut cwnd = 422 * MSS;
        clock += Duration::from_millis(1);
        let first = cubic.congestion_window_after_ack(MSS, cwnd, HUNDRED_MS, clock);
        assert_eq!(first, cwnd + MSS / 2);
        // The first loss remembers the window before it.
        let pre_loss = cwnd;
        assert_eq!(cubic.last_max_congestion_window(), 0);
        let expected = (cwnd as f32 * CubicBytes::beta()) as u64;
        assert_eq!(cubic.congestion_window_after_packet_loss(cwnd), expected);
        assert_eq!(cubic.last_max_congestion_window(), pre_loss);
        cwnd = expected;
        // A second loss before the window got back: the maximum backs off by 0.85 too.
        let pre_loss = cwnd;
        let expected = (cwnd as f32 * CubicBytes::beta()) as u64;
        assert_eq!(cubic.congestion_window_after_packet_loss(cwnd), expected);
        cwnd = expected;
        assert!(pre_loss > cubic.last_max_congestion_window());
        assert_eq!(
            cubic.last_max_congestion_window(),
            (pre_loss as f32 * BETA_LAST_MAX) as u64
        );
        assert_eq!(cwnd, cubic.last_max_congestion_window());
        cwnd = cubic.congestion_window_after_ack(MSS, cwnd, HUNDRED_MS, clock);
        assert!(cubic.last_max_congestion_window() <= cwnd);
        // A loss just below the old maximum.
        cwnd = cubic.last_max_congestion_window() - 1;
        let pre_loss = cwnd;
        let expected = (cwnd as f32 * CubicBytes::beta()) as u64;
        assert_eq!(cubic.congestion_window_after_packet_loss(cwnd), expected);
        assert_eq!(
            cubic.last_max_congestion_window(),
            (pre_loss as f32 * BETA_LAST_MAX) as u64
        );
    }

    /// `TEST_F(HybridSlowStartTest, Delay)`: at a 60 ms RTT the increase is seen at +7.5 ms,
    /// from the eighth sample of a round on.
    #[test]
    fn hystart_delay_as_chromium_s_test() {
        let rtt = Duration::from_millis(60);
        let ms = Duration::from_millis;
        let mut h = HybridSlowStart::default();
        let mut end_packet = 1;
        h.start_receive_round(end_packet);
        end_packet += 1;
        for n in 0..8 {
            assert!(!h.should_exit_slow_start(rtt + ms(n), rtt, 100));
        }
        h.start_receive_round(end_packet);
        for n in 1..8 {
            assert!(!h.should_exit_slow_start(rtt + ms(n + 10), rtt, 100));
        }
        assert!(h.should_exit_slow_start(rtt + ms(10), rtt, 100));
    }

    /// A sender fed one ACK frame per packet: slow start grows one MSS per packet
    /// acknowledged; a round whose RTT rose by more than min_rtt/8 ends it; a loss cuts to
    /// 0.85 and the rest of that loss event is ignored.
    #[test]
    fn sender_leaves_slow_start_on_delay_and_cuts_once_per_loss_event() {
        let t0 = Instant::now();
        let mut s = TcpCubicSenderBytes::new(Config::default());
        assert_eq!(s.window(), 32 * MSS);
        let mut pn = 0u64;
        let mut now = t0;
        // A round: a window of packets sent at once, each acknowledged after `delay_ms`.
        let mut ack_round = |s: &mut TcpCubicSenderBytes, now: &mut Instant, delay_ms: u64| {
            let first = pn;
            let n = s.window() / MSS;
            let sent_at = *now;
            for _ in 0..n {
                pn += 1;
                s.on_sent(sent_at, 1350, pn);
            }
            *now = sent_at + Duration::from_millis(delay_ms);
            for p in first + 1..=pn {
                // The sender keeps its window full.
                s.on_packet_acked(sent_at, 1350);
                s.on_end_acks(*now, s.window(), false, Some(p));
            }
        };
        ack_round(&mut s, &mut now, 50);
        assert_eq!(s.window(), 64 * MSS);
        assert!(s.in_slow_start());
        ack_round(&mut s, &mut now, 50);
        assert_eq!(s.window(), 128 * MSS);
        // The queue grew: 50 → 60 ms (threshold 50/8 = 6.25 ms).
        ack_round(&mut s, &mut now, 60);
        assert!(!s.in_slow_start(), "window {}", s.window() / MSS);
        let w = s.window();
        assert!((128 * MSS..140 * MSS).contains(&w), "{}", w / MSS);
        // A loss event: cut once to 0.85 of the window.
        let sent_before = now - Duration::from_millis(10);
        s.on_congestion_event(now, sent_before, false, 1350);
        let cut = (w as f32 * 0.85) as u64;
        assert_eq!(s.window(), cut);
        s.on_congestion_event(now + Duration::from_millis(5), sent_before, false, 1350);
        assert_eq!(
            s.window(),
            cut,
            "a packet sent before the cut is the same event"
        );
        s.on_congestion_event(
            now + Duration::from_millis(9),
            now + Duration::from_millis(1),
            false,
            1350,
        );
        assert_eq!(
            s.window(),
            (cut as f32 * 0.85) as u64,
            "a packet sent after it is a new one"
        );
    }

    #[test]
    fn the_window_stops_at_its_ceiling() {
        let t0 = Instant::now();
        let mut s = TcpCubicSenderBytes::new(Config {
            initial_window_packets: 32,
            max_window_packets: 40,
        });
        for pn in 1..=100u64 {
            s.on_sent(t0, 1460, pn);
            s.on_packet_acked(t0, 1460);
            s.on_end_acks(t0 + HUNDRED_MS, s.window(), false, Some(pn));
        }
        assert_eq!(s.window(), 40 * MSS);
    }

    #[test]
    fn an_unused_window_does_not_grow() {
        let t0 = Instant::now();
        let mut s = TcpCubicSenderBytes::new(Config::default());
        s.on_sent(t0, 1350, 1);
        s.on_packet_acked(t0, 1350);
        s.on_end_acks(t0 + HUNDRED_MS, 0, false, Some(1));
        assert_eq!(s.window(), 32 * MSS);
    }
}
