//! The tunnel endpoint as a pure state machine (no sockets, no clock): the I/O shell feeds it
//! datagrams from the peer and packets from the TUN device, with the current time, and drains
//! control datagrams to send and log records to write.
//!
//! Handshake (as pantheon-tunnel): the client sends SYN (an 8-byte datagram, UID `u64::MAX`)
//! every second until the server's ACK arrives, at most [`SYN_ATTEMPTS`] times; the server
//! answers every SYN with an ACK, late ones included (the client may have missed the first ACK).
//! Data UIDs count from 0 per endpoint.
//!
//! Ending (ours; pantheon-tunnel has no teardown): an endpoint that closes sends FIN
//! [`FIN_COPIES`] times, and a peer receiving it ends ([`State::PeerClosed`]). With a peer
//! timeout set ([`Endpoint::with_peer_timeout`]), a connected endpoint that has sent nothing for
//! a while sends a KEEPALIVE, and ends ([`State::PeerSilent`]) when it has heard nothing from its
//! peer for the timeout: a peer that crashed, was killed with SIGKILL or lost its path.
//!
//! ECN (ours; pantheon-tunnel's outer headers are always Not-ECT): RFC 6040's normal mode
//! ([`crate::ecn`]). [`Endpoint::encapsulate`] says which codepoint the outer header must carry
//! (the inner packet's) and [`Endpoint::handle_datagram`] applies the outer header's codepoint
//! to the inner packet, so that a queue on the path between the endpoints marks the scheme's
//! packets as it would without a tunnel. Both log the inner codepoint.

use crate::ecn::{self, Codepoint, Decapsulated};
use crate::log::{Kind, Record, Role};
use crate::wire::{self, Datagram};

/// How many SYNs a client sends before it gives up (pantheon-tunnel: 1 + 5 retries).
pub const SYN_ATTEMPTS: u32 = 6;
/// Interval between SYNs, ns.
pub const SYN_INTERVAL_NS: u64 = 1_000_000_000;
/// How many FINs a closing endpoint sends (UDP may lose one).
pub const FIN_COPIES: u8 = 3;
/// Longest interval between KEEPALIVEs of an idle endpoint, ns (shorter for peer timeouts
/// under 4 s: a quarter of the timeout).
pub const KEEPALIVE_INTERVAL_NS: u64 = 1_000_000_000;

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
    /// Data packets dropped at decapsulation: the outer header was marked CE around a
    /// Not-ECT inner packet (RFC 6040), so its transport could not have heard the mark.
    pub ce_on_not_ect: u64,
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
    /// The peer sent FIN: it closed the tunnel.
    PeerClosed,
    /// Nothing arrived from the peer for the peer timeout: it vanished.
    PeerSilent,
}

