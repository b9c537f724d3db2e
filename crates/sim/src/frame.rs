//! Simulated packets as the emulator sees real ones: a tunnel datagram (outer IPv4 and UDP
//! headers, the tunnel's 8-byte UID) around the scheme's IP packet (inner IPv4 and UDP headers
//! and the QUIC datagram).
//!
//! ```text
//!  0        20       28          36        56       64
//!  +--------+--------+-----------+---------+--------+---------------------+
//!  | IPv4   | UDP    | uid (LE)  | IPv4    | UDP    | QUIC datagram       |
//!  | outer  | outer  | tunnel    | inner   | inner  |                     |
//!  +--------+--------+-----------+---------+--------+---------------------+
//! ```
//! The length is what the link's queue and rate count and what the tunnel logs record (inner
//! IP length + 36, `tunnel::wire::OVERHEAD`), so a simulated packet weighs what a real one
//! does. The outer UDP port is the flow's tunnel port, as in a real run, so that per-flow
//! stages (a mix's `+DELAY`) find their flow; the inner headers carry their lengths and the ECN
//! bits QUIC set, which the outer header copies as the real tunnel's does (RFC 6040), so that
//! the emulator's marking queues see and mark them.

use emucal::Packet;
use tunnel::ecn::{self, Codepoint, Decapsulated};
use tunnel::wire::{OUTER_HEADERS, OVERHEAD, UID_LEN};

/// Bytes before the QUIC datagram: the tunnel's 36 and the inner IPv4 and UDP headers (28).
pub const HEADERS: usize = OVERHEAD + INNER_HEADERS;
/// Inner IPv4 (20) and UDP (8) header bytes.
pub const INNER_HEADERS: usize = 28;

/// The UDP port of flow `flow`'s tunnel server (1-based flow) in a real run's host namespace,
/// and of its simulated packets: fixed, so that the emulator knows each flow's packets before
/// the tunnels start (`emucal::stage::FlowDelay`), and below Linux's ephemeral range
/// (32768–60999), so that no tunnel client's port can be another flow's.
pub fn tunnel_port(flow: u16) -> u16 {
    20_000 + flow
}

/// The tunnel datagram of `quic` (a QUIC datagram) of flow `flow` with UID `uid` and ECN bits
/// `ecn` (0–3); `uplink` says which way it goes (towards the flow's tunnel port, or from it).
pub fn encode(flow: u16, uid: u64, uplink: bool, ecn: u8, quic: &[u8]) -> Packet {
    let mut p = Vec::with_capacity(HEADERS + quic.len());
    ipv4_udp(&mut p, HEADERS - OUTER_HEADERS + quic.len(), flow, uplink);
    p.extend_from_slice(&uid.to_le_bytes());
    ipv4_udp(&mut p, quic.len(), flow, uplink);
    p[1] = ecn & 3;
    p[OVERHEAD + 1] = ecn & 3;
    p.extend_from_slice(quic);
    p
}

/// IPv4 and UDP headers for a UDP payload of `payload` bytes: protocol 17, total length,
/// ports (the flow's tunnel port as destination uplink, as source downlink).
fn ipv4_udp(p: &mut Vec<u8>, payload: usize, flow: u16, uplink: bool) {
    let total = (20 + 8 + payload) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    p.extend_from_slice(&ip);
    let (src, dst) = if uplink {
        (40_000 + flow, tunnel_port(flow))
    } else {
        (tunnel_port(flow), 40_000 + flow)
    };
    p.extend_from_slice(&src.to_be_bytes());
    p.extend_from_slice(&dst.to_be_bytes());
    p.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
}

/// A packet leaving the emulator, taken apart: (flow, uid, what the tunnel makes of its ECN
/// field — the inner codepoint with the outer header's CE carried in, or drop — and the QUIC
/// datagram); `None` if it is not one [`encode`] made.
pub fn decode(p: &[u8]) -> Option<(u16, u64, Decapsulated, &[u8])> {
    if p.len() < HEADERS {
        return None;
    }
    let port = |i: usize| u16::from_be_bytes([p[i], p[i + 1]]);
    let (src, dst) = (port(20), port(22));
    let flow = src.max(dst).checked_sub(40_000)?;
    let uid = u64::from_le_bytes(p[OUTER_HEADERS..OUTER_HEADERS + UID_LEN].try_into().ok()?);
    let ecn = ecn::decapsulated(
        Codepoint::from_bits(p[1]),
        Codepoint::from_bits(p[OVERHEAD + 1]),
    );
    Some((flow, uid, ecn, &p[HEADERS..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_weighs_what_the_tunnel_logs_and_comes_back_whole() {
        let quic = vec![7u8; 1436];
        let p = encode(3, 99, true, 2, &quic);
        // The tunnel logs inner IP length + 36: 1436 + 28 + 36 = 1500.
        assert_eq!(p.len(), 1500);
        assert_eq!(u16::from_be_bytes([p[2], p[3]]), 1500);
        assert_eq!(u16::from_be_bytes([p[22], p[23]]), tunnel_port(3));
        assert_eq!(u16::from_be_bytes([p[38], p[39]]), 1464);
        assert_eq!(p[1] & 3, 2, "the outer header copies the inner ECN field");
        let (flow, uid, ecn, back) = decode(&p).unwrap();
        assert_eq!(
            (flow, uid, ecn, back),
            (3, 99, Decapsulated::Forward(Codepoint::Ect0), &quic[..])
        );
        // A queue marked the outer header: the tunnel delivers CE; around Not-ECT, drops.
        let mut marked = p.clone();
        assert!(ecn::set_ce(&mut marked));
        assert_eq!(
            decode(&marked).unwrap().2,
            Decapsulated::Forward(Codepoint::Ce)
        );
        let mut not_ect = encode(3, 100, true, 0, &quic);
        not_ect[1] |= 3;
        assert_eq!(decode(&not_ect).unwrap().2, Decapsulated::Drop);
        let ack = encode(3, 5, false, 0, &[1, 2, 3]);
        assert_eq!(u16::from_be_bytes([ack[20], ack[21]]), tunnel_port(3));
        assert_eq!(decode(&ack).unwrap().0, 3);
        assert!(decode(&p[..40]).is_none());
    }
}
