//! The stages a packet crosses in one direction of an emulated path, each a sans-IO state
//! machine on a nanosecond clock that the caller advances:
//!
//! - [`LinkStage`]: `mm-link`'s trace-driven bottleneck with its queue;
//! - [`DelayStage`]: `mm-delay`'s fixed one-way delay;
//! - [`LossStage`]: `mm-loss`'s i.i.d. Bernoulli loss;
//! - [`SwitchStage`], for `mm-onoff` and `mm-intermittent`;
//! - beyond Mahimahi: [`PolicerStage`] (a token-bucket policer) and [`AggregateStage`]
//!   (packets released in bursts, e.g. ACK aggregation); [`LinkStage::poisson`] replaces the
//!   trace's schedule by memoryless opportunities at the trace's mean rate;
//!   [`FlowDelayStage`] delays chosen flows only (competing flows of different RTTs).
//!
//! Every stage receives packets with the (virtual) time at which they reach it, in
//! non-decreasing order, and hands packets on with the time at which they leave it, so a chain
//! of stages computes exact departure times whatever the I/O shell's wake-up latency.

use std::collections::VecDeque;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::cross::{is_cross, CrossSource, CrossTraffic};
use crate::queue::{PacketQueue, QueueSpec, TUN_HEADER};
use crate::reactive::{CrossFlows, RenoFlows};
use crate::schedule::Schedule;
use crate::trace::Trace;
use crate::Packet;

pub use crate::queue::MS;
/// Bytes one delivery opportunity carries (1500-byte IP packet + 4-byte TUN header).
pub const OPPORTUNITY_BYTES: usize = 1504;

/// One event of an `mm-link` direction, as its `--uplink-log`/`--downlink-log` records it
/// (`mahimahi.md` §2.4). Times are ns on the emulator's clock; sizes include the 4-byte header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEvent {
    /// `T + LEN`: a packet arrived at the link's queue.
    Arrival {
        /// Arrival time, ns.
        t: u64,
        /// Size, bytes.
        bytes: u64,
    },
    /// `T d NPKTS NBYTES`: the queue dropped packets when one arrived.
    Drop {
        /// Time, ns.
        t: u64,
        /// Packets dropped.
        packets: u64,
        /// Their bytes.
        bytes: u64,
    },
    /// `T # 1504`: a delivery opportunity (logged whether used or not).
    Opportunity {
        /// Scheduled time, ns (a whole ms).
        t: u64,
    },
    /// `T - LEN DELAY`: a packet left in the opportunity at `t`.
    Departure {
        /// Scheduled time of the opportunity that carried its last byte, ns.
        t: u64,
        /// Size, bytes.
        bytes: u64,
        /// When it arrived, ns.
        arrival: u64,
    },
    /// `T c+ LEN` (ours): a cross-traffic packet arrived at the queue ([`crate::cross`]).
    CrossArrival {
        /// Arrival time, ns.
        t: u64,
        /// Size, bytes.
        bytes: u64,
    },
    /// `T cd NPKTS NBYTES` (ours): the queue refused an arriving cross-traffic packet.
    /// (Packets a drop-head queue or CoDel drops to make room are `d`, whoever sent them.)
    CrossDrop {
        /// Time, ns.
        t: u64,
        /// Packets dropped.
        packets: u64,
        /// Their bytes.
        bytes: u64,
    },
    /// `T c- LEN DELAY` (ours): a cross-traffic packet left the link, and the emulator.
    CrossDeparture {
        /// Scheduled time of the opportunity that carried its last byte, ns.
        t: u64,
        /// Size, bytes.
        bytes: u64,
        /// When it arrived, ns.
        arrival: u64,
    },
    /// `T m LEN` (ours; ECN): the packet whose departure was just logged (`T - LEN DELAY`)
    /// left carrying Congestion Experienced — marked by this link's queue (or, in a chain of
    /// links, an earlier one).
    Marked {
        /// Its departure time, ns.
        t: u64,
        /// Size, bytes.
        bytes: u64,
    },
}

/// `mm-link`: delivery opportunities from a trace serve the queue byte by byte.
///
/// Semantics (Mahimahi `link_queue.cc`, `mahimahi.md` §2.4): opportunity *i* of period *k* is
/// at `k·period + trace[i]` ms after the link's start and carries 1504 bytes. Packets share and
/// span opportunities (a packet departs in the opportunity that carries its last byte, at that
/// opportunity's scheduled time); the unused rest of an opportunity is lost, never banked. A
/// packet can only use an opportunity scheduled strictly after its arrival millisecond, i.e. an
/// opportunity at T serves packets whose arrival time is < T. With `--once` the link serves
/// one pass over the trace and is then [finished](LinkStage::finished).
///
/// With [cross traffic](LinkStage::cross), the link's own source adds packets to the queue at
/// their times; they are served like the others and discarded when they leave. With
/// [reactive cross flows](LinkStage::cross_flows), Reno senders modelled in the link do the
/// same and learn of their packets' departures and losses.
#[derive(Debug)]
pub struct LinkStage {
    trace: Vec<u64>,
    period_ms: u64,
    /// Index of the next opportunity in `trace` and the start (ms) of its period.
    index: usize,
    period_base_ms: u64,
    queue: PacketQueue,
    /// The packet being transmitted: its bytes still to send and its arrival time.
    in_transit: Option<(Packet, usize, u64)>,
    out: VecDeque<(u64, Packet)>,
    /// `--once`: stop after one pass over the trace.
    once: bool,
    finished: bool,
    /// Events not yet taken, when logging.
    log: Option<Vec<LinkEvent>>,
    /// Poisson or even delivery instead of the trace's schedule.
    poisson: Option<Box<RateSchedule>>,
    /// Non-reactive cross traffic sharing the queue, and its arrivals the queue refused.
    cross: Option<Box<CrossSource>>,
    cross_refused: u64,
    /// Reactive cross traffic: loss-based flows sharing the queue.
    flows: Option<Box<RenoFlows>>,
}

/// Opportunities at the trace's mean rate, at ns resolution: a Poisson process's (exponential
/// gaps, `rng`) or evenly spaced ones (`rng` = `None`: every gap the mean, the fractions of a
/// ns carried so that no time drifts).
#[derive(Debug)]
struct RateSchedule {
    rng: Option<SmallRng>,
    mean_gap_ns: f64,
    /// The fraction of a ns the even gaps have not yet used.
    carry: f64,
    /// Time of the next opportunity, ns.
    next: u64,
}

impl RateSchedule {
    fn gap(&mut self) -> u64 {
        match &mut self.rng {
            Some(rng) => {
                // Exponential by inversion; 1 − u ∈ (0, 1].
                let u: f64 = rng.random();
                (-self.mean_gap_ns * (1.0 - u).ln()).round() as u64
            }
            None => {
                self.carry += self.mean_gap_ns;
                let whole = self.carry.floor();
                self.carry -= whole;
                whole as u64
            }
        }
    }
}

impl LinkStage {
    /// A link starting at time 0 with `trace` and a queue per `spec`; `seed` seeds PIE.
    pub fn new(trace: &Trace, spec: QueueSpec, seed: u64) -> LinkStage {
        LinkStage {
            trace: trace.opportunities_ms.clone(),
            period_ms: trace.period_ms(),
            index: 0,
            period_base_ms: 0,
            queue: PacketQueue::new(spec, seed),
            in_transit: None,
            out: VecDeque::new(),
            once: false,
            finished: false,
            log: None,
            poisson: None,
            cross: None,
            cross_refused: 0,
            flows: None,
        }
    }

