//! The tunnel endpoint as a pure state machine (no sockets, no clock): the I/O shell feeds it
//! datagrams from the peer and packets from the TUN device, with the current time, and drains
//! control datagrams to send and log records to write.
//!
//! Handshake (as pantheon-tunnel): the client sends SYN (an 8-byte datagram, UID `u64::MAX`)
//! every second until the server's ACK arrives, at most [`SYN_ATTEMPTS`] times; the server
//! answers every SYN with an ACK, late ones included (the client may have missed the first ACK).
//! Data UIDs count from 0 per endpoint.

use crate::log::{Kind, Record, Role};
use crate::wire::{self, Datagram};

/// How many SYNs a client sends before it gives up (pantheon-tunnel: 1 + 5 retries).
pub const SYN_ATTEMPTS: u32 = 6;
/// Interval between SYNs, ns.
pub const SYN_INTERVAL_NS: u64 = 1_000_000_000;

/// Counters of what an endpoint saw, for the run's diagnostics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// Data packets sent to the peer.
    pub sent: u64,
    /// Data packets received from the peer.
    pub received: u64,
    /// Datagrams that were not tunnel packets (too short, unknown control, not IP).
    pub malformed: u64,
    /// TUN packets dropped because the tunnel was not yet connected.
    pub dropped_unconnected: u64,
    /// SYNs answered after the first (late SYNs).
    pub extra_syns: u64,
}

/// Handshake state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Client: SYNs sent so far and when the next is due (ns).
    Connecting {
        /// SYNs sent.
        attempts: u32,
        /// Time the next SYN is due, ns.
        next_at: u64,
    },
    /// Server: waiting for the first SYN.
    Listening,
    /// Handshake done; data flows.
    Connected,
    /// Client gave up after [`SYN_ATTEMPTS`] SYNs.
    Failed,
}

/// One tunnel endpoint.
#[derive(Debug)]
pub struct Endpoint {
    role: Role,
    flow: u16,
    state: State,
    next_uid: u64,
    pending_control: Option<u64>,
    log: Vec<Record>,
    counters: Counters,
}

impl Endpoint {
    /// A new endpoint for flow `flow` (1-based) at time `now` (ns). A client wants to send its
    /// first SYN at once.
    pub fn new(role: Role, flow: u16, now: u64) -> Endpoint {
        let state = match role {
            Role::Server => State::Listening,
            Role::Client => State::Connecting {
                attempts: 0,
                next_at: now,
            },
        };
        Endpoint {
            role,
            flow,
            state,
            next_uid: 0,
            pending_control: None,
            log: Vec::with_capacity(1024),
            counters: Counters::default(),
        }
    }

    /// Current handshake state.
    pub fn state(&self) -> State {
        self.state
    }

    /// True once the handshake is done.
    pub fn is_connected(&self) -> bool {
        self.state == State::Connected
    }

