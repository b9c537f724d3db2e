//! Reactive cross traffic: other users' loss-based flows that share a link's queue and back
//! off when it drops their packets (`mm-link … --uplink-cross-flows=N,RTT_MS[,START_S]`).
//!
//! Each of the N flows is a Reno sender (RFC 5681's congestion control; no retransmission:
//! only its rate matters) modelled inside the emulator, so that it runs the same in real and
//! simulated time:
//!
//! - it sends 1500-byte packets ([`crate::cross::CROSS_PACKET_BYTES`], one delivery
//!   opportunity each) into the link's queue whenever fewer than ⌊cwnd⌋ are in flight, from
//!   its start time on, with an initial window of [`INITIAL_WINDOW`] packets;
//! - a packet that leaves the link is acknowledged `RTT_MS` later (the flow's own round trip
//!   beyond this link: its propagation both ways and the other links; the queue's delay comes
//!   on top);
//! - each acknowledgement grows cwnd by one packet in slow start (cwnd < ssthresh) and by
//!   1/cwnd after (one packet per round trip), up to [`MAX_WINDOW`] (its receiver's window:
//!   on an infinite queue nothing else would stop it);
//! - a packet the queue dropped is known lost when a later one is acknowledged (its
//!   duplicate acknowledgements, as fast retransmit would see them): cwnd and ssthresh become
//!   half the window, at most once per window of data (the packets sent before the reduction
//!   cannot cause another); if nothing is acknowledged for a retransmission timeout (RFC 6298:
//!   srtt + 4 rttvar, at least 200 ms, 1 s before any sample), every packet in flight is lost,
//!   ssthresh becomes half the window and cwnd one packet.
//!
//! The flows' packets are cross traffic ([`crate::cross::is_cross`]): logged `c+`/`c-`/`cd`,
//! never handed on, in none of a scheme's figures. Bytes 4–5 of a packet carry its flow's
//! index, 6–13 its sequence number, 14 the tag [`REACTIVE_TAG`] (a rate source's packets have
//! zeros there).

use std::collections::VecDeque;
use std::fmt;

use crate::cross::{cross_packet, CrossError, CROSS_MARK};
use crate::queue::MS;
use crate::Packet;

/// Each flow's initial window, packets (Linux's since 2.6.39, RFC 6928).
pub const INITIAL_WINDOW: f64 = 10.0;

/// The largest window, packets: what a receiver with Linux's default 6 MiB receive buffer
/// advertises (about 4 MiB with its overhead share) in 1500-byte packets.
pub const MAX_WINDOW: f64 = 2800.0;

/// Byte 14 of a reactive flow's packet.
pub const REACTIVE_TAG: u8 = b'R';

/// Most flows one direction takes.
pub const MAX_FLOWS: u16 = 1000;

/// The reactive cross traffic of one direction of a link: `N,RTT_MS[,START_S]`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CrossFlows {
    /// Number of flows, 1..=[`MAX_FLOWS`].
    pub flows: u16,
    /// Each flow's round trip beyond this link, ms (> 0, at most a day).
    pub rtt_ms: f64,
    /// When they start, s after the emulator (0 by default).
    pub start_s: f64,
}

impl CrossFlows {
    /// Parses `N,RTT_MS[,START_S]` (`1,40`, `4,80,5`). Errors name the value at fault.
    pub fn parse(text: &str) -> Result<CrossFlows, CrossError> {
        let v: Vec<&str> = text.split(',').map(str::trim).collect();
        let err = |what: &str| CrossError(format!("`{text}`: {what} (as N,RTT_MS[,START_S])"));
        let (flows, rtt, start) = match v.as_slice() {
            [n, rtt] => (n, rtt, "0"),
            [n, rtt, start] => (n, rtt, *start),
            _ => return Err(err("two or three values expected")),
        };
        let flows = flows
            .parse::<u16>()
            .ok()
            .filter(|n| (1..=MAX_FLOWS).contains(n))
            .ok_or_else(|| err(&format!("N must be a count of flows from 1 to {MAX_FLOWS}")))?;
        let max_ms = crate::queue::MAX_DELAY_MS as f64;
        let rtt_ms = rtt
            .parse::<f64>()
            .ok()
            .filter(|r| *r > 0.0 && *r <= max_ms)
            .ok_or_else(|| err(&format!("RTT_MS must be a number of ms in (0, {max_ms}]")))?;
        let start_s = start
            .parse::<f64>()
            .ok()
            .filter(|s| (0.0..=max_ms / 1000.0).contains(s))
            .ok_or_else(|| err("START_S must be a number of seconds ≥ 0, at most a day"))?;
        Ok(CrossFlows {
            flows,
            rtt_ms,
            start_s,
        })
    }

