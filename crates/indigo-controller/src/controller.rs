//! Indigo as a quinn-proto congestion controller: every [`DECISION_INTERVAL`] the policy reads
//! the state vector and applies one action to the congestion window; nothing else moves it
//! (Indigo does not react to loss by itself: the policy sees the delay and the rates).
//!
//! The same controller runs in real time (the `indigo` scheme's quinn program) and in
//! simulated time (simulated runs, training rollouts), as quinn-proto hands it the instants
//! either way. For
//! training, a [`Teacher`] can stand in for the policy at some decisions (DAgger's mixture)
//! and a [`Recorder`] keeps every decision with the oracle's label.

use std::any::Any;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quinn_proto::congestion::{Controller, ControllerFactory};
use quinn_proto::RttEstimator;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::frozen::{argmax, Frozen, Memory};
use crate::state::{Action, Observer, State};

/// Time between two decisions (Indigo's 10 ms).
pub const DECISION_INTERVAL: Duration = Duration::from_millis(10);

/// The window before the first decision, packets (Indigo's initial window).
pub const INITIAL_CWND: f64 = 10.0;

/// Bytes a full packet takes on the emulated link: 1436 bytes of QUIC datagram + UDP + IPv4
/// headers inside the tunnel, + the tunnel's 36 (`sim::frame`): what a trace's delivery
/// opportunity of 1500 bytes carries.
pub const WIRE_BYTES: f64 = 1500.0;

/// The oracle's window for a constant link: the bandwidth-delay product per flow, in packets
/// of [`WIRE_BYTES`]. `rate_mbps`: the bottleneck's rate, Mbit/s; `rtt_ms`: the path's
/// round-trip time without queueing, ms; `flows`: flows sharing it (≥ 1).
pub fn bdp_packets(rate_mbps: f64, rtt_ms: f64, flows: u32) -> f64 {
    rate_mbps * 1e6 / 8.0 * rtt_ms / 1e3 / WIRE_BYTES / f64::from(flows.max(1))
}

/// One decision, as a rollout records it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Decision {
    /// When, ns since the controller was built.
    pub t_ns: u64,
    /// The state the decision was made from.
    pub state: State,
    /// The action applied.
    pub taken: Action,
    /// The oracle's action for that state ([`Action::toward`] the teacher's ideal window), if
    /// a teacher was given.
    pub oracle: Option<Action>,
}

/// Where a rollout's decisions go: one list per connection built by the factory.
pub type Recorder = Arc<Mutex<Vec<Vec<Decision>>>>;

/// The oracle during training: the ideal window, and how often to follow it instead of the
/// policy (DAgger's β: 1 on the first iteration, then ½, ¼, …: `pantheon-indigo`'s
/// `dagger::beta`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Teacher {
    /// The ideal window, packets.
    pub ideal_cwnd: f64,
    /// Probability (0–1) that a decision follows the oracle.
    pub beta: f64,
    /// Seed of the mixture's draws.
    pub seed: u64,
}

/// Builds Indigo controllers for quinn-proto's `TransportConfig::congestion_controller_factory`.
#[derive(Debug, Clone)]
pub struct IndigoFactory {
    /// The policy ([`Frozen`]: a model file's, or a network being trained, frozen); `None`: the teacher decides alone (it
    /// must then be given).
    pub policy: Option<Arc<Frozen>>,
    /// The oracle, for training rollouts.
    pub teacher: Option<Teacher>,
    /// Where decisions are recorded, for training rollouts.
    pub recorder: Option<Recorder>,
}

impl IndigoFactory {
    /// The scheme's factory: the policy decides, nothing is recorded.
    pub fn new(policy: Arc<Frozen>) -> IndigoFactory {
        IndigoFactory {
            policy: Some(policy),
            teacher: None,
            recorder: None,
        }
    }
}

impl ControllerFactory for IndigoFactory {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Indigo {
            origin: now,
            mtu: current_mtu,
            core: Core::new(self),
        })
    }
}

/// The controller's logic, sans-IO: times in ns since the connection's start, the window in
/// packets. The controller quinn-proto is given (`Indigo`, built by [`IndigoFactory`]) is a
/// thin face of it.
#[derive(Clone)]
pub struct Core {
    observer: Observer,
    /// The window, packets.
    cwnd: f64,
    next_decision_ns: u64,
    previous: Action,
    /// The LSTM's state between decisions.
    memory: Memory,
    rng: SmallRng,
    /// This connection's list in the recorder.
    slot: Option<usize>,
    factory: Arc<IndigoFactory>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("cwnd", &self.cwnd)
            .field("previous", &self.previous)
            .finish_non_exhaustive()
    }
}

impl Core {
    /// A connection's controller, from its factory (a new list in its recorder, if any).
    pub fn new(factory: Arc<IndigoFactory>) -> Core {
        let slot = factory.recorder.as_ref().map(|r| {
            let mut all = r.lock().expect("the recorder's lock");
            all.push(Vec::new());
            all.len() - 1
        });
        Core {
            observer: Observer::default(),
            cwnd: INITIAL_CWND,
            next_decision_ns: DECISION_INTERVAL.as_nanos() as u64,
            previous: Action::Keep,
            memory: Memory::default(),
            rng: SmallRng::seed_from_u64(factory.teacher.map_or(0, |t| t.seed)),
            slot,
            factory,
        }
    }

    /// The congestion window, packets.
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// A packet of `bytes` sent at `now_ns`.
    pub fn on_sent(&mut self, now_ns: u64, bytes: u64) {
        self.observer.on_sent(now_ns, bytes);
    }

    /// A packet of `bytes` sent at `sent_ns` acknowledged at `now_ns`.
    pub fn on_ack(&mut self, now_ns: u64, sent_ns: u64, bytes: u64) {
        self.observer.on_ack(now_ns, sent_ns, bytes);
    }

