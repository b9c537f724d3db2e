//! DualPI2, the coupled dual-queue AQM of L4S (RFC 9332), as Linux's `sch_dualpi2` (mainline
//! since 6.18; `net/sched/sch_dualpi2.c`).
//!
//! # Brief overview
//!
//! L4S traffic (ECN field ECT(1), or CE) waits in a low-latency **L queue**; everything else in
//! the **classic C queue**. One PI controller, updated every `tupdate` from the larger of the two
//! heads' sojourn times, keeps a base probability p′:
//!
//! ```text
//! p′ += alpha · (qdelay − target) + beta · (qdelay − qdelay_at_last_update)     (s, Hz)
//! ```
//!
//! and the queues are **coupled** through it: a classic packet is dropped (or, ECT(0), marked)
//! with probability p_C = p′² — Reno/Cubic's rate goes as 1/√p — and an L4S packet is marked
//! with p_CL = k · p′ (`coupling_factor` k = 2), to which scalable senders (rate ∝ 1/p) respond
//! so that both kinds get about the same rate. In RFC 9332's notation with the controller's
//! output taken as p_CL: p_C = (p_CL / k)². On top, the L queue has a **step** marker: an L
//! packet whose sojourn passes `step_thresh` (1 ms) is marked whatever p′ says. When p_CL
//! exceeds 1 (overload) L packets are dropped with p′² like classic ones (`drop_on_overload`),
//! and classic ECT packets are dropped, not marked.
//!
//! A weighted round robin on bytes serves the queues: L first, but C gets `classic_protection`
//! % (10) of the link while both are backlogged (Linux's credit scheduler; RFC 9332's reference
//! pseudocode uses a time-shifted FIFO instead — Linux's is what is measured against here).
//! Marks and drops are applied when a packet leaves (`drop_enqueue=0`, Linux's default).
//!
//! Parameters keep Linux's names, units and defaults (`tc qdisc … dualpi2 limit 10000 target
//! 15ms tupdate 16ms alpha 0.16 beta 3.2 step_thresh 1ms coupling_factor 2 classic_protection
//! 10`), written as mm-link queue arguments: `--uplink-queue=dualpi2
//! --uplink-queue-args="target=15ms, step_thresh=1ms"`. Times take a unit (`us`, `ms`, `s`);
//! `step_thresh=Np` counts packets in the L queue instead; `alpha`/`beta` are in Hz, kept in
//! Linux's 1/256 Hz units (0.16 → 41).

use std::collections::VecDeque;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::{mark_ce, size_of, Dropped, Fifo, PACKET_SIZE};
use crate::ecn::{self, Codepoint};
use crate::Packet;

const NS_PER_US: u64 = 1_000;

/// The step threshold of the L queue (`step_thresh=`): a sojourn time or a queue length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StepThresh {
    /// Sojourn time, µs (`step_thresh=1ms`, Linux's default 1 ms).
    Us(u64),
    /// Packets in the L queue after the dequeue (`step_thresh=5p`).
    Packets(u64),
}

/// DualPI2's parameters, with Linux's names, units and defaults ([`Default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DualPi2Params {
    /// `limit=`: packets in both queues together; an arrival that finds them full is dropped.
    /// Default 10 000.
    pub limit: u64,
    /// `target=`: the PI controller's target queueing delay, µs. Default 15 ms.
    pub target_us: u64,
    /// `tupdate=`: interval between probability updates, µs. Default 16 ms.
    pub tupdate_us: u64,
    /// `alpha=`: integral gain, in 1/256 Hz (Linux's netlink unit). Default 41 (0.16 Hz).
    pub alpha: u32,
    /// `beta=`: proportional gain, in 1/256 Hz. Default 819 (3.2 Hz).
    pub beta: u32,
    /// `step_thresh=`: the L queue's step marking threshold. Default 1 ms.
    pub step_thresh: StepThresh,
    /// `min_qlen_step=`: the step applies only to L packets that arrive to at least this many
    /// packets in the L queue. Default 0.
    pub min_qlen_step: u64,
    /// `coupling_factor=`: k, p_CL = k · p′. Default 2.
    pub coupling_factor: u8,
    /// `drop_on_overload=`: 1 (default) drops L packets with p′² when p_CL > 1, keeping latency;
    /// 0 marks them (Linux's `overflow`), capping p′ at 1/k.
    pub drop_on_overload: bool,
    /// `drop_enqueue=`: 1 decides drops and marks at enqueue, 0 (default) at dequeue.
    pub drop_enqueue: bool,
    /// `classic_protection=`: the C queue's weight in the scheduler, % (default 10).
    pub classic_protection: u8,
    /// `any_ect=`: 1 puts ECT(0) into the L queue too (Linux's `any_ect`); 0 (default, Linux's
    /// `l4s_ect`) only ECT(1) and CE.
    pub any_ect: bool,
}