    /// The words of [`CrossFlows::parse`]: `1,40` (`,START_S` only when not 0).
    pub fn words(&self) -> String {
        match self.start_s {
            s if s == 0.0 => format!("{},{}", self.flows, self.rtt_ms),
            s => format!("{},{},{s}", self.flows, self.rtt_ms),
        }
    }
}

impl fmt::Display for CrossFlows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.words())
    }
}

/// One Reno flow's state.
#[derive(Debug, Clone)]
struct Flow {
    cwnd: f64,
    ssthresh: f64,
    next_seq: u64,
    /// Sequence numbers in flight and when they were sent, oldest first.
    in_flight: VecDeque<(u64, u64)>,
    /// Acknowledgements on their way back: (arrival time, sequence number), in time order.
    acks: VecDeque<(u64, u64)>,
    /// Losses of packets numbered below this do not reduce the window again.
    recover: u64,
    /// Time from which the window has room, if it has.
    ready_at: Option<u64>,
    srtt: Option<(f64, f64)>,
    reductions: Vec<(u64, f64, f64)>,
}

impl Flow {
    fn new(start: u64) -> Flow {
        Flow {
            cwnd: INITIAL_WINDOW,
            ssthresh: f64::INFINITY,
            next_seq: 0,
            in_flight: VecDeque::new(),
            acks: VecDeque::new(),
            recover: 0,
            ready_at: Some(start),
            srtt: None,
            reductions: Vec::new(),
        }
    }

    fn has_room(&self) -> bool {
        (self.in_flight.len() as f64) < self.cwnd.floor().max(1.0)
    }

    /// RFC 6298's timeout, ns.
    fn rto(&self) -> u64 {
        let s = match self.srtt {
            Some((srtt, rttvar)) => srtt + 4.0 * rttvar,
            None => 1e9,
        };
        s.max(200.0 * MS as f64) as u64
    }

    /// The flow's next event: (time, kind), kind 0 an acknowledgement, 1 a timeout, 2 a send.
    fn next(&self) -> Option<(u64, u8)> {
        let ack = self.acks.front().map(|a| (a.0, 0));
        let timeout = self.in_flight.front().map(|p| (p.1 + self.rto(), 1));
        let send = self.ready_at.filter(|_| self.has_room()).map(|t| (t, 2));
        [ack, timeout, send].into_iter().flatten().min()
    }

    /// Halves the window (once per window of data), at `t`.
    fn reduce(&mut self, t: u64, to_one: bool) {
        let before = self.cwnd;
        self.ssthresh = (self.cwnd / 2.0).max(2.0);
        self.cwnd = if to_one { 1.0 } else { self.ssthresh };
        self.recover = self.next_seq;
        self.reductions.push((t, before, self.cwnd));
    }

    fn on_ack(&mut self, t: u64, seq: u64) {
        let mut lost = None;
        while let Some(&(s, sent)) = self.in_flight.front() {
            if s > seq {
                break;
            }
            self.in_flight.pop_front();
            if s < seq {
                lost = Some(s);
                continue;
            }
            let sample = (t - sent) as f64;
            self.srtt = Some(match self.srtt {
                None => (sample, sample / 2.0),
                Some((srtt, var)) => (
                    0.875 * srtt + 0.125 * sample,
                    0.75 * var + 0.25 * (srtt - sample).abs(),
                ),
            });
            self.cwnd += if self.cwnd < self.ssthresh {
                1.0
            } else {
                1.0 / self.cwnd
            };
            self.cwnd = self.cwnd.min(MAX_WINDOW);
        }
        if lost.is_some_and(|s| s >= self.recover) {
            self.reduce(t, false);
        }
        self.ready_at = Some(t);
    }
}