    /// What the endpoint has counted so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Handles one datagram from the peer received at `now`. Returns the inner IP packet to
    /// write to the TUN device, if it is a data packet (its ingress record is logged).
    pub fn handle_datagram<'a>(&mut self, now: u64, buf: &'a [u8]) -> Option<&'a [u8]> {
        match wire::parse(buf) {
            Ok(Datagram::Syn) if self.role == Role::Server => {
                if self.state == State::Connected {
                    self.counters.extra_syns += 1;
                }
                self.state = State::Connected;
                self.pending_control = Some(wire::ACK);
                None
            }
            Ok(Datagram::Ack) if self.role == Role::Client => {
                if self.state != State::Failed {
                    self.state = State::Connected;
                }
                None
            }
            Ok(Datagram::Data { uid, packet }) if self.state == State::Connected => {
                self.counters.received += 1;
                self.log.push(Record {
                    t_ns: now,
                    uid,
                    size: (packet.len() + wire::OVERHEAD) as u32,
                    flow: self.flow,
                    kind: Kind::Ingress,
                });
                Some(packet)
            }
            // A SYN at a client, an ACK at a server, data before the handshake: not ours.
            Ok(_) | Err(_) => {
                self.counters.malformed += 1;
                None
            }
        }
    }

    /// Encapsulates a packet read from the TUN device at `now`. The caller read the IP packet
    /// into `buf[8..8 + ip_len]` (8 bytes of headroom, so nothing is copied); this writes the UID
    /// into `buf[..8]`, logs the egress record and returns the datagram length. Returns `None`
    /// (and counts the drop) while the tunnel is not connected.
    pub fn encapsulate(&mut self, now: u64, buf: &mut [u8], ip_len: usize) -> Option<usize> {
        if self.state != State::Connected {
            self.counters.dropped_unconnected += 1;
            return None;
        }
        let uid = self.next_uid;
        self.next_uid += 1;
        wire::write_uid(buf, uid);
        self.counters.sent += 1;
        self.log.push(Record {
            t_ns: now,
            uid,
            size: (ip_len + wire::OVERHEAD) as u32,
            flow: self.flow,
            kind: Kind::Egress,
        });
        Some(ip_len + wire::UID_LEN)
    }

    /// A control datagram to send now, if any (the client's SYNs, the server's ACKs).
    pub fn poll_transmit(&mut self, now: u64) -> Option<[u8; wire::UID_LEN]> {
        if let Some(uid) = self.pending_control.take() {
            return Some(wire::control(uid));
        }
        if let State::Connecting { attempts, next_at } = self.state {
            if now >= next_at {
                if attempts >= SYN_ATTEMPTS {
                    self.state = State::Failed;
                    return None;
                }
                self.state = State::Connecting {
                    attempts: attempts + 1,
                    next_at: now + SYN_INTERVAL_NS,
                };
                return Some(wire::control(wire::SYN));
            }
        }
        None
    }

    /// When the endpoint next wants [`Endpoint::poll_transmit`] called, ns (client handshake).
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.state {
            State::Connecting { next_at, .. } => Some(next_at),
            _ => None,
        }
    }

    /// Takes the log records produced since the last call, in event order.
    pub fn drain_log(&mut self) -> std::vec::Drain<'_, Record> {
        self.log.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: [u8; 28] = {
        let mut p = [0u8; 28];
        p[0] = 0x45;
        p
    };

    /// Moves every pending control datagram of `from` into `to`.
    fn exchange(now: u64, from: &mut Endpoint, to: &mut Endpoint) {
        while let Some(d) = from.poll_transmit(now) {
            assert!(to.handle_datagram(now, &d).is_none());
        }
    }

    #[test]
    fn handshake_then_data_with_uids_and_logs() {
        let mut server = Endpoint::new(Role::Server, 1, 0);
        let mut client = Endpoint::new(Role::Client, 1, 0);
        assert_eq!(client.poll_timeout(), Some(0));
        exchange(0, &mut client, &mut server);
        assert!(server.is_connected());
        exchange(0, &mut server, &mut client);
        assert!(client.is_connected());

        let mut buf = [0u8; 64];
        for i in 0..3u64 {
            buf[8..36].copy_from_slice(&IP);
            let n = client.encapsulate(10 + i, &mut buf, IP.len()).unwrap();
            assert_eq!(n, 36);
            let inner = server.handle_datagram(20 + i, &buf[..n]).unwrap();
            assert_eq!(inner, &IP);
        }
        let sent: Vec<_> = client.drain_log().collect();
        let recv: Vec<_> = server.drain_log().collect();
        assert_eq!(sent.iter().map(|r| r.uid).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(recv.iter().map(|r| r.uid).collect::<Vec<_>>(), [0, 1, 2]);
        // Pantheon's size convention: inner IP length + 36.
        assert!(sent.iter().chain(&recv).all(|r| r.size == 28 + 36));
        assert_eq!(recv[2].t_ns, 22);
        assert_eq!(recv[2].kind, Kind::Ingress);
    }

    #[test]
    fn late_syn_is_answered_and_lost_ack_retried() {
        let mut server = Endpoint::new(Role::Server, 1, 0);
        let mut client = Endpoint::new(Role::Client, 1, 0);
        exchange(0, &mut client, &mut server);
        // The ACK is lost.
        assert!(server.poll_transmit(0).is_some());
        assert!(client.poll_transmit(SYN_INTERVAL_NS / 2).is_none());
        exchange(SYN_INTERVAL_NS, &mut client, &mut server);
        assert_eq!(server.counters().extra_syns, 1);
        exchange(SYN_INTERVAL_NS, &mut server, &mut client);
        assert!(client.is_connected());
    }

    #[test]
    fn client_gives_up_after_six_syns() {
        let mut client = Endpoint::new(Role::Client, 1, 0);
        let mut syns = 0;
        let mut now = 0;
        while client.state() != State::Failed {
            if client.poll_transmit(now).is_some() {
                syns += 1;
            }
            now += SYN_INTERVAL_NS;
            assert!(now < 100 * SYN_INTERVAL_NS);
        }
        assert_eq!(syns, SYN_ATTEMPTS);
    }

    #[test]
    fn no_data_before_handshake_and_garbage_counted() {
        let mut server = Endpoint::new(Role::Server, 1, 0);
        let mut buf = [0u8; 64];
        assert!(server.encapsulate(0, &mut buf, 28).is_none());
        assert!(server.handle_datagram(0, &[1, 2, 3]).is_none());
        let mut data = [0u8; 36];
        data[8] = 0x45;
        assert!(server.handle_datagram(0, &data).is_none());
        assert_eq!(server.counters().malformed, 2);
        assert_eq!(server.counters().dropped_unconnected, 1);
        assert_eq!(server.drain_log().count(), 0);
    }
}
