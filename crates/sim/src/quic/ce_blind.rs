//! A controller that negotiates ECN and ignores its marks: quinn-proto's NewReno answering
//! losses only — the `quic_ce_blind` scheme, for issue 52's question of what an ECN-capable flow
//! that does not answer CE does to the others in a marking queue (RFC 3168 §18's "misbehaving"
//! sender; RFC 8311 and RFC 9331 ask AQMs to drop instead of marking when marks do not help).
//!
//! Its packets are ECT(0) like every quinn flow's, so a marking AQM marks them instead of
//! dropping; quinn-proto reports a CE increase as a congestion event with no lost bytes, and this
//! controller passes every event on to NewReno except those.

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

use quinn_proto::congestion::{Controller, ControllerFactory, ControllerMetrics, NewRenoConfig};
use quinn_proto::RttEstimator;

/// The factory of [`CeBlind`] controllers: NewReno with its default configuration inside.
#[derive(Debug, Default)]
pub struct CeBlindConfig(Arc<NewRenoConfig>);

impl ControllerFactory for CeBlindConfig {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(CeBlind(Arc::clone(&self.0).build(now, current_mtu)))
    }
}

/// NewReno that does not hear CE marks.
pub struct CeBlind(Box<dyn Controller>);

impl std::fmt::Debug for CeBlind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CeBlind")
            .field("window", &self.0.window())
            .finish()
    }
}

/// Whether a congestion event is an ECN one: quinn-proto reports CE with no lost bytes and
/// never as persistent congestion (`Connection::process_ecn`).
pub fn is_ce(is_persistent_congestion: bool, lost_bytes: u64) -> bool {
    lost_bytes == 0 && !is_persistent_congestion
}

impl Controller for CeBlind {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        self.0.on_sent(now, bytes, last_packet_number);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.0.on_ack(now, sent, bytes, app_limited, rtt);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest_packet_num_acked: Option<u64>,
    ) {
        self.0
            .on_end_acks(now, in_flight, app_limited, largest_packet_num_acked);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        if !is_ce(is_persistent_congestion, lost_bytes) {
            self.0
                .on_congestion_event(now, sent, is_persistent_congestion, lost_bytes);
        }
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.0.on_mtu_update(new_mtu);
    }

    fn window(&self) -> u64 {
        self.0.window()
    }

    fn metrics(&self) -> ControllerMetrics {
        self.0.metrics()
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(CeBlind(self.0.clone_box()))
    }

    fn initial_window(&self) -> u64 {
        self.0.initial_window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ce_event_leaves_the_window_and_a_loss_halves_it() {
        let t0 = Instant::now();
        let later = t0 + std::time::Duration::from_millis(50);
        let mut c = Arc::new(CeBlindConfig::default()).build(t0, 1200);
        let w = c.window();
        c.on_congestion_event(later, t0 + std::time::Duration::from_millis(1), false, 0);
        assert_eq!(c.window(), w, "CE ignored");
        c.on_congestion_event(later, t0 + std::time::Duration::from_millis(1), false, 1200);
        assert_eq!(c.window(), w / 2, "a loss answered as NewReno does");
    }
}