impl Default for DualPi2Params {
    fn default() -> Self {
        DualPi2Params {
            limit: 10_000,
            target_us: 15_000,
            tupdate_us: 16_000,
            alpha: 41,
            beta: 819,
            step_thresh: StepThresh::Us(1_000),
            min_qlen_step: 0,
            coupling_factor: 2,
            drop_on_overload: true,
            drop_enqueue: false,
            classic_protection: 10,
            any_ect: false,
        }
    }
}

/// The argument names [`DualPi2Params::parse`] knows.
const NAMES: &str = "limit, target, tupdate, alpha, beta, step_thresh, min_qlen_step, \
                     coupling_factor, drop_on_overload, drop_enqueue, classic_protection, any_ect";

impl DualPi2Params {
    /// Parses `NAME=VALUE` arguments separated by commas or spaces (`"target=15ms,
    /// step_thresh=1ms"`); every name not given keeps Linux's default. Unlike Mahimahi's
    /// queues, an unknown name, a time without a unit or a value out of Linux's range is an
    /// error naming it.
    pub fn parse(args: &str) -> Result<DualPi2Params, String> {
        let mut p = DualPi2Params::default();
        for word in args.split([',', ' ', '\t']).filter(|w| !w.is_empty()) {
            let (name, value) = word.split_once('=').ok_or_else(|| {
                format!("dualpi2 argument `{word}` is not NAME=VALUE (names: {NAMES})")
            })?;
            let bad = |why: &str| format!("dualpi2 argument `{word}`: {why}");
            let int = |max: u64| -> Result<u64, String> {
                match value.parse::<u64>() {
                    Ok(v) if v <= max => Ok(v),
                    _ => Err(bad(&format!("needs an integer from 0 to {max}"))),
                }
            };
            let at_least_1 = |v: u64| match v {
                0 => Err(bad("must be at least 1")),
                v => Ok(v),
            };
            let flag = || -> Result<bool, String> {
                match value {
                    "0" => Ok(false),
                    "1" => Ok(true),
                    _ => Err(bad("needs 0 or 1")),
                }
            };
            match name {
                "limit" => p.limit = at_least_1(int(u64::from(u32::MAX))?)?,
                "target" => p.target_us = time_us(value).map_err(|e| bad(&e))?,
                "tupdate" => p.tupdate_us = time_us(value).map_err(|e| bad(&e))?.max(1),
                "alpha" => p.alpha = gain(value).map_err(|e| bad(&e))?,
                "beta" => p.beta = gain(value).map_err(|e| bad(&e))?,
                "step_thresh" => {
                    p.step_thresh = match value.strip_suffix('p') {
                        Some(n) => StepThresh::Packets(
                            n.parse()
                                .map_err(|_| bad("needs a time or N packets (`5p`)"))?,
                        ),
                        None => StepThresh::Us(time_us(value).map_err(|e| bad(&e))?),
                    }
                }
                "min_qlen_step" => p.min_qlen_step = int(u64::from(u32::MAX))?,
                "coupling_factor" => p.coupling_factor = at_least_1(int(255)?)? as u8,
                "drop_on_overload" => p.drop_on_overload = flag()?,
                "drop_enqueue" => p.drop_enqueue = flag()?,
                "classic_protection" => p.classic_protection = int(100)? as u8,
                "any_ect" => p.any_ect = flag()?,
                _ => return Err(format!("dualpi2 has no argument `{name}` (names: {NAMES})")),
            }
        }
        Ok(p)
    }