/// One tunnel endpoint.
#[derive(Debug)]
pub struct Endpoint {
    role: Role,
    flow: u16,
    state: State,
    next_uid: u64,
    pending_control: Option<u64>,
    fins_to_send: u8,
    /// Peer timeout, ns (`None`: never give up on a silent peer, send no KEEPALIVEs).
    peer_timeout: Option<u64>,
    /// When the peer was last heard from, ns.
    last_heard: u64,
    /// When we last sent anything to the peer, ns.
    last_sent: u64,
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
            fins_to_send: 0,
            peer_timeout: None,
            last_heard: now,
            last_sent: now,
            log: Vec::with_capacity(1024),
            counters: Counters::default(),
        }
    }

    /// Ends the endpoint when nothing has arrived from the peer for `timeout_ns` (ns, > 0)
    /// once connected, and keeps an idle peer informed with KEEPALIVEs.
    pub fn with_peer_timeout(mut self, timeout_ns: u64) -> Endpoint {
        self.peer_timeout = Some(timeout_ns.max(1));
        self
    }

    /// The peer timeout, ns, if one is set.
    pub fn peer_timeout(&self) -> Option<u64> {
        self.peer_timeout
    }

    /// Closes the tunnel: the next [`Endpoint::poll_transmit`] calls give [`FIN_COPIES`] FINs
    /// (only once connected; nobody listens before).
    pub fn close(&mut self) {
        if self.state == State::Connected {
            self.fins_to_send = FIN_COPIES;
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

    /// Handles one datagram from the peer received at `now` whose outer IP header carried ECN
    /// codepoint `outer` (Not-ECT where the I/O cannot read it). Returns the inner IP packet to
    /// write to the TUN device, if it is a data packet: RFC 6040's decapsulation has been
    /// applied to it in place (an outer CE marks an ECN-capable inner packet CE) and its
    /// ingress record logged with the inner codepoint. A CE outer header around a Not-ECT
    /// inner packet drops the packet (counted in [`Counters::ce_on_not_ect`], not logged).
    pub fn handle_datagram<'a>(
        &mut self,
        now: u64,
        buf: &'a mut [u8],
        outer: Codepoint,
    ) -> Option<&'a [u8]> {
        let parsed = wire::parse(buf);
        if parsed.is_ok() {
            self.last_heard = now;
        }
        match parsed {
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
            Ok(Datagram::Data { uid, .. }) if self.state == State::Connected => {
                let packet = &mut buf[wire::UID_LEN..];
                let inner = match ecn::decapsulate(outer, packet) {
                    Decapsulated::Forward(cp) => cp,
                    Decapsulated::Drop => {
                        self.counters.ce_on_not_ect += 1;
                        return None;
                    }
                };
                self.counters.received += 1;
                self.log.push(Record {
                    t_ns: now,
                    uid,
                    size: (packet.len() + wire::OVERHEAD) as u32,
                    flow: self.flow,
                    kind: Kind::Ingress,
                    ecn: Some(inner),
                });
                Some(packet)
            }
            Ok(Datagram::Fin) if self.state == State::Connected => {
                self.state = State::PeerClosed;
                None
            }
            Ok(Datagram::Keepalive | Datagram::Fin) => None,
            // A SYN at a client, an ACK at a server, data before the handshake: not ours.
            Ok(_) | Err(_) => {
                self.counters.malformed += 1;
                None
            }
        }
    }

    /// Encapsulates a packet read from the TUN device at `now`. The caller read the IP packet
    /// into `buf[8..8 + ip_len]` (8 bytes of headroom, so nothing is copied); this writes the UID
    /// into `buf[..8]`, logs the egress record (with the inner ECN codepoint) and returns the
    /// datagram length and the ECN codepoint its outer IP header must carry (RFC 6040's normal
    /// mode: the inner one). Returns `None` (and counts the drop) while the tunnel is not
    /// connected.
    pub fn encapsulate(
        &mut self,
        now: u64,
        buf: &mut [u8],
        ip_len: usize,
    ) -> Option<(usize, Codepoint)> {
        if self.state != State::Connected {
            self.counters.dropped_unconnected += 1;
            return None;
        }
        let uid = self.next_uid;
        self.next_uid += 1;
        self.last_sent = now;
        wire::write_uid(buf, uid);
        self.counters.sent += 1;
        let outer = ecn::encapsulate(&buf[wire::UID_LEN..wire::UID_LEN + ip_len]);
        self.log.push(Record {
            t_ns: now,
            uid,
            size: (ip_len + wire::OVERHEAD) as u32,
            flow: self.flow,
            kind: Kind::Egress,
            ecn: Some(outer),
        });
        Some((ip_len + wire::UID_LEN, outer))
    }

    /// A control datagram to send now, if any: the client's SYNs, the server's ACKs, FINs
    /// after [`Endpoint::close`], KEEPALIVEs when idle. Also where a silent peer is noticed.
    pub fn poll_transmit(&mut self, now: u64) -> Option<[u8; wire::UID_LEN]> {
        let control = self.next_control(now);
        if control.is_some() {
            self.last_sent = now;
        }
        control.map(wire::control)
    }

    fn next_control(&mut self, now: u64) -> Option<u64> {
        if let Some(uid) = self.pending_control.take() {
            return Some(uid);
        }
        if self.fins_to_send > 0 {
            self.fins_to_send -= 1;
            return Some(wire::FIN);
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
                return Some(wire::SYN);
            }
        }
        if let (State::Connected, Some(timeout)) = (self.state, self.peer_timeout) {
            if now.saturating_sub(self.last_heard) >= timeout {
                self.state = State::PeerSilent;
                return None;
            }
            if now.saturating_sub(self.last_sent) >= keepalive_interval(timeout) {
                return Some(wire::KEEPALIVE);
            }
        }
        None
    }

    /// When the endpoint next wants [`Endpoint::poll_transmit`] called, ns: the client's next
    /// SYN; with a peer timeout, the next KEEPALIVE or the moment the peer counts as vanished.
    pub fn poll_timeout(&self) -> Option<u64> {
        match (self.state, self.peer_timeout) {
            (State::Connecting { next_at, .. }, _) => Some(next_at),
            (State::Connected, Some(timeout)) => {
                Some((self.last_sent + keepalive_interval(timeout)).min(self.last_heard + timeout))
            }
            _ => None,
        }
    }

    /// Takes the log records produced since the last call, in event order.
    pub fn drain_log(&mut self) -> std::vec::Drain<'_, Record> {
        self.log.drain(..)
    }
}