    /// Non-reactive cross traffic ([`crate::cross`]) from the link's start: its packets join
    /// the queue at their times, take opportunities like any packet, and leave the link
    /// without being handed on. Nothing for a series of zeros.
    pub fn cross(mut self, traffic: &CrossTraffic) -> LinkStage {
        let source = CrossSource::new(traffic);
        self.cross = source.next_arrival().is_some().then(|| Box::new(source));
        self
    }

    /// Reactive cross traffic ([`crate::reactive`]): `spec`'s Reno flows send into the queue
    /// from their start, as their windows allow; their packets are cross traffic.
    pub fn cross_flows(mut self, spec: &CrossFlows) -> LinkStage {
        self.flows = Some(Box::new(RenoFlows::new(spec)));
        self
    }

    /// The reactive cross flows' state (their windows and reductions), if the link has them.
    pub fn reactive(&self) -> Option<&RenoFlows> {
        self.flows.as_deref()
    }

    /// Poisson delivery (beyond Mahimahi): opportunities form a Poisson process whose rate is
    /// the trace's mean (opportunities per period), so gaps are exponential with mean
    /// period ÷ opportunities, at ns resolution — the memoryless link of the paper's
    /// calibrated cellular emulators, without a trace's repetition. `--once` ends after as many
    /// opportunities as one pass of the trace has. `seed` seeds the gaps.
    pub fn poisson(self, seed: u64) -> LinkStage {
        self.at_mean_rate(Some(SmallRng::seed_from_u64(seed ^ 0x5EED_0FD3_117E_5700)))
    }

    /// Even delivery (beyond Mahimahi): the trace's mean rate with every gap equal (period ÷
    /// opportunities, ns resolution) — a link that serialises packets at a constant rate, as a
    /// wire does, where a Mahimahi trace delivers whole milliseconds' opportunities at once (at
    /// 50 Mbit/s, four or five packets each ms). An AQM whose threshold is about a millisecond
    /// (DualPI2's 1 ms step) sees the queue a real link would. `--once` as for
    /// [`LinkStage::poisson`].
    pub fn even(self) -> LinkStage {
        self.at_mean_rate(None)
    }

    fn at_mean_rate(mut self, rng: Option<SmallRng>) -> LinkStage {
        let mean_gap_ns = (self.period_ms * MS) as f64 / self.trace.len() as f64;
        let mut schedule = RateSchedule {
            rng,
            mean_gap_ns,
            carry: 0.0,
            next: 0,
        };
        schedule.next = schedule.gap();
        self.poisson = Some(Box::new(schedule));
        self
    }

    /// `--once`: one pass over the trace, no wrap.
    pub fn once(mut self, once: bool) -> LinkStage {
        self.once = once;
        self
    }

    /// Records [`LinkEvent`]s for [`LinkStage::take_events`].
    pub fn logged(mut self) -> LinkStage {
        self.log = Some(Vec::new());
        self
    }

    /// Moves the events recorded so far into `into` (nothing unless [`LinkStage::logged`]).
    pub fn take_events(&mut self, into: &mut Vec<LinkEvent>) {
        if let Some(log) = &mut self.log {
            into.append(log);
        }
    }

    fn record(&mut self, event: LinkEvent) {
        if let Some(log) = &mut self.log {
            log.push(event);
        }
    }

    /// True once a `--once` link has used its last opportunity.
    pub fn finished(&self) -> bool {
        self.finished
    }

    fn next_opportunity(&self) -> Option<u64> {
        (!self.finished).then(|| match &self.poisson {
            Some(p) => p.next,
            None => (self.period_base_ms + self.trace[self.index]) * MS,
        })
    }

    fn step_opportunity(&mut self) {
        if let Some(p) = &mut self.poisson {
            p.next += p.gap();
        }
        self.index += 1;
        if self.index == self.trace.len() {
            if self.once {
                self.finished = true;
            }
            self.index = 0;
            self.period_base_ms += self.period_ms;
        }
    }

    /// Serves one opportunity at `t`.
    fn serve(&mut self, t: u64) {
        let mut budget = OPPORTUNITY_BYTES;
        while budget > 0 {
            if self.in_transit.is_none() {
                match self.queue.head_arrival() {
                    Some(arrival) if arrival < t => {
                        // DualPI2 may drop, at dequeue, every packet it held.
                        let Some((arrival, pkt)) = self.queue.dequeue(t) else {
                            break;
                        };
                        let left = pkt.len() + TUN_HEADER;
                        self.in_transit = Some((pkt, left, arrival));
                    }
                    _ => break, // the rest of this opportunity is wasted
                }
            }
            let (_, left, _) = self.in_transit.as_mut().expect("set above");
            let n = budget.min(*left);
            *left -= n;
            budget -= n;
            if *left == 0 {
                let (pkt, _, arrival) = self.in_transit.take().expect("set above");
                let bytes = (pkt.len() + TUN_HEADER) as u64;
                if is_cross(&pkt) {
                    self.record(LinkEvent::CrossDeparture { t, bytes, arrival });
                    if let Some(flows) = &mut self.flows {
                        flows.departed(t, &pkt);
                    }
                } else {
                    self.record(LinkEvent::Departure { t, bytes, arrival });
                    if crate::ecn::codepoint(&pkt) == Some(crate::ecn::Codepoint::Ce) {
                        self.record(LinkEvent::Marked { t, bytes });
                    }
                    self.out.push_back((t, pkt));
                }
            }
        }
    }
}

impl LinkStage {
    /// Hands the link a packet arriving at `t` (ns; non-decreasing across calls).
    pub fn push(&mut self, t: u64, pkt: Packet) {
        self.advance(t);
        self.enqueue(t, pkt);
    }

    fn enqueue(&mut self, t: u64, pkt: Packet) {
        let (bytes, cross) = ((pkt.len() + TUN_HEADER) as u64, is_cross(&pkt));
        self.record(match cross {
            true => LinkEvent::CrossArrival { t, bytes },
            false => LinkEvent::Arrival { t, bytes },
        });
        let dropped = self.queue.enqueue(t, pkt);
        if dropped.packets > 0 {
            let (packets, bytes) = (dropped.packets, dropped.bytes);
            // A refused cross arrival is the cross traffic's loss; what a drop-head queue
            // pushes out to make room is logged as `d`.
            if cross && !self.queue.drops_head() {
                self.cross_refused += packets;
                self.record(LinkEvent::CrossDrop { t, packets, bytes });
            } else {
                self.record(LinkEvent::Drop { t, packets, bytes });
            }
        }
    }

    /// Serves every opportunity scheduled at or before `now`, and queues the cross traffic
    /// due by then, each at its time (an opportunity at T serves only packets that arrived
    /// before T, so at equal times the opportunity goes first, then the rate source, then the
    /// reactive flows).
    pub fn advance(&mut self, now: u64) {
        loop {
            let live = !self.finished;
            let rate = self.cross.as_ref().and_then(|c| c.next_arrival());
            let flows = self.flows.as_ref().and_then(|f| f.next_event());
            let next = [
                self.next_opportunity().map(|t| (t, 0)),
                rate.filter(|_| live).map(|t| (t, 1)),
                flows.filter(|_| live).map(|t| (t, 2)),
            ]
            .into_iter()
            .flatten()
            .filter(|(t, _)| *t <= now)
            .min();
            match next {
                None => break,
                Some((t, 0)) => {
                    self.step_opportunity();
                    self.record(LinkEvent::Opportunity { t });
                    if self.in_transit.is_some() || !self.queue.is_empty() {
                        self.serve(t);
                    }
                }
                Some((_, 1)) => {
                    let (t, pkt) = self.cross.as_mut().and_then(|c| c.take()).expect("due");
                    self.enqueue(t, pkt);
                }
                Some(_) => {
                    if let Some((t, pkt)) = self.flows.as_mut().and_then(|f| f.fire()) {
                        self.enqueue(t, pkt);
                    }
                }
            }
        }
    }