/// The N Reno flows of one direction, on the link's ns clock; the link calls
/// [`RenoFlows::next_event`] and [`RenoFlows::fire`] as it advances and
/// [`RenoFlows::departed`] for each of their packets it delivers.
#[derive(Debug, Clone)]
pub struct RenoFlows {
    flows: Vec<Flow>,
    rtt_ns: u64,
}

impl RenoFlows {
    /// The flows of `spec`, each with its window open at the start time.
    pub fn new(spec: &CrossFlows) -> RenoFlows {
        let start = (spec.start_s * 1e9).round() as u64;
        RenoFlows {
            flows: (0..spec.flows).map(|_| Flow::new(start)).collect(),
            rtt_ns: (spec.rtt_ms * MS as f64).round() as u64,
        }
    }

    /// Time of the next thing a flow does (an acknowledgement arrives, a timeout, a send).
    pub fn next_event(&self) -> Option<u64> {
        self.flows
            .iter()
            .filter_map(|f| f.next().map(|e| e.0))
            .min()
    }

    /// Does the earliest thing due: an acknowledgement or a timeout updates its flow (`None`);
    /// a send returns the packet, at its time.
    pub fn fire(&mut self) -> Option<(u64, Packet)> {
        let (i, (t, kind)) = self
            .flows
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.next().map(|e| (i, e)))
            .min_by_key(|(i, e)| (*e, *i))?;
        let f = &mut self.flows[i];
        match kind {
            0 => {
                let (_, seq) = f.acks.pop_front().expect("due");
                f.on_ack(t, seq);
                None
            }
            1 => {
                f.in_flight.clear();
                f.reduce(t, true);
                f.ready_at = Some(t);
                None
            }
            _ => {
                let seq = f.next_seq;
                f.next_seq += 1;
                f.in_flight.push_back((seq, t));
                let mut pkt = cross_packet();
                pkt[CROSS_MARK.len()..CROSS_MARK.len() + 2]
                    .copy_from_slice(&(i as u16).to_be_bytes());
                pkt[6..14].copy_from_slice(&seq.to_be_bytes());
                pkt[14] = REACTIVE_TAG;
                Some((t, pkt))
            }
        }
    }

    /// A packet of theirs left the link at `t`: its acknowledgement arrives a round trip later.
    /// Other cross packets are ignored.
    pub fn departed(&mut self, t: u64, pkt: &[u8]) {
        if pkt.get(14) != Some(&REACTIVE_TAG) {
            return;
        }
        let flow = u16::from_be_bytes([pkt[4], pkt[5]]) as usize;
        let seq = u64::from_be_bytes(pkt[6..14].try_into().expect("8 bytes"));
        if let Some(f) = self.flows.get_mut(flow) {
            f.acks.push_back((t + self.rtt_ns, seq));
        }
    }

    /// Flow `i`'s congestion window, packets.
    pub fn cwnd(&self, i: usize) -> f64 {
        self.flows[i].cwnd
    }

    /// Flow `i`'s window reductions: (time ns, cwnd before, cwnd after).
    pub fn reductions(&self, i: usize) -> &[(u64, f64, f64)] {
        &self.flows[i].reductions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flows_rtt_and_start_and_names_bad_values() {
        let f = CrossFlows::parse("4, 80,2.5").unwrap();
        assert_eq!((f.flows, f.rtt_ms, f.start_s), (4, 80.0, 2.5));
        assert_eq!(f.words(), "4,80,2.5");
        assert_eq!(CrossFlows::parse("1,40").unwrap().words(), "1,40");
        for (bad, says) in [
            ("0,40", "N must be"),
            ("1", "two or three values"),
            ("1,0", "RTT_MS must be"),
            ("1,40,-1", "START_S must be"),
        ] {
            let e = CrossFlows::parse(bad).unwrap_err().0;
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