    /// The end of an ACK's processing at `now_ns`: a decision if one is due.
    pub fn on_end_acks(&mut self, now_ns: u64) {
        if now_ns >= self.next_decision_ns {
            self.decide(now_ns);
            self.next_decision_ns = now_ns + DECISION_INTERVAL.as_nanos() as u64;
        }
    }

    fn decide(&mut self, now_ns: u64) {
        let state = self.observer.state(self.cwnd, self.previous);
        let oracle = self
            .factory
            .teacher
            .map(|t| Action::toward(self.cwnd, t.ideal_cwnd));
        let mut taken = Action::Keep;
        // The policy decides (and its state moves on) at every decision, followed or not.
        if let Some(policy) = &self.factory.policy {
            taken = argmax(&policy.step(&state.features(), &mut self.memory));
        }
        if let (Some(t), Some(o)) = (self.factory.teacher, oracle) {
            if self.factory.policy.is_none() || self.rng.random::<f64>() < t.beta {
                taken = o;
            }
        }
        if let (Some(recorder), Some(slot)) = (&self.factory.recorder, self.slot) {
            recorder.lock().expect("the recorder's lock")[slot].push(Decision {
                t_ns: now_ns,
                state,
                taken,
                oracle,
            });
        }
        self.cwnd = taken.apply(self.cwnd);
        self.previous = taken;
    }
}

/// quinn-proto's controller around a [`Core`]: its instants as ns since the connection's
/// start, its window in bytes (packets × the current MTU).
#[derive(Clone)]
struct Indigo {
    origin: Instant,
    mtu: u16,
    core: Core,
}

impl Indigo {
    fn ns(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }
}

impl Controller for Indigo {
    fn on_sent(&mut self, now: Instant, bytes: u64, _last_packet_number: u64) {
        let t = self.ns(now);
        self.core.on_sent(t, bytes);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        _app_limited: bool,
        _rtt: &RttEstimator,
    ) {
        let (now_ns, sent_ns) = (self.ns(now), self.ns(sent));
        self.core.on_ack(now_ns, sent_ns, bytes);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        _in_flight: u64,
        _app_limited: bool,
        _largest_packet_num_acked: Option<u64>,
    ) {
        let t = self.ns(now);
        self.core.on_end_acks(t);
    }

    fn on_congestion_event(
        &mut self,
        _now: Instant,
        _sent: Instant,
        _is_persistent_congestion: bool,
        _lost_bytes: u64,
    ) {
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.mtu = new_mtu;
    }

    fn window(&self) -> u64 {
        (self.core.cwnd * f64::from(self.mtu)) as u64
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        (INITIAL_CWND * f64::from(self.mtu)) as u64
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oracle_window_of_a_constant_link_is_its_bdp() {
        // 12 Mbit/s × 100 ms = 150 000 bytes = 100 packets of 1500 bytes.
        assert!((bdp_packets(12.0, 100.0, 1) - 100.0).abs() < 1e-9);
        // Two flows: half each.
        assert!((bdp_packets(12.0, 100.0, 2) - 50.0).abs() < 1e-9);
        // The paper's fastest synthetic link: 200 Mbit/s × 160 ms.
        assert!((bdp_packets(200.0, 160.0, 1) - 2666.67).abs() < 0.01);
    }

    /// Drives a controller by hand: one packet sent and acknowledged per ms over a 20 ms RTT.
    fn drive(factory: IndigoFactory, ms: u64) -> Core {
        let mut c = Core::new(Arc::new(factory));
        const MS: u64 = 1_000_000;
        for i in 0..ms {
            c.on_sent(i * MS, 1436);
            if i >= 20 {
                c.on_ack(i * MS, (i - 20) * MS, 1436);
                c.on_end_acks(i * MS);
            }
        }
        c
    }

    #[test]
    fn a_teacher_alone_walks_the_window_to_its_ideal_and_every_decision_is_recorded() {
        let recorder = Recorder::default();
        let factory = IndigoFactory {
            policy: None,
            teacher: Some(Teacher {
                ideal_cwnd: 100.0,
                beta: 1.0,
                seed: 1,
            }),
            recorder: Some(recorder.clone()),
        };
        let c = drive(factory, 500);
        // 10 → 20 (+10 and ×2 tie: the gentler) → 40 → 80 → 90 → 100 → 110, then kept (the
        // band is 110–130).
        assert_eq!(c.cwnd(), 110.0);
        let all = recorder.lock().unwrap();
        assert_eq!(all.len(), 1);
        let d = &all[0];
        // A decision per 10 ms from the first ACK at 20 ms to 499 ms: 48 of them.
        assert!((47..=49).contains(&d.len()), "{} decisions", d.len());
        let taken: Vec<Action> = d.iter().map(|x| x.taken).take(6).collect();
        use Action::*;
        assert_eq!(taken, [Plus10, Double, Double, Plus10, Plus10, Plus10]);
        assert!(d.iter().all(|x| x.oracle == Some(x.taken)));
        assert_eq!(d[3].state.cwnd, 80.0);
        assert_eq!(d[3].state.previous, Double);
        assert!(d.windows(2).all(|w| w[1].t_ns - w[0].t_ns >= 10_000_000));
    }

    #[test]
    fn a_policy_decides_alone_and_its_window_stays_in_bounds() {
        let policy = Arc::new(crate::models::Trained::Indigo.frozen().unwrap());
        let c = drive(IndigoFactory::new(policy), 300);
        let w = c.cwnd();
        assert!(
            (crate::state::MIN_CWND..=crate::state::MAX_CWND).contains(&w),
            "{w}"
        );
    }
}