    /// The arguments, every one given, comma-separated without spaces: `parse(args())` gives
    /// `self`.
    pub fn args(&self) -> String {
        let step = match self.step_thresh {
            StepThresh::Us(us) => format!("{us}us"),
            StepThresh::Packets(n) => format!("{n}p"),
        };
        format!(
            "limit={},target={}us,tupdate={}us,alpha={},beta={},step_thresh={step},\
             min_qlen_step={},coupling_factor={},drop_on_overload={},drop_enqueue={},\
             classic_protection={},any_ect={}",
            self.limit,
            self.target_us,
            self.tupdate_us,
            f64::from(self.alpha) / 256.0,
            f64::from(self.beta) / 256.0,
            self.min_qlen_step,
            self.coupling_factor,
            u8::from(self.drop_on_overload),
            u8::from(self.drop_enqueue),
            self.classic_protection,
            u8::from(self.any_ect),
        )
    }

    /// True when a packet with this ECN codepoint goes to the L queue (ECT(1) or CE; with
    /// `any_ect=1`, ECT(0) too). Not-ECT and what is not IP go to the C queue.
    pub fn is_l4s(&self, cp: Option<Codepoint>) -> bool {
        let mask = if self.any_ect { 0b11 } else { 0b01 };
        cp.is_some_and(|c| c.bits() & mask != 0)
    }
}

/// `15ms`, `1500us`, `0.5s`, `2.5ms` → µs (rounded). A bare number is refused: tc reads it as
/// µs, a Mahimahi user would expect ms.
fn time_us(value: &str) -> Result<u64, String> {
    let (number, scale) = if let Some(n) = value.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = value.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = value.strip_suffix('s') {
        (n, 1e6)
    } else {
        return Err("needs a unit: us, ms or s (e.g. 15ms)".into());
    };
    match number.parse::<f64>() {
        Ok(x) if x >= 0.0 && (x * scale) < 86_400e6 => Ok((x * scale).round() as u64),
        _ => Err("needs a non-negative time under a day".into()),
    }
}

/// A gain in Hz (`0.16`) → Linux's 1/256 Hz units (41), at least 1.
fn gain(value: &str) -> Result<u32, String> {
    match value.parse::<f64>() {
        Ok(hz) if hz > 0.0 && hz * 256.0 < f64::from(i32::MAX) => {
            Ok(((hz * 256.0).round() as u32).max(1))
        }
        _ => Err("needs a positive rate in Hz (e.g. 0.16)".into()),
    }
}

/// DualPI2's state. The C queue is the owning [`super::PacketQueue`]'s FIFO, passed in; the L
/// queue is here. Times in ns.
#[derive(Debug)]
pub(super) struct DualPi2 {
    p: DualPi2Params,
    l: Fifo,
    /// Per L packet, in queue order: whether the step may mark it (`min_qlen_step`).
    apply_step: VecDeque<bool>,
    /// p′, the PI controller's base probability, 0–1.
    prob: f64,
    /// The queueing delay at the last update, ns.
    last_qdelay: u64,
    /// Time of the next probability update, ns.
    next_update: u64,
    /// The scheduler's credit, bytes × %: L is served while it is ≤ 0 (or C is empty).
    credit: i64,
    rng: SmallRng,
    /// Marks by the step (part of the queue's marks).
    step_marks: u64,
}

/// What one packet leaving, or arriving with `drop_enqueue=1`, gets from p′.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Pass,
    Mark,
    Drop,
}

impl DualPi2 {
    pub(super) fn new(p: DualPi2Params, seed: u64) -> DualPi2 {
        let mut q = DualPi2 {
            p,
            l: Fifo::default(),
            apply_step: VecDeque::new(),
            prob: 0.0,
            last_qdelay: 0,
            next_update: p.tupdate_us * NS_PER_US,
            credit: 0,
            rng: SmallRng::seed_from_u64(seed),
            step_marks: 0,
        };
        q.credit = q.initial_credit();
        q
    }

    /// Linux's `c_protection_init`: one MTU × (wc − wl), negative by default (L first).
    fn initial_credit(&self) -> i64 {
        let wc = i64::from(self.p.classic_protection);
        PACKET_SIZE as i64 * (wc - (100 - wc))
    }

    /// Packets in the L queue.
    pub(super) fn l_len(&self) -> usize {
        self.l.items.len()
    }