    /// Takes the next departed packet (departure time ≤ the last `advance`).
    pub fn pop_due(&mut self, now: u64) -> Option<(u64, Packet)> {
        self.advance(now);
        self.out.pop_front()
    }

    /// Next time the link needs advancing: the next opportunity if something waits for it
    /// or if opportunities are being logged, `Some(0)` if a departed packet waits.
    pub fn next_wakeup(&self) -> Option<u64> {
        if !self.out.is_empty() {
            return Some(0);
        }
        if self.in_transit.is_none() && self.queue.is_empty() && !self.once {
            return None;
        }
        self.next_opportunity()
    }

    /// Packets queued, in transit or departed but not taken; cross traffic is not counted
    /// (it never leaves for an end host, so a drained path need not wait for it).
    pub fn held(&self) -> usize {
        let in_transit = self.in_transit.as_ref().is_some_and(|(p, ..)| !is_cross(p));
        self.queue.len() - self.queue.cross_len() + usize::from(in_transit) + self.out.len()
    }

    /// Packets the queue discipline dropped, but for cross-traffic arrivals it refused.
    pub fn dropped(&self) -> u64 {
        self.queue.dropped() - self.cross_refused
    }
}

/// Packets held until release times that never decrease (so the head leaves first).
#[derive(Debug, Default)]
struct ReleaseQueue(VecDeque<(u64, Packet)>);

impl ReleaseQueue {
    fn push(&mut self, release: u64, pkt: Packet) {
        self.0.push_back((release, pkt));
    }
    fn pop_due(&mut self, now: u64) -> Option<(u64, Packet)> {
        match self.0.front() {
            Some((t, _)) if *t <= now => self.0.pop_front(),
            _ => None,
        }
    }
    fn next_release(&self) -> Option<u64> {
        self.0.front().map(|(t, _)| *t)
    }
}

/// The packets a stage let through (at the time they reached it) and how many it dropped:
/// the state of every stage that only passes or drops (loss, on/off, policer).
#[derive(Debug, Default)]
struct Passed {
    out: VecDeque<(u64, Packet)>,
    dropped: u64,
}

impl Passed {
    fn admit(&mut self, pass: bool, t: u64, pkt: Packet) {
        if pass {
            self.out.push_back((t, pkt));
        } else {
            self.dropped += 1;
        }
    }
}

/// `mm-delay D`: every packet leaves exactly `delay` after it arrived, in order; with a
/// schedule (`pt-delay-schedule`, [`crate::schedule`]), the delay in force when it arrived,
/// still in order (a packet never leaves before the one ahead of it).
#[derive(Debug)]
pub struct DelayStage {
    /// The delay, ns, by arrival time.
    delay: Schedule,
    fifo: ReleaseQueue,
    /// Release time of the last packet pushed.
    last_release: u64,
}

impl DelayStage {
    /// A delay of `delay_ns` nanoseconds.
    pub fn new(delay_ns: u64) -> DelayStage {
        DelayStage::with_ns(Schedule::constant(delay_ns as f64))
    }

    /// A delay that follows `schedule` (values: one-way delay, ms; times on the stage's clock).
    pub fn scheduled(schedule: &Schedule) -> DelayStage {
        DelayStage::with_ns(schedule.scaled(MS as f64))
    }

    fn with_ns(delay: Schedule) -> DelayStage {
        DelayStage {
            delay,
            fifo: ReleaseQueue::default(),
            last_release: 0,
        }
    }
}

impl DelayStage {
    /// Hands the stage a packet arriving at `t`; it will leave at `t + delay(t)`, or with the
    /// packet before it if that one leaves later.
    pub fn push(&mut self, t: u64, pkt: Packet) {
        let release = (t + self.delay.at(t).round() as u64).max(self.last_release);
        self.last_release = release;
        self.fifo.push(release, pkt);
    }
    /// Takes the head packet if its release time is ≤ `now`.
    pub fn pop_due(&mut self, now: u64) -> Option<(u64, Packet)> {
        self.fifo.pop_due(now)
    }
    /// Release time of the head packet.
    pub fn next_wakeup(&self) -> Option<u64> {
        self.fifo.next_release()
    }
}

/// The UDP port of a flow's tunnel and the extra one-way delay its packets get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowDelay {
    /// A UDP port: packets from or to it belong to the flow (its tunnel server's port).
    pub udp_port: u16,
    /// Extra one-way delay, ns.
    pub delay_ns: u64,
}

/// Per-flow extra delay (beyond Mahimahi, for RTT fairness): an IPv4/UDP packet whose source or
/// destination port is a [`FlowDelay`]'s leaves `delay_ns` after it arrived; every other
/// packet leaves at once. Packets of one delay keep their order; packets of different delays
/// overtake each other as on paths of different lengths.
#[derive(Debug)]
pub struct FlowDelayStage {
    flows: Vec<FlowDelay>,
    /// One release queue per distinct delay (index: position in `delays`), plus index
    /// `delays.len()` for the packets of no listed flow.
    delays: Vec<u64>,
    queues: Vec<ReleaseQueue>,
}

impl FlowDelayStage {
    /// A stage delaying each listed flow's packets by its delay.
    pub fn new(flows: &[FlowDelay]) -> FlowDelayStage {
        let mut delays: Vec<u64> = flows.iter().map(|f| f.delay_ns).collect();
        delays.sort_unstable();
        delays.dedup();
        let queues = (0..=delays.len())
            .map(|_| ReleaseQueue::default())
            .collect();
        FlowDelayStage {
            flows: flows.to_vec(),
            delays,
            queues,
        }
    }

    /// The UDP ports of an IPv4 packet (source, destination); `None` for anything else.
    fn udp_ports(pkt: &[u8]) -> Option<(u16, u16)> {
        let (&vihl, rest) = pkt.split_first()?;
        let ihl = usize::from(vihl & 0x0f) * 4;
        if vihl >> 4 != 4 || rest.get(8) != Some(&17) || pkt.len() < ihl + 4 {
            return None;
        }
        let port = |i: usize| u16::from_be_bytes([pkt[i], pkt[i + 1]]);
        Some((port(ihl), port(ihl + 2)))
    }

    /// Hands the stage a packet arriving at `t`.
    pub fn push(&mut self, t: u64, pkt: Packet) {
        let delay = FlowDelayStage::udp_ports(&pkt).and_then(|(src, dst)| {
            self.flows
                .iter()
                .find(|f| f.udp_port == src || f.udp_port == dst)
        });
        let (queue, release) = match delay {
            Some(f) => (
                self.delays.binary_search(&f.delay_ns).unwrap_or(0),
                t + f.delay_ns,
            ),
            None => (self.delays.len(), t),
        };
        self.queues[queue].push(release, pkt);
    }

    /// The queue whose head leaves first.
    fn first(&self) -> Option<usize> {
        (0..self.queues.len())
            .filter_map(|i| self.queues[i].next_release().map(|t| (t, i)))
            .min()
            .map(|(_, i)| i)
    }

    /// Takes the packet that leaves first if its release time is ≤ `now`.
    pub fn pop_due(&mut self, now: u64) -> Option<(u64, Packet)> {
        let i = self.first()?;
        self.queues[i].pop_due(now)
    }

    /// The earliest release time of a held packet.
    pub fn next_wakeup(&self) -> Option<u64> {
        self.first().and_then(|i| self.queues[i].next_release())
    }

    fn held(&self) -> usize {
        self.queues.iter().map(|q| q.0.len()).sum()
    }
}

/// `mm-loss uplink|downlink RATE`: each packet is dropped independently with probability `rate`;
/// with a schedule (`pt-loss-schedule`, [`crate::schedule`]), the rate in force when it arrived.
#[derive(Debug)]
pub struct LossStage {
    rate: Schedule,
    rng: SmallRng,
    passed: Passed,
}