fn keepalive_interval(peer_timeout: u64) -> u64 {
    KEEPALIVE_INTERVAL_NS.min(peer_timeout / 4).max(1)
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
            assert!(to
                .handle_datagram(now, &mut d.clone(), Codepoint::NotEct)
                .is_none());
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
            let (n, outer) = client.encapsulate(10 + i, &mut buf, IP.len()).unwrap();
            assert_eq!(outer, Codepoint::NotEct);
            assert_eq!(n, 36);
            let inner = server
                .handle_datagram(20 + i, &mut buf[..n], Codepoint::NotEct)
                .unwrap();
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
    fn ecn_crosses_the_tunnel_as_rfc_6040_says() {
        let (mut server, mut client) = connected_pair(0);
        // An IPv4 header with TOS `tos` and a right checksum, in a datagram with UID headroom.
        let datagram = |tos: u8| {
            let mut d = vec![0u8; 8 + 40];
            d[8..20].copy_from_slice(&[0x45, tos, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0]);
            let c = ecn::ipv4_header_checksum(&d[8..28]);
            d[18..20].copy_from_slice(&c.to_be_bytes());
            d
        };
        // Each inner codepoint leaves with the same outer codepoint and is logged.
        for (tos, cp) in [
            (0x00, Codepoint::NotEct),
            (0x02, Codepoint::Ect0),
            (0xb9, Codepoint::Ect1),
            (0x03, Codepoint::Ce),
        ] {
            let mut d = datagram(tos);
            assert_eq!(client.encapsulate(1, &mut d, 40), Some((48, cp)));
        }
        let sent: Vec<_> = client.drain_log().map(|r| r.ecn).collect();
        assert_eq!(
            sent,
            [
                Codepoint::NotEct,
                Codepoint::Ect0,
                Codepoint::Ect1,
                Codepoint::Ce
            ]
            .map(Some)
        );
        // A queue marked the outer header CE: an ECT(0) packet comes out CE, checksum right.
        let mut d = datagram(0x02);
        let inner = server.handle_datagram(2, &mut d, Codepoint::Ce).unwrap();
        assert_eq!(ecn::codepoint(inner), Some(Codepoint::Ce));
        assert_eq!(
            u16::from_be_bytes([inner[10], inner[11]]),
            ecn::ipv4_header_checksum(&inner[..20])
        );
        // An unmarked outer header leaves ECT(1) alone.
        let mut d = datagram(0x01);
        let inner = server.handle_datagram(3, &mut d, Codepoint::Ect1).unwrap();
        assert_eq!(ecn::codepoint(inner), Some(Codepoint::Ect1));
        // CE around Not-ECT: dropped, counted, not logged.
        let mut d = datagram(0x00);
        assert_eq!(server.handle_datagram(4, &mut d, Codepoint::Ce), None);
        assert_eq!(server.counters().ce_on_not_ect, 1);
        assert_eq!(server.counters().received, 2);
        let got: Vec<_> = server.drain_log().map(|r| (r.t_ns, r.ecn)).collect();
        assert_eq!(got, [(2, Some(Codepoint::Ce)), (3, Some(Codepoint::Ect1))]);
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

    fn connected_pair(now: u64) -> (Endpoint, Endpoint) {
        let mut server = Endpoint::new(Role::Server, 1, now);
        let mut client = Endpoint::new(Role::Client, 1, now);
        exchange(now, &mut client, &mut server);
        exchange(now, &mut server, &mut client);
        assert!(client.is_connected() && server.is_connected());
        (server, client)
    }

    #[test]
    fn fin_ends_the_peer() {
        let (mut server, mut client) = connected_pair(0);
        client.close();
        let fins: Vec<_> = std::iter::from_fn(|| client.poll_transmit(5)).collect();
        assert_eq!(fins.len(), usize::from(FIN_COPIES));
        assert_eq!(
            server.handle_datagram(6, &mut fins[0].clone(), Codepoint::NotEct),
            None
        );
        assert_eq!(server.state(), State::PeerClosed);
        // Later copies and data after the FIN are not taken.
        assert_eq!(
            server.handle_datagram(7, &mut fins[1].clone(), Codepoint::NotEct),
            None
        );
        let mut buf = [0u8; 36];
        buf[8] = 0x45;
        assert!(server.encapsulate(8, &mut buf, 28).is_none());
        assert_eq!(server.counters().malformed, 0);
    }

    #[test]
    fn idle_endpoint_sends_keepalives_and_notices_a_silent_peer() {
        const S: u64 = 1_000_000_000;
        let (server, client) = connected_pair(0);
        let mut server = server.with_peer_timeout(10 * S);
        // Without a timeout: no keepalives, no deadline.
        assert_eq!(client.poll_timeout(), None);
        assert_eq!(server.poll_timeout(), Some(KEEPALIVE_INTERVAL_NS));
        assert!(server.poll_transmit(S / 2).is_none());
        let k = server.poll_transmit(S).expect("keepalive after 1 s idle");
        assert_eq!(wire::parse(&k), Ok(Datagram::Keepalive));
        assert!(server.poll_transmit(S + 1).is_none(), "one per interval");
        // Data sent counts as activity; a datagram heard resets the deadline.
        let mut buf = [0u8; 36];
        buf[8] = 0x45;
        server.encapsulate(2 * S - 1, &mut buf, 28).unwrap();
        assert!(server.poll_transmit(2 * S).is_none());
        server.handle_datagram(
            5 * S,
            &mut wire::control(wire::KEEPALIVE),
            Codepoint::NotEct,
        );
        assert_eq!(
            server.poll_transmit(14 * S),
            Some(wire::control(wire::KEEPALIVE))
        );
        assert!(server.is_connected());
        assert_eq!(server.poll_timeout(), Some(15 * S));
        assert!(server.poll_transmit(15 * S).is_none());
        assert_eq!(server.state(), State::PeerSilent);
        assert_eq!(server.poll_timeout(), None);
    }

    #[test]
    fn no_data_before_handshake_and_garbage_counted() {
        let mut server = Endpoint::new(Role::Server, 1, 0);
        let mut buf = [0u8; 64];
        assert!(server.encapsulate(0, &mut buf, 28).is_none());
        assert!(server
            .handle_datagram(0, &mut [1, 2, 3], Codepoint::NotEct)
            .is_none());
        let mut data = [0u8; 36];
        data[8] = 0x45;
        assert!(server
            .handle_datagram(0, &mut data, Codepoint::NotEct)
            .is_none());
        assert_eq!(server.counters().malformed, 2);
        assert_eq!(server.counters().dropped_unconnected, 1);
        assert_eq!(server.drain_log().count(), 0);
    }
}