    /// Runs the probability updates due up to `now` (ns), each from the heads' sojourn times
    /// at its own time: the queues do not change between the calls, so this equals Linux's
    /// timer. An idle queue with p′ = 0 skips ahead.
    fn catch_up(&mut self, now: u64, c: &Fifo) {
        let tupdate = self.p.tupdate_us * NS_PER_US;
        while self.next_update <= now {
            let idle = c.items.is_empty() && self.l.items.is_empty();
            if idle && self.prob == 0.0 && self.last_qdelay == 0 {
                self.next_update += (now - self.next_update) / tupdate * tupdate + tupdate;
                break;
            }
            let u = self.next_update;
            let sojourn = |f: &Fifo| f.items.front().map_or(0, |(t, _)| u.saturating_sub(*t));
            let qdelay = sojourn(c).max(sojourn(&self.l));
            let secs = |ns: u64| ns as f64 / 1e9;
            let target = self.p.target_us * NS_PER_US;
            let delta = f64::from(self.p.alpha) / 256.0 * (secs(qdelay) - secs(target))
                + f64::from(self.p.beta) / 256.0 * (secs(qdelay) - secs(self.last_qdelay));
            self.prob = (self.prob + delta).clamp(0.0, 1.0);
            if !self.p.drop_on_overload {
                self.prob = self.prob.min(1.0 / f64::from(self.p.coupling_factor));
            }
            self.last_qdelay = qdelay;
            self.next_update += tupdate;
        }
    }

    fn roll(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.random::<f64>() < p
    }

    /// Linux's `must_drop` for a packet of the L (`l4s`) or C queue with `backlog` bytes
    /// queued besides it: nothing under 2 MTUs; C: p′² (mark ECT, drop Not-ECT, drop all on
    /// overload); L: k·p′ marks, or on overload p′² drops (`drop_on_overload`) else marks.
    fn verdict(&mut self, l4s: bool, ect: bool, backlog: u64) -> Verdict {
        if backlog < 2 * PACKET_SIZE {
            return Verdict::Pass;
        }
        let p = self.prob;
        let p_l = p * f64::from(self.p.coupling_factor);
        let overload = p_l > 1.0;
        if !l4s {
            return match (self.roll(p) && self.roll(p), overload || !ect) {
                (false, _) => Verdict::Pass,
                (true, true) => Verdict::Drop,
                (true, false) => Verdict::Mark,
            };
        }
        if overload {
            let drop = self.p.drop_on_overload && self.roll(p) && self.roll(p);
            return if drop { Verdict::Drop } else { Verdict::Mark };
        }
        match (self.roll(p_l), ect) {
            (false, _) => Verdict::Pass,
            (true, true) => Verdict::Mark,
            (true, false) => Verdict::Drop,
        }
    }

    /// Applies `v` to `pkt`: true when it must be dropped; a mark sets CE and counts.
    fn apply(v: Verdict, pkt: &mut Packet, marked: &mut u64) -> bool {
        match v {
            Verdict::Pass => false,
            Verdict::Drop => true,
            Verdict::Mark => {
                mark_ce(pkt, marked);
                false
            }
        }
    }

    /// Offers a packet arriving at `t` (ns): tail drop at `limit` packets, classification,
    /// and with `drop_enqueue=1` the verdict of p′. Returns what was dropped.
    pub(super) fn enqueue(
        &mut self,
        t: u64,
        mut pkt: Packet,
        c: &mut Fifo,
        marked: &mut u64,
    ) -> Dropped {
        self.catch_up(t, c);
        let size = size_of(&pkt);
        let dropped = Dropped {
            packets: 1,
            bytes: size,
        };
        if c.len() + self.l.len() >= self.p.limit {
            return dropped;
        }
        let cp = ecn::codepoint(&pkt);
        let l4s = self.p.is_l4s(cp);
        if self.p.drop_enqueue {
            let ect = cp.is_some_and(Codepoint::is_ecn_capable);
            let v = self.verdict(l4s, ect, c.bytes + self.l.bytes);
            if Self::apply(v, &mut pkt, marked) {
                return dropped;
            }
        }
        if l4s {
            self.apply_step
                .push_back(self.l.len() >= self.p.min_qlen_step);
            self.l.push(t, pkt);
        } else {
            c.push(t, pkt);
        }
        Dropped::default()
    }