impl LossStage {
    /// Loss with probability `rate` ∈ [0, 1], from a generator seeded with `seed`.
    pub fn new(rate: f64, seed: u64) -> LossStage {
        LossStage::scheduled(&Schedule::constant(rate), seed)
    }

    /// Loss with the probability `schedule` gives at each packet's arrival.
    pub fn scheduled(schedule: &Schedule, seed: u64) -> LossStage {
        LossStage {
            rate: schedule.clone(),
            rng: SmallRng::seed_from_u64(seed),
            passed: Passed::default(),
        }
    }
}

impl LossStage {
    /// Drops the packet with probability `rate(t)`, else passes it on unchanged at `t`.
    pub fn push(&mut self, t: u64, pkt: Packet) {
        let lost = self.rng.random::<f64>() < self.rate.at(t);
        self.passed.admit(!lost, t, pkt);
    }
    /// Packets dropped so far.
    pub fn dropped(&self) -> u64 {
        self.passed.dropped
    }

    /// Takes the next surviving packet.
    pub fn pop_due(&mut self, _now: u64) -> Option<(u64, Packet)> {
        self.passed.out.pop_front()
    }
}

/// `mm-onoff` and `mm-intermittent`: the link alternates between on and off; packets that
/// arrive while it is off are dropped (not queued).
///
/// As Mahimahi's switching links, it starts off with a switch due at once, so it is on from
/// time 0. Durations are in whole ms: `mm-onoff` draws each from an exponential distribution
/// with the given mean (truncated to ms, capped at 2³⁰ ms), `mm-intermittent` uses the means
/// themselves.
#[derive(Debug)]
pub struct SwitchStage {
    on: bool,
    next_switch: u64,
    mean_on_ms: f64,
    mean_off_ms: f64,
    random: bool,
    rng: SmallRng,
    passed: Passed,
}

/// Longest on or off period of `mm-onoff`, ms (Mahimahi's cap).
const MAX_SWITCH_MS: f64 = (1u64 << 30) as f64;

impl SwitchStage {
    /// On for `mean_on_s` and off for `mean_off_s` seconds (≥ 0, not both 0), exponentially
    /// distributed if `random` (`mm-onoff`), else periodic (`mm-intermittent`).
    pub fn new(mean_on_s: f64, mean_off_s: f64, random: bool, seed: u64) -> SwitchStage {
        SwitchStage {
            on: false,
            next_switch: 0,
            mean_on_ms: mean_on_s * 1000.0,
            mean_off_ms: mean_off_s * 1000.0,
            random,
            rng: SmallRng::seed_from_u64(seed),
            passed: Passed::default(),
        }
    }

    fn advance(&mut self, now: u64) {
        while self.next_switch <= now {
            self.on = !self.on;
            let mean = if self.on {
                self.mean_on_ms
            } else {
                self.mean_off_ms
            };
            let ms = if self.random {
                // Exponential by inversion; 1 − u ∈ (0, 1].
                let u: f64 = self.rng.random();
                (-mean * (1.0 - u).ln()).min(MAX_SWITCH_MS)
            } else {
                mean
            };
            self.next_switch += ms as u64 * MS;
        }
    }

    /// Passes the packet on at `t` if the link is on at `t`, else drops it.
    pub fn push(&mut self, t: u64, pkt: Packet) {
        self.advance(t);
        self.passed.admit(self.on, t, pkt);
    }

    /// Takes the next packet that got through.
    pub fn pop_due(&mut self, _now: u64) -> Option<(u64, Packet)> {
        self.passed.out.pop_front()
    }
}

/// A token-bucket policer (beyond Mahimahi): tokens accrue at `rate` up to `burst` bytes; a
/// packet passes at once if the bucket holds its IP length in tokens (which it then uses), and
/// is dropped otherwise. No queue, so no added delay: the behaviour of the policers that
/// Flach et al. found on many paths, which Pantheon approximated with a 1-packet DropTail queue.
/// The bucket starts full.
#[derive(Debug)]
pub struct PolicerStage {
    /// Bytes per ns.
    rate: f64,
    burst: f64,
    tokens: f64,
    last: u64,
    passed: Passed,
}

impl PolicerStage {
    /// A policer of `rate_mbps` Mbit/s (> 0) with a bucket of `burst_bytes` bytes (≥ one
    /// packet, or every packet is dropped).
    pub fn new(rate_mbps: f64, burst_bytes: u64) -> PolicerStage {
        PolicerStage {
            rate: rate_mbps * 1e6 / 8.0 / 1e9,
            burst: burst_bytes as f64,
            tokens: burst_bytes as f64,
            last: 0,
            passed: Passed::default(),
        }
    }

    /// Passes the packet on at `t` if the bucket has its length in tokens, else drops it.
    pub fn push(&mut self, t: u64, pkt: Packet) {
        self.tokens =
            (self.tokens + t.saturating_sub(self.last) as f64 * self.rate).min(self.burst);
        self.last = t;
        let len = pkt.len() as f64;
        let pass = self.tokens >= len;
        if pass {
            self.tokens -= len;
        }
        self.passed.admit(pass, t, pkt);
    }

    /// Takes the next packet that got through.
    pub fn pop_due(&mut self, _now: u64) -> Option<(u64, Packet)> {
        self.passed.out.pop_front()
    }
}

/// Burst release (beyond Mahimahi), e.g. ACK aggregation as on Wi-Fi and cellular links:
/// packets are held until the next multiple of `interval` since the emulator's start and then
/// leave together, in order. A packet arriving exactly on a multiple leaves at once.
#[derive(Debug)]
pub struct AggregateStage {
    interval: u64,
    fifo: ReleaseQueue,
}

impl AggregateStage {
    /// Releases every `interval_ns` nanoseconds (> 0).
    pub fn new(interval_ns: u64) -> AggregateStage {
        AggregateStage {
            interval: interval_ns.max(1),
            fifo: ReleaseQueue::default(),
        }
    }

    /// Holds the packet until the next release time at or after `t`.
    pub fn push(&mut self, t: u64, pkt: Packet) {
        self.fifo
            .push(t.div_ceil(self.interval) * self.interval, pkt);
    }

    /// Takes the head packet if its release time is ≤ `now`.
    pub fn pop_due(&mut self, now: u64) -> Option<(u64, Packet)> {
        self.fifo.pop_due(now)
    }
}

/// One of the stages, so a pipeline is a plain `Vec` (no dynamic dispatch on the hot path).
// A path has a handful of stages; the link, the busy one, stays inline rather than boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum AnyStage {
    /// mm-link.
    Link(LinkStage),
    /// mm-delay.
    Delay(DelayStage),
    /// mm-loss.
    Loss(LossStage),
    /// mm-onoff / mm-intermittent.
    Switch(SwitchStage),
    /// pt-policer.
    Policer(PolicerStage),
    /// pt-aggregate.
    Aggregate(AggregateStage),
    /// Per-flow extra delay (`--mix "cubic cubic+60"`).
    FlowDelay(FlowDelayStage),
}

impl AnyStage {
    fn push(&mut self, t: u64, pkt: Packet) {
        match self {
            AnyStage::Link(s) => s.push(t, pkt),
            AnyStage::Delay(s) => s.push(t, pkt),
            AnyStage::Loss(s) => s.push(t, pkt),
            AnyStage::Switch(s) => s.push(t, pkt),
            AnyStage::Policer(s) => s.push(t, pkt),
            AnyStage::Aggregate(s) => s.push(t, pkt),
            AnyStage::FlowDelay(s) => s.push(t, pkt),
        }
    }
    fn pop_due(&mut self, now: u64) -> Option<(u64, Packet)> {
        match self {
            AnyStage::Link(s) => s.pop_due(now),
            AnyStage::Delay(s) => s.pop_due(now),
            AnyStage::Loss(s) => s.pop_due(now),
            AnyStage::Switch(s) => s.pop_due(now),
            AnyStage::Policer(s) => s.pop_due(now),
            AnyStage::Aggregate(s) => s.pop_due(now),
            AnyStage::FlowDelay(s) => s.pop_due(now),
        }
    }
    /// The pass-or-drop state of a stage that has one.
    fn passed(&self) -> Option<&Passed> {
        match self {
            AnyStage::Loss(LossStage { passed, .. })
            | AnyStage::Switch(SwitchStage { passed, .. })
            | AnyStage::Policer(PolicerStage { passed, .. }) => Some(passed),
            AnyStage::Link(_)
            | AnyStage::Delay(_)
            | AnyStage::Aggregate(_)
            | AnyStage::FlowDelay(_) => None,
        }
    }
    /// The release queue of a stage that holds packets until a time.
    fn releases(&self) -> Option<&ReleaseQueue> {
        match self {
            AnyStage::Delay(DelayStage { fifo, .. })
            | AnyStage::Aggregate(AggregateStage { fifo, .. }) => Some(fifo),
            _ => None,
        }
    }
    fn next_wakeup(&self) -> Option<u64> {
        match self {
            AnyStage::Link(s) => s.next_wakeup(),
            AnyStage::FlowDelay(s) => s.next_wakeup(),
            s => match (s.releases(), s.passed()) {
                (Some(r), _) => r.next_release(),
                (_, Some(p)) => (!p.out.is_empty()).then_some(0),
                _ => None,
            },
        }
    }
    fn held(&self) -> usize {
        match self {
            AnyStage::Link(s) => s.held(),
            AnyStage::FlowDelay(s) => s.held(),
            s => s.releases().map_or(0, |r| r.0.len()) + s.passed().map_or(0, |p| p.out.len()),
        }
    }
    fn dropped(&self) -> u64 {
        match self {
            AnyStage::Link(s) => s.dropped(),
            s => s.passed().map_or(0, |p| p.dropped),
        }
    }
}

/// The stages of one direction, in the order packets cross them.
#[derive(Debug, Default)]
pub struct Pipeline {
    stages: Vec<AnyStage>,
    out: VecDeque<(u64, Packet)>,
    /// Mahimahi's integer-ms clock: every stage sees arrival times truncated to the ms.
    ms_clock: bool,
}

impl Pipeline {
    /// A pipeline of `stages`, first crossed first.
    pub fn new(stages: Vec<AnyStage>) -> Pipeline {
        Pipeline {
            stages,
            out: VecDeque::new(),
            ms_clock: false,
        }
    }

    /// `--ms-clock`: each stage sees packets arrive at the start of their millisecond, as on
    /// Mahimahi's integer-ms clock (so `mm-delay D` delays by (D−1, D] ms, not exactly D).
    pub fn with_ms_clock(mut self, on: bool) -> Pipeline {
        self.ms_clock = on;
        self
    }

    fn clock(&self, t: u64) -> u64 {
        if self.ms_clock {
            t / MS * MS
        } else {
            t
        }
    }

    /// A packet enters the path at `now`.
    pub fn push(&mut self, now: u64, pkt: Packet) {
        let now = self.clock(now);
        match self.stages.first_mut() {
            Some(s) => s.push(now, pkt),
            None => self.out.push_back((now, pkt)),
        }
    }

    /// Moves packets through the stages up to `now`; departures from the last stage become
    /// available from [`Pipeline::pop`].
    pub fn advance(&mut self, now: u64) {
        for i in 0..self.stages.len() {
            while let Some((t, pkt)) = self.stages[i].pop_due(now) {
                let t = self.clock(t);
                match self.stages.get_mut(i + 1) {
                    Some(next) => next.push(t, pkt),
                    None => self.out.push_back((t, pkt)),
                }
            }
        }
    }

    /// Next packet that left the path, with its departure time (≤ the last `advance` time).
    pub fn pop(&mut self) -> Option<(u64, Packet)> {
        self.out.pop_front()
    }

    /// Earliest time any stage needs [`Pipeline::advance`] again.
    pub fn next_wakeup(&self) -> Option<u64> {
        if !self.out.is_empty() {
            return Some(0);
        }
        self.stages.iter().filter_map(AnyStage::next_wakeup).min()
    }

    /// Packets inside the path.
    pub fn held(&self) -> usize {
        self.out.len() + self.stages.iter().map(AnyStage::held).sum::<usize>()
    }

    /// Packets dropped inside the path (queue drops and random loss).
    pub fn dropped(&self) -> u64 {
        self.stages.iter().map(AnyStage::dropped).sum()
    }

    /// The `i`-th stage in crossing order.
    pub fn stage_mut(&mut self, i: usize) -> Option<&mut AnyStage> {
        self.stages.get_mut(i)
    }