    /// Which queue the scheduler serves next: `Some(true)` the L queue, `Some(false)` the C
    /// queue, `None` when both are empty.
    fn pick(&self, c: &Fifo) -> Option<bool> {
        let l_len = self.l.items.len();
        if l_len > 0 && (c.items.is_empty() || self.credit <= 0) {
            Some(true)
        } else if !c.items.is_empty() {
            Some(false)
        } else {
            None
        }
    }

    /// Arrival time of the packet the scheduler would serve next.
    pub(super) fn head_arrival(&self, c: &Fifo) -> Option<u64> {
        let queue = if self.pick(c)? { &self.l } else { c };
        queue.items.front().map(|(t, _)| *t)
    }

    /// Serves the next packet at `now` (ns), as Linux's `dualpi2_qdisc_dequeue`: pick a queue
    /// by credit, then p′'s verdict (`drop_enqueue=0`) and the L queue's step; a dropped packet
    /// is counted in `dropped` and the next one tried. `None` when nothing is left.
    pub(super) fn dequeue(
        &mut self,
        now: u64,
        c: &mut Fifo,
        dropped: &mut u64,
        marked: &mut u64,
    ) -> Option<(u64, Packet)> {
        self.catch_up(now, c);
        loop {
            let Some(from_l) = self.pick(c) else {
                self.credit = self.initial_credit();
                return None;
            };
            let (arrival, mut pkt, step) = if from_l {
                let (t, p) = self.l.pop().expect("picked");
                (t, p, self.apply_step.pop_front().unwrap_or(true))
            } else {
                let (t, p) = c.pop().expect("picked");
                (t, p, false)
            };
            // Linux's WRR: serving L while C waits earns C its weight; serving C while L waits
            // costs L's.
            let size = size_of(&pkt) as i64;
            let credit_change = match from_l {
                true if !c.items.is_empty() => i64::from(self.p.classic_protection) * size,
                false if !self.l.items.is_empty() => {
                    -i64::from(100 - self.p.classic_protection) * size
                }
                _ => 0,
            };
            let ect = ecn::codepoint(&pkt).is_some_and(Codepoint::is_ecn_capable);
            if !self.p.drop_enqueue {
                let v = self.verdict(from_l, ect, c.bytes + self.l.bytes);
                if Self::apply(v, &mut pkt, marked) {
                    *dropped += 1;
                    continue;
                }
            }
            if from_l && step && self.past_step(now, arrival) {
                if !ect {
                    *dropped += 1;
                    continue;
                }
                if mark_ce(&mut pkt, marked) {
                    self.step_marks += 1;
                }
            }
            self.credit += credit_change;
            return Some((arrival, pkt));
        }
    }