    /// True when a `--once` link in the path has used its last opportunity.
    pub fn finished(&self) -> bool {
        self.stages
            .iter()
            .any(|s| matches!(s, AnyStage::Link(l) if l.finished()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(len: usize) -> Packet {
        vec![0u8; len]
    }

    /// A 12 Mbit/s link (one 1500-byte packet per ms) with 6 Mbit/s of cross traffic (a packet
    /// at 2, 4, 6 … ms) carries a scheme's packets at 0.5, 2.5, 4.5 … ms behind the cross
    /// packet that arrived first: each waits one opportunity more. The cross packets are served,
    /// logged as such, never handed on, and not counted as held or dropped.
    #[test]
    fn cross_traffic_takes_opportunities_and_is_never_handed_on() {
        let trace = Trace::constant_rate(12.0).unwrap();
        let traffic = CrossTraffic::constant(6.0).unwrap();
        let mut link = LinkStage::new(&trace, QueueSpec::Infinite, 0)
            .cross(&traffic)
            .logged();
        let mut out = Vec::new();
        for i in 0..100u64 {
            let t = i * 2 * MS + MS / 2;
            link.push(t, vec![0x45; 1500]);
            out.extend(std::iter::from_fn(|| link.pop_due(t)));
        }
        out.extend(std::iter::from_fn(|| link.pop_due(202 * MS)));
        let times: Vec<u64> = out.iter().map(|(t, _)| t / MS).collect();
        let expected: Vec<u64> = (0..100)
            .map(|i| if i == 0 { 1 } else { 2 * i + 2 })
            .collect();
        assert_eq!(times, expected);
        assert!(out.iter().all(|(_, p)| p[0] == 0x45));
        let mut events = Vec::new();
        link.take_events(&mut events);
        let count = |f: fn(&LinkEvent) -> bool| events.iter().filter(|e| f(e)).count();
        assert_eq!(count(|e| matches!(e, LinkEvent::CrossArrival { .. })), 101);
        assert_eq!(
            count(|e| matches!(e, LinkEvent::CrossDeparture { .. })),
            100
        );
        assert_eq!(count(|e| matches!(e, LinkEvent::Departure { .. })), 100);
        assert!(events.iter().any(|e| matches!(
            e,
            LinkEvent::CrossDeparture { t, arrival, .. } if *t == 3 * MS && *arrival == 2 * MS
        )));
        // The cross packet of 202 ms waits in the queue; the path is drained all the same.
        assert_eq!(link.held(), 0);

        // A one-packet DropTail queue refuses cross arrivals as it would any: `cd`, not `d`,
        // and not in the link's drop count.
        let spec = QueueSpec::parse("droptail", "packets=1").unwrap();
        let busy = CrossTraffic::constant(36.0).unwrap();
        let mut link = LinkStage::new(&trace, spec, 0).cross(&busy).logged();
        link.advance(10 * MS);
        let mut events = Vec::new();
        link.take_events(&mut events);
        assert!(events
            .iter()
            .any(|e| matches!(e, LinkEvent::CrossDrop { .. })));
        assert!(!events.iter().any(|e| matches!(e, LinkEvent::Drop { .. })));
        assert_eq!(link.dropped(), 0);
    }

    /// A 28-byte IPv4/UDP header (and `payload` zero bytes) from `src` to `dst` port.
    fn udp(src: u16, dst: u16, payload: usize) -> Packet {
        let mut p = vec![0u8; 28 + payload];
        p[0] = 0x45;
        p[9] = 17;
        p[20..22].copy_from_slice(&src.to_be_bytes());
        p[22..24].copy_from_slice(&dst.to_be_bytes());
        p
    }

    #[test]
    fn flow_delay_delays_its_flows_by_port_either_way_and_nothing_else() {
        let mut s = FlowDelayStage::new(&[
            FlowDelay {
                udp_port: 50002,
                delay_ns: 60 * MS,
            },
            FlowDelay {
                udp_port: 50003,
                delay_ns: 10 * MS,
            },
        ]);
        s.push(0, udp(40000, 50002, 0)); // flow 2's data: +60 ms
        s.push(MS, udp(50002, 40000, 1)); // flow 2's ACK: +60 ms
        s.push(2 * MS, udp(40000, 50001, 2)); // flow 1: no extra delay
        s.push(3 * MS, udp(50003, 40000, 3)); // flow 3: +10 ms
        let mut tcp = udp(50002, 40000, 4);
        tcp[9] = 6; // not UDP: no port is read
        s.push(4 * MS, tcp);
        assert_eq!(s.held(), 5);
        assert_eq!(s.next_wakeup(), Some(2 * MS));
        let mut out = Vec::new();
        for now in (0..=70).map(|ms| ms * MS) {
            while let Some((t, p)) = s.pop_due(now) {
                out.push((t / MS, p.len() - 28));
            }
        }
        assert_eq!(out, [(2, 2), (4, 4), (13, 3), (60, 0), (61, 1)]);
        assert_eq!(s.next_wakeup(), None);
    }

    /// Runs `arrivals` (time ns, size) through `p`, stepping time like an event loop, and
    /// returns departure times.
    fn drive(p: &mut Pipeline, arrivals: &[(u64, usize)], until: u64) -> Vec<(u64, usize)> {
        let mut out = Vec::new();
        let mut pending = arrivals.iter().peekable();
        let mut now = 0;
        while now <= until {
            while let Some(&&(t, len)) = pending.peek() {
                if t > now {
                    break;
                }
                p.push(t, pkt(len));
                pending.next();
            }
            p.advance(now);
            while let Some((t, pk)) = p.pop() {
                out.push((t, pk.len()));
            }
            let next_arrival = pending.peek().map(|a| a.0);
            let next = [p.next_wakeup(), next_arrival]
                .into_iter()
                .flatten()
                .filter(|&t| t > now)
                .min();
            now = match next {
                Some(t) => t,
                None => break,
            };
        }
        out
    }

    fn link(trace: &[u64], spec: QueueSpec) -> AnyStage {
        AnyStage::Link(LinkStage::new(
            &Trace {
                opportunities_ms: trace.to_vec(),
            },
            spec,
            0,
        ))
    }

    #[test]
    fn full_packets_leave_one_per_opportunity_at_scheduled_times() {
        let mut p = Pipeline::new(vec![link(&[1, 2, 3, 4, 6], QueueSpec::Infinite)]);
        let arrivals: Vec<_> = (0..7).map(|_| (0u64, 1500usize)).collect();
        let out = drive(&mut p, &arrivals, 100 * MS);
        let times: Vec<u64> = out.iter().map(|o| o.0 / MS).collect();
        // Trace wraps with period 6: 1 2 3 4 6 | 7 8 ...
        assert_eq!(times, [1, 2, 3, 4, 6, 7, 8]);
    }

    #[test]
    fn opportunity_needs_arrival_strictly_before_it_and_is_not_banked() {
        let mut p = Pipeline::new(vec![link(&[1], QueueSpec::Infinite)]);
        // Arrives exactly at 5 ms: the 5 ms opportunity is not usable, 6 ms is.
        // Idle opportunities 1..4 are lost, not banked.
        let out = drive(&mut p, &[(5 * MS, 1500), (5 * MS, 1500)], 50 * MS);
        assert_eq!(out.iter().map(|o| o.0 / MS).collect::<Vec<_>>(), [6, 7]);
        let mut p = Pipeline::new(vec![link(&[1], QueueSpec::Infinite)]);
        let out = drive(&mut p, &[(5 * MS - 1, 1500)], 50 * MS);
        assert_eq!(out[0].0, 5 * MS);
    }

    #[test]
    fn small_packets_share_and_large_span_opportunities() {
        // 26 ACKs of 52 bytes (56 with header) fit in one 1504-byte opportunity (26·56 = 1456),
        // the 27th needs the next one.
        let mut p = Pipeline::new(vec![link(&[1], QueueSpec::Infinite)]);
        let acks: Vec<_> = (0..27).map(|_| (0u64, 52usize)).collect();
        let out = drive(&mut p, &acks, 10 * MS);
        assert_eq!(out.iter().filter(|o| o.0 == MS).count(), 26);
        assert_eq!(out[26].0, 2 * MS);
        // 1000 + 1000 bytes: the second spans into the second opportunity.
        let mut p = Pipeline::new(vec![link(&[1], QueueSpec::Infinite)]);
        let out = drive(&mut p, &[(0, 996), (0, 996)], 10 * MS);
        assert_eq!(out.iter().map(|o| o.0 / MS).collect::<Vec<_>>(), [1, 2]);
    }

    #[test]
    fn droptail_queue_excludes_the_packet_in_transit() {
        // packets=2: 1 in transit + 2 queued survive a burst of 5 arriving together once the
        // first has started transmission; here all arrive before any opportunity, so the queue
        // accepts exactly 2 (nothing in transit yet).
        let spec = QueueSpec::parse("droptail", "packets=2").unwrap();
        let mut p = Pipeline::new(vec![link(&[1], spec)]);
        let out = drive(
            &mut p,
            &(0..5).map(|_| (0, 1500)).collect::<Vec<_>>(),
            20 * MS,
        );
        assert_eq!(out.len(), 2);
        assert_eq!(p.dropped(), 3);
        // A packet in transit is outside the queue. Trace: one opportunity every 2 ms.
        // t=0: a 100-byte packet and b1 (1500) fill the queue; b2 at 1 ms is dropped.
        // t=2: the small one leaves (104 B), b1 takes the other 1400 B → in transit, queue empty.
        // t=2.5: b3 and b4 are both accepted (they would not be if b1 still counted).
        let mut p = Pipeline::new(vec![link(&[2], spec)]);
        let arrivals = [
            (0, 100),
            (0, 1500),
            (MS, 1500),
            (MS * 5 / 2, 1500),
            (MS * 5 / 2, 1500),
        ];
        let out = drive(&mut p, &arrivals, 40 * MS);
        let times: Vec<u64> = out.iter().map(|o| o.0 / MS).collect();
        assert_eq!(times, [2, 4, 6, 8]);
        assert_eq!(p.dropped(), 1);
    }

    #[test]
    fn delay_then_link_order_and_exact_delay() {
        // Uplink of `mm-delay 28 mm-link`: link first, then delay.
        let mut p = Pipeline::new(vec![
            link(&[1], QueueSpec::Infinite),
            AnyStage::Delay(DelayStage::new(28 * MS)),
        ]);
        let out = drive(&mut p, &[(300_000, 1500)], 100 * MS);
        assert_eq!(out, vec![(29 * MS, 1500)]);
        assert_eq!(p.held(), 0);
    }

    #[test]
    fn loss_rate_is_close_to_nominal_and_seeded() {
        let run = |seed| {
            let mut s = LossStage::new(0.004, seed);
            for i in 0..200_000 {
                s.push(i, pkt(1));
            }
            s.dropped()
        };
        let d = run(1);
        assert!(
            (600..=1000).contains(&d),
            "dropped {d} of 200000 at p=0.004"
        );
        assert_eq!(run(1), d);
    }

    /// A reactive cross flow (Reno, 100 ms round trip beyond the link) alone on a 12 Mbit/s
    /// link (one packet per ms) with a 10-packet DropTail queue: in congestion avoidance, each
    /// loss halves its window, and the link carries about half as much in the two round trips
    /// after as in the two before.
    #[test]
    fn a_reactive_cross_flow_halves_its_window_and_rate_on_loss() {
        let trace = Trace {
            opportunities_ms: vec![1],
        };
        let spec = CrossFlows::parse("1,100").unwrap();
        let mut link = LinkStage::new(&trace, QueueSpec::droptail_packets(10), 0)
            .cross_flows(&spec)
            .logged();
        let mut departures = Vec::new();
        let mut events = Vec::new();
        for ms in 0..30_000 {
            link.advance(ms * MS);
            link.take_events(&mut events);
            departures.extend(events.drain(..).filter_map(|e| match e {
                LinkEvent::CrossDeparture { t, .. } => Some(t),
                _ => None,
            }));
        }
        assert!(link.pop_due(30_000 * MS).is_none(), "nothing is handed on");
        let reductions = link.reactive().unwrap().reductions(0).to_vec();
        // The first comes out of slow start; the sawtooth follows.
        // Slow start ends in a loss, and the tail of its overshoot in a timeout (cwnd 1: no
        // later packet is acknowledged); the sawtooth of congestion avoidance follows.
        let sawtooth: Vec<_> = reductions.iter().filter(|r| r.0 > 1000 * MS).collect();
        assert!(sawtooth.len() >= 3, "{reductions:?}");
        let count =
            |from: u64, to: u64| departures.iter().filter(|t| (from..to).contains(t)).count();
        for &&(t, before, after) in &sawtooth {
            assert!((after - before / 2.0).abs() < 1e-9, "{before} → {after}");
            // The window peaks near the path's capacity: 100 in flight + 10 queued.
            assert!((100.0..=125.0).contains(&before), "peak {before}");
            let (was, is) = (count(t - 200 * MS, t), count(t + 10 * MS, t + 210 * MS));
            let ratio = is as f64 / was as f64;
            assert!(
                (0.4..=0.65).contains(&ratio),
                "at {} ms: {was} packets in the 200 ms before, {is} after",
                t / MS
            );
        }
    }

    /// `pt-delay-schedule`: 20 ms until 5 ms in, then 80, then 2 from 10 ms. Each packet takes
    /// the delay in force when it arrives; when the delay falls, later packets wait behind
    /// earlier ones instead of overtaking them.
    #[test]
    fn delay_schedule_steps_at_its_times_and_keeps_order() {
        let schedule = Schedule {
            times_ns: vec![0, 5 * MS, 10 * MS],
            values: vec![20.0, 80.0, 2.0],
        };
        let mut p = Pipeline::new(vec![AnyStage::Delay(DelayStage::scheduled(&schedule))]);
        let arrivals = [
            (0, 100),
            (5 * MS - 1, 100),
            (5 * MS, 100),
            (10 * MS, 100),
            (200 * MS, 100),
        ];
        let out = drive(&mut p, &arrivals, 400 * MS);
        let departures: Vec<u64> = out.iter().map(|o| o.0).collect();
        assert_eq!(
            departures,
            [20 * MS, 25 * MS - 1, 85 * MS, 85 * MS, 202 * MS],
            "the packet at 10 ms (2 ms delay) leaves with the one ahead of it, at 85 ms"
        );
    }

    /// `pt-loss-schedule`: nothing lost until 1 s, everything from 1 s to 2 s, nothing after.
    #[test]
    fn loss_schedule_drops_by_arrival_time() {
        let schedule = Schedule {
            times_ns: vec![0, 1000 * MS, 2000 * MS],
            values: vec![0.0, 1.0, 0.0],
        };
        let mut s = LossStage::scheduled(&schedule, 7);
        let mut passed = Vec::new();
        for ms in (0..3000).step_by(10) {
            s.push(ms * MS, pkt(1));
            while let Some((t, _)) = s.pop_due(ms * MS) {
                passed.push(t / MS);
            }
        }
        assert_eq!(s.dropped(), 100);
        assert!(passed.iter().all(|t| !(1000..2000).contains(t)));
        assert_eq!(passed.len(), 200);
    }

    #[test]
    fn once_serves_one_pass_and_finishes() {
        let trace = Trace {
            opportunities_ms: vec![1, 2],
        };
        let l = LinkStage::new(&trace, QueueSpec::Infinite, 0).once(true);
        let mut p = Pipeline::new(vec![AnyStage::Link(l)]);
        let out = drive(&mut p, &[(0, 1500), (0, 1500), (0, 1500)], 50 * MS);
        assert_eq!(out.iter().map(|o| o.0 / MS).collect::<Vec<_>>(), [1, 2]);
        assert!(p.finished());
        assert_eq!(p.held(), 1, "the third packet never leaves");
        // Without --once the trace wraps (period 2): 1 2 | 3 4.
        let mut p = Pipeline::new(vec![link(&[1, 2], QueueSpec::Infinite)]);
        let out = drive(&mut p, &[(0, 1500), (0, 1500), (0, 1500)], 50 * MS);
        assert_eq!(out.iter().map(|o| o.0 / MS).collect::<Vec<_>>(), [1, 2, 3]);
        assert!(!p.finished());
    }

    #[test]
    fn a_departure_carrying_ce_is_followed_by_its_mark() {
        let trace = Trace {
            opportunities_ms: vec![1],
        };
        let l = LinkStage::new(&trace, QueueSpec::Infinite, 0).logged();
        let mut p = Pipeline::new(vec![AnyStage::Link(l)]);
        // Both arrive at 0 and leave in the opportunities at 1 and 2 ms.
        p.push(0, crate::test_packet(1, 0b11)); // CE
        p.push(0, crate::test_packet(2, 0b10)); // ECT(0)
        p.advance(5 * MS);
        let mut ev = Vec::new();
        if let Some(AnyStage::Link(l)) = p.stage_mut(0) {
            l.take_events(&mut ev);
        }
        let ev: Vec<_> = ev
            .into_iter()
            .filter(|e| matches!(e, LinkEvent::Departure { .. } | LinkEvent::Marked { .. }))
            .collect();
        assert_eq!(
            ev,
            [
                LinkEvent::Departure {
                    t: MS,
                    bytes: 1504,
                    arrival: 0
                },
                LinkEvent::Marked { t: MS, bytes: 1504 },
                LinkEvent::Departure {
                    t: 2 * MS,
                    bytes: 1504,
                    arrival: 0
                },
            ]
        );
    }

    #[test]
    fn unused_capacity_is_not_banked_and_drops_are_logged_at_enqueue() {
        let spec = QueueSpec::parse("droptail", "packets=1").unwrap();
        let l = LinkStage::new(
            &Trace {
                opportunities_ms: vec![1],
            },
            spec,
            0,
        )
        .logged();
        let mut p = Pipeline::new(vec![AnyStage::Link(l)]);
        // Idle for 10 opportunities, then a burst of 3 at 10.5 ms: one queued, two dropped;
        // the first one leaves at 11 ms, not earlier (nothing banked).
        let out = drive(&mut p, &[(10 * MS + MS / 2, 1500); 3], 20 * MS);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, 11 * MS);
        let mut ev = Vec::new();
        if let Some(AnyStage::Link(l)) = p.stage_mut(0) {
            l.take_events(&mut ev);
        }
        let drops: Vec<_> = ev
            .iter()
            .filter(|e| matches!(e, LinkEvent::Drop { .. }))
            .collect();
        assert_eq!(drops.len(), 2);
        assert!(ev.contains(&LinkEvent::Departure {
            t: 11 * MS,
            bytes: 1504,
            arrival: 10 * MS + MS / 2
        }));
        // Every opportunity up to the last advance is logged, used or not.
        let opportunities = ev
            .iter()
            .filter(|e| matches!(e, LinkEvent::Opportunity { .. }))
            .count();
        assert!(opportunities >= 11, "{opportunities}");
    }

    #[test]
    fn intermittent_and_onoff_drop_while_off() {
        let s = SwitchStage::new(1.0, 1.0, false, 0);
        let mut p = Pipeline::new(vec![AnyStage::Switch(s)]);
        let ms = |x: u64| x * MS;
        let out = drive(
            &mut p,
            &[
                (ms(500), 100),
                (ms(1500), 100),
                (ms(2500), 100),
                (ms(3999), 100),
            ],
            ms(5000),
        );
        assert_eq!(
            out.iter().map(|o| o.0 / MS).collect::<Vec<_>>(),
            [500, 2500]
        );
        assert_eq!(p.dropped(), 2);
        // mm-onoff with mean 1 s on and 1 s off loses about half of a steady stream.
        let mut s = SwitchStage::new(1.0, 1.0, true, 3);
        let n = 200_000;
        for i in 0..n {
            s.push(i * MS, vec![0]);
        }
        let lost = s.passed.dropped as f64 / n as f64;
        assert!((0.35..0.65).contains(&lost), "lost {lost}");
    }

    #[test]
    fn ms_clock_truncates_arrivals_like_mahimahi() {
        let stages = || vec![AnyStage::Delay(DelayStage::new(28 * MS))];
        let mut exact = Pipeline::new(stages());
        let mut ms = Pipeline::new(stages()).with_ms_clock(true);
        for p in [&mut exact, &mut ms] {
            p.push(700_000, pkt(100));
            p.advance(30 * MS);
        }
        assert_eq!(exact.pop().unwrap().0, 28 * MS + 700_000);
        assert_eq!(ms.pop().unwrap().0, 28 * MS);
    }

    /// The times of `link`'s delivery opportunities (ns) over its first `ms` milliseconds, with
    /// no packets: every event it logs must be an opportunity.
    fn opportunity_times(link: LinkStage, ms: u64) -> Vec<u64> {
        let mut l = link.logged();
        l.advance(ms * MS);
        let mut events = Vec::new();
        l.take_events(&mut events);
        events
            .iter()
            .map(|e| match e {
                LinkEvent::Opportunity { t } => *t,
                other => panic!("only opportunities expected, got {other:?}"),
            })
            .collect()
    }

    #[test]
    fn even_delivery_spaces_the_trace_s_mean_rate_at_ns_resolution() {
        // 50 Mbit/s: 25 opportunities in 6 ms, a gap of 240 µs each (a trace gives 4 or 5
        // at each whole ms).
        let trace = Trace::constant_rate(50.0).unwrap();
        let times = opportunity_times(LinkStage::new(&trace, QueueSpec::Infinite, 0).even(), 1_000);
        let mean = (trace.period_ms() * MS) as f64 / trace.opportunities_ms.len() as f64;
        assert_eq!(times.len(), (1_000.0 * MS as f64 / mean) as usize);
        for (i, t) in times.iter().enumerate() {
            assert_eq!(
                *t,
                ((i + 1) as f64 * mean).floor() as u64,
                "opportunity {i}"
            );
        }
        // Three packets at once leave one gap apart, not together.
        let mut p = Pipeline::new(vec![AnyStage::Link(
            LinkStage::new(&trace, QueueSpec::Infinite, 0).even(),
        )]);
        let out = drive(&mut p, &[(0, 1500), (0, 1500), (0, 1500)], 100 * MS);
        assert_eq!(
            out.iter().map(|o| o.0).collect::<Vec<_>>(),
            times[..3].to_vec()
        );
    }

    #[test]
    fn poisson_delivery_keeps_the_mean_rate_with_exponential_gaps() {
        // 12 Mbit/s trace: one opportunity per ms on average.
        let trace = Trace::constant_rate(12.0).unwrap();
        let poisson = |seed| LinkStage::new(&trace, QueueSpec::Infinite, 0).poisson(seed);
        let times = opportunity_times(poisson(7), 100_000);
        let n = times.len() as f64;
        assert!(
            (n - 100_000.0).abs() < 1_500.0,
            "{n} opportunities in 100 s"
        );
        let gaps: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        // Exponential: standard deviation = mean; a constant trace has 0.
        assert!((sd / mean - 1.0).abs() < 0.05, "sd/mean = {}", sd / mean);
        // Not on whole ms, and a different seed gives a different schedule.
        assert!(times.iter().any(|t| t % MS != 0));
        assert_ne!(opportunity_times(poisson(8), 10).first(), times.first());
        // Packets still wait for an opportunity after their arrival.
        let mut p = Pipeline::new(vec![AnyStage::Link(
            LinkStage::new(&trace, QueueSpec::Infinite, 0).poisson(7),
        )]);
        let out = drive(&mut p, &[(0, 1500), (0, 1500), (0, 1500)], 100 * MS);
        assert_eq!(out.len(), 3);
        assert_eq!(
            out.iter().map(|o| o.0).collect::<Vec<_>>(),
            times[..3].to_vec()
        );
    }

    #[test]
    fn policer_passes_the_burst_then_the_rate_and_never_delays() {
        // 12 Mbit/s = 1500 bytes per ms; bucket of 3000 bytes.
        let mut p = Pipeline::new(vec![AnyStage::Policer(PolicerStage::new(12.0, 3000))]);
        // Four back-to-back packets at 0: two pass (the full bucket), two are dropped.
        let arrivals = [
            (0, 1500),
            (0, 1500),
            (0, 1500),
            (0, 1500),
            // 1 ms later one packet's worth of tokens is back; half a ms later not yet two.
            (MS, 1500),
            (MS + MS / 2, 1500),
            (3 * MS + MS / 2, 1500),
        ];
        let out = drive(&mut p, &arrivals, 10 * MS);
        assert_eq!(
            out.iter().map(|o| o.0).collect::<Vec<_>>(),
            [0, 0, MS, 3 * MS + MS / 2]
        );
        assert_eq!(p.dropped(), 3);
        // A steady 24 Mbit/s stream is cut to the 12 Mbit/s rate (plus the bucket).
        let mut p = Pipeline::new(vec![AnyStage::Policer(PolicerStage::new(12.0, 3000))]);
        let stream: Vec<(u64, usize)> = (0..2000).map(|i| (i * MS / 2, 1500)).collect();
        let passed = drive(&mut p, &stream, 2000 * MS).len();
        assert!((1000..=1003).contains(&passed), "{passed} of 2000 passed");
    }

    #[test]
    fn aggregate_releases_in_bursts_at_interval_multiples() {
        let mut p = Pipeline::new(vec![AnyStage::Aggregate(AggregateStage::new(10 * MS))]);
        let out = drive(
            &mut p,
            &[(MS, 40), (9 * MS, 40), (10 * MS, 40), (10 * MS + 1, 40)],
            50 * MS,
        );
        assert_eq!(
            out.iter().map(|o| o.0 / MS).collect::<Vec<_>>(),
            [10, 10, 10, 20]
        );
        assert_eq!(p.held(), 0);
    }
}