    /// True when an L packet that arrived at `arrival` and leaves at `now` is past the step.
    fn past_step(&self, now: u64, arrival: u64) -> bool {
        match self.p.step_thresh {
            StepThresh::Us(us) => now.saturating_sub(arrival) > us * NS_PER_US,
            StepThresh::Packets(n) => self.l.items.len() as u64 > n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_packet as pkt;

    const MS: u64 = 1_000_000;

    fn dual(args: &str) -> DualPi2 {
        DualPi2::new(DualPi2Params::parse(args).unwrap(), 7)
    }

    #[test]
    fn defaults_are_linuxs_and_args_round_trip() {
        let d = DualPi2Params::parse("").unwrap();
        assert_eq!(d, DualPi2Params::default());
        assert_eq!(
            (d.limit, d.target_us, d.tupdate_us),
            (10_000, 15_000, 16_000)
        );
        assert_eq!((d.alpha, d.beta, d.coupling_factor), (41, 819, 2));
        assert_eq!(DualPi2Params::parse("alpha=0.16, beta=3.2").unwrap(), d);
        let p = DualPi2Params::parse(
            "limit=500 target=5ms tupdate=2500us step_thresh=4p alpha=0.5 any_ect=1 \
             classic_protection=25 drop_on_overload=0 min_qlen_step=2",
        )
        .unwrap();
        assert_eq!(p.step_thresh, StepThresh::Packets(4));
        assert_eq!((p.target_us, p.tupdate_us, p.alpha), (5_000, 2_500, 128));
        for q in [d, p] {
            assert_eq!(DualPi2Params::parse(&q.args()).unwrap(), q, "{}", q.args());
        }
        for (bad, says) in [
            ("target=15", "unit"),
            ("tartget=15ms", "no argument `tartget`"),
            ("classic_protection=101", "0 to 100"),
            ("coupling_factor=0", "at least 1"),
            ("alpha=0", "positive"),
            ("step_thresh=xp", "packets"),
            ("any_ect=yes", "0 or 1"),
            ("limit", "NAME=VALUE"),
        ] {
            let e = DualPi2Params::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn classification_by_ecn_field() {
        let d = DualPi2Params::default();
        let cp = |bits| Some(Codepoint::from_bits(bits));
        assert!(d.is_l4s(cp(0b01)) && d.is_l4s(cp(0b11)));
        assert!(!d.is_l4s(cp(0b10)) && !d.is_l4s(cp(0b00)) && !d.is_l4s(None));
        let any = DualPi2Params::parse("any_ect=1").unwrap();
        assert!(any.is_l4s(cp(0b10)) && !any.is_l4s(cp(0b00)));
    }

    #[test]
    fn the_pi_update_by_hand() {
        // One classic packet queued at t = 0, nothing leaves. At the first update (16 ms) the
        // head has waited 16 ms: Δp = 41/256 · (0.016 − 0.015) + 819/256 · (0.016 − 0).
        let mut q = dual("");
        let mut c = Fifo::default();
        c.push(0, pkt(0, 0));
        q.catch_up(16 * MS - 1, &c);
        assert_eq!(q.prob, 0.0);
        q.catch_up(16 * MS, &c);
        let p1 = 0.16015625 * 0.001 + 3.19921875 * 0.016;
        assert!((q.prob - p1).abs() < 1e-12, "{}", q.prob);
        // At 32 ms: 41/256 · 0.017 + 819/256 · (0.032 − 0.016).
        q.catch_up(32 * MS, &c);
        let p2 = p1 + 0.16015625 * 0.017 + 3.19921875 * 0.016;
        assert!((q.prob - p2).abs() < 1e-12, "{}", q.prob);
        // Emptied, the delay term pulls p′ down: at 48 ms qdelay = 0.
        c.pop();
        q.catch_up(48 * MS, &c);
        let p3 = p2 + 0.16015625 * -0.015 + 3.19921875 * -0.032;
        assert!((q.prob - p3.max(0.0)).abs() < 1e-12, "{}", q.prob);
        // With drop_on_overload=0, p′ is capped at 1/k.
        let mut q = dual("drop_on_overload=0");
        let mut c = Fifo::default();
        c.push(0, pkt(0, 0));
        q.catch_up(10_000 * MS, &c);
        assert_eq!(q.prob, 0.5);
    }

    /// Verdicts for `n` packets at p′ = `prob`: (marks, drops).
    fn verdicts(prob: f64, l4s: bool, ect: bool, n: u32) -> (u32, u32) {
        let mut q = dual("");
        q.prob = prob;
        let mut counts = (0, 0);
        for _ in 0..n {
            match q.verdict(l4s, ect, 10 * PACKET_SIZE) {
                Verdict::Mark => counts.0 += 1,
                Verdict::Drop => counts.1 += 1,
                Verdict::Pass => {}
            }
        }
        counts
    }

    #[test]
    fn coupling_marks_l4s_with_k_p_and_classic_with_p_squared() {
        // p′ = 0.3: L4S marked with k·p′ = 0.6, classic ECT marked and Not-ECT dropped with
        // p′² = 0.09 (10 000 packets each; 4 standard deviations).
        let (marks, drops) = verdicts(0.3, true, true, 10_000);
        assert!(
            (5_800..=6_200).contains(&marks) && drops == 0,
            "{marks} {drops}"
        );
        let (marks, drops) = verdicts(0.3, false, true, 10_000);
        assert!(
            (780..=1_020).contains(&marks) && drops == 0,
            "{marks} {drops}"
        );
        let (marks, drops) = verdicts(0.3, false, false, 10_000);
        assert!(
            marks == 0 && (780..=1_020).contains(&drops),
            "{marks} {drops}"
        );
        // Overload (k·p′ = 1.2 > 1): L4S dropped with p′² = 0.36, marked otherwise; classic
        // ECT dropped, not marked.
        let (marks, drops) = verdicts(0.6, true, true, 10_000);
        assert!(
            (3_400..=3_800).contains(&drops) && marks == 10_000 - drops,
            "{drops}"
        );
        let (marks, drops) = verdicts(0.6, false, true, 10_000);
        assert!(
            marks == 0 && (3_400..=3_800).contains(&drops),
            "{marks} {drops}"
        );
        // Under 2 MTUs queued, nothing.
        let mut q = dual("");
        q.prob = 1.0;
        assert_eq!(q.verdict(false, false, 2 * PACKET_SIZE - 1), Verdict::Pass);
    }

    #[test]
    fn the_scheduler_gives_classic_its_ten_percent() {
        // Both queues backlogged, p′ = 0 and a step that never fires: the credit starts at
        // 1504 × (10 − 90); each L packet adds 10 × 1504, each C packet takes 90 × 1504. So
        // nine L packets, one C packet, and again.
        let mut q = dual("step_thresh=1000s");
        let mut c = Fifo::default();
        let (mut marked, mut dropped) = (0, 0);
        for i in 0..30 {
            assert_eq!(q.enqueue(0, pkt(i, 0b01), &mut c, &mut marked).packets, 0);
            assert_eq!(
                q.enqueue(0, pkt(100 + i, 0b00), &mut c, &mut marked)
                    .packets,
                0
            );
        }
        assert_eq!((q.l_len(), c.items.len()), (30, 30));
        let mut order = String::new();
        for _ in 0..20 {
            let (_, p) = q.dequeue(MS, &mut c, &mut dropped, &mut marked).unwrap();
            order.push(if p[5] < 100 { 'L' } else { 'C' });
        }
        assert_eq!(order, "LLLLLLLLLCLLLLLLLLLC");
        assert_eq!((dropped, marked), (0, 0));
        // head_arrival names the packet the scheduler serves next.
        let mut q = dual("");
        let mut c = Fifo::default();
        q.enqueue(5, pkt(0, 0b00), &mut c, &mut marked);
        q.enqueue(9, pkt(1, 0b01), &mut c, &mut marked);
        assert_eq!(q.head_arrival(&c), Some(9));
    }

    #[test]
    fn the_step_marks_l_packets_past_one_ms() {
        let mut q = dual("");
        let mut c = Fifo::default();
        let (mut marked, mut dropped) = (0, 0);
        for i in 0..3 {
            q.enqueue(0, pkt(i, 0b01), &mut c, &mut marked);
        }
        let ce = |p: &Packet| ecn::codepoint(p) == Some(Codepoint::Ce);
        // 0.5 ms of sojourn: under the step; 1.5 ms: over it, marked (p′ is still 0).
        let (_, p) = q
            .dequeue(MS / 2, &mut c, &mut dropped, &mut marked)
            .unwrap();
        assert!(!ce(&p));
        let (_, p) = q
            .dequeue(3 * MS / 2, &mut c, &mut dropped, &mut marked)
            .unwrap();
        assert!(ce(&p));
        assert_eq!((marked, q.step_marks, dropped), (1, 1, 0));
        // In packets: marked while more than 2 are left behind in the L queue.
        let mut q = dual("step_thresh=2p");
        let mut c = Fifo::default();
        for i in 0..5 {
            q.enqueue(0, pkt(i, 0b01), &mut c, &mut marked);
        }
        let marks: Vec<bool> = (0..5)
            .map(|_| ce(&q.dequeue(0, &mut c, &mut dropped, &mut marked).unwrap().1))
            .collect();
        assert_eq!(marks, [true, true, false, false, false]);
    }

    #[test]
    fn a_full_queue_drops_arrivals() {
        let mut q = dual("limit=3");
        let mut c = Fifo::default();
        let mut marked = 0;
        let drops: Vec<u64> = (0..5)
            .map(|i| {
                q.enqueue(0, pkt(i, (i % 2) as u8), &mut c, &mut marked)
                    .packets
            })
            .collect();
        assert_eq!(drops, [0, 0, 0, 1, 1]);
    }
}
