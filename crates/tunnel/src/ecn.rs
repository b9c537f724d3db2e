//! Explicit Congestion Notification (RFC 3168, RFC 9331) on the tunnel's and the emulator's
//! packets.
//!
//! # Brief overview
//!
//! ECN lets a queue say "I am congested" without dropping: a sender that understands it sets
//! one of two *ECN-capable transport* codepoints in the two low bits of the IP header's traffic
//! class (IPv4's TOS byte, IPv6's Traffic Class), and a queue that would drop such a packet may
//! instead set both bits — *Congestion Experienced* (CE) — and deliver it. The receiver echoes
//! the mark and the sender slows down as it would for a loss, but nothing is retransmitted.
//!
//! | bits | codepoint | meaning |
//! |---|---|---|
//! | `00` | Not-ECT | the transport does not understand ECN: drop, never mark |
//! | `10` | ECT(0) | classic ECN (RFC 3168): a mark means "as a loss" |
//! | `01` | ECT(1) | L4S (RFC 9331): a mark is a fine-grained signal, expected often |
//! | `11` | CE | marked on the path |
//!
//! [`codepoint`] reads the field of an IPv4 or IPv6 packet; [`set_ce`] marks a packet as a
//! router does — only an ECN-capable one, fixing IPv4's header checksum incrementally (RFC
//! 1624) — and says whether it could, as Linux's `INET_ECN_set_ce`, so that a queue drops the
//! packets it cannot mark.
//!
//! A tunnel carries the field across as RFC 6040's *normal mode* says ([`encapsulate`],
//! [`decapsulate`]): the outer header gets a copy of the inner packet's field, so that a queue on
//! the path sees and may mark an ECN-capable packet; at the far end a CE mark on the outer header
//! is carried into the inner one, and a marked outer header around a Not-ECT packet (which no
//! well-behaved queue produces) means the packet is dropped.
//!
//! ```
//! use pantheon_tunnel::ecn::{codepoint, set_ce, Codepoint};
//! // An IPv4 header sent with ECT(0) (TOS 0x02).
//! let mut pkt = vec![0x45, 0x02, 0, 20, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
//! assert_eq!(codepoint(&pkt), Some(Codepoint::Ect0));
//! assert!(set_ce(&mut pkt));
//! assert_eq!(codepoint(&pkt), Some(Codepoint::Ce));
//! ```

/// The ECN field of an IP packet (the two low bits of the traffic class).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Codepoint {
    /// `00`: not ECN-capable; a queue must drop it, never mark it.
    NotEct,
    /// `01`: ECT(1), the L4S identifier (RFC 9331).
    Ect1,
    /// `10`: ECT(0), classic ECN (RFC 3168).
    Ect0,
    /// `11`: Congestion Experienced.
    Ce,
}

impl Codepoint {
    /// The codepoint of the field's two bits (higher bits ignored).
    pub fn from_bits(bits: u8) -> Codepoint {
        match bits & 0b11 {
            0b00 => Codepoint::NotEct,
            0b01 => Codepoint::Ect1,
            0b10 => Codepoint::Ect0,
            _ => Codepoint::Ce,
        }
    }

    /// The field's two bits.
    pub fn bits(self) -> u8 {
        match self {
            Codepoint::NotEct => 0b00,
            Codepoint::Ect1 => 0b01,
            Codepoint::Ect0 => 0b10,
            Codepoint::Ce => 0b11,
        }
    }

    /// True for ECT(0), ECT(1) and CE: a packet that a queue may mark instead of dropping.
    pub fn is_ecn_capable(self) -> bool {
        self != Codepoint::NotEct
    }

    /// The name RFC 3168 and RFC 9331 use: `Not-ECT`, `ECT(1)`, `ECT(0)`, `CE`.
    pub fn name(self) -> &'static str {
        match self {
            Codepoint::NotEct => "Not-ECT",
            Codepoint::Ect1 => "ECT(1)",
            Codepoint::Ect0 => "ECT(0)",
            Codepoint::Ce => "CE",
        }
    }
}

/// The ECN codepoint of an IP packet (the IP header first, as the emulator carries packets);
/// `None` for what is not an IPv4 or IPv6 header (too short, another version nibble — cross
/// traffic's packets among them).
pub fn codepoint(pkt: &[u8]) -> Option<Codepoint> {
    match ip_version(pkt)? {
        4 => Some(Codepoint::from_bits(pkt[1])),
        _ => Some(Codepoint::from_bits(pkt[1] >> 4)),
    }
}

/// Marks an ECN-capable packet Congestion Experienced, as a router does: ECT(0) and ECT(1)
/// become CE (IPv4's header checksum updated incrementally, RFC 1624 eqn. 3), a CE packet stays
/// CE. Returns true when the packet now carries CE — false for Not-ECT and for what is not an IP
/// packet, which are left untouched and which the caller drops instead (Linux's
/// `INET_ECN_set_ce`).
pub fn set_ce(pkt: &mut [u8]) -> bool {
    let Some(version) = ip_version(pkt) else {
        return false;
    };
    let current = codepoint(pkt).expect("an IP header");
    if !current.is_ecn_capable() {
        return false;
    }
    if current == Codepoint::Ce {
        return true;
    }
    if version == 4 {
        let old = u16::from_be_bytes([pkt[0], pkt[1]]);
        pkt[1] |= Codepoint::Ce.bits();
        let new = u16::from_be_bytes([pkt[0], pkt[1]]);
        let check = u16::from_be_bytes([pkt[10], pkt[11]]);
        pkt[10..12].copy_from_slice(&checksum_update(check, old, new).to_be_bytes());
    } else {
        // IPv6: version (4 bits), traffic class (8), flow label (20); the ECN bits are the
        // traffic class's low two, bits 4–5 of the second byte. No header checksum.
        pkt[1] |= Codepoint::Ce.bits() << 4;
    }
    true
}

/// 4 or 6 when `pkt` starts with an IPv4 header (≥ 20 bytes) or an IPv6 one (≥ 40 bytes).
fn ip_version(pkt: &[u8]) -> Option<u8> {
    match pkt.first()? >> 4 {
        4 if pkt.len() >= 20 => Some(4),
        6 if pkt.len() >= 40 => Some(6),
        _ => None,
    }
}

/// RFC 1624 eqn. 3: the Internet checksum `check` of a header in which one 16-bit word changed
/// from `old` to `new`, without summing the header again: `~(~check + ~old + new)`.
pub fn checksum_update(check: u16, old: u16, new: u16) -> u16 {
    let mut sum = u32::from(!check) + u32::from(!old) + u32::from(new);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The Internet checksum (RFC 1071) of an IPv4 header whose checksum field is taken as zero:
/// what belongs in bytes 10–11. `header` is the whole header (IHL × 4 bytes).
pub fn ipv4_header_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for (i, pair) in header.chunks(2).enumerate() {
        if i == 5 {
            continue; // the checksum field itself
        }
        let hi = u32::from(pair[0]) << 8;
        sum += hi | u32::from(*pair.get(1).unwrap_or(&0));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The ECN field an encapsulating header gets for inner packet `inner` (RFC 6040 §4.1, normal
/// mode): a copy of the inner field, CE included; Not-ECT for what is not an IP packet.
pub fn encapsulate(inner: &[u8]) -> Codepoint {
    codepoint(inner).unwrap_or(Codepoint::NotEct)
}

/// What a decapsulator does with an inner packet whose outer header arrived with `outer`
/// (RFC 6040 §4.2, Figure 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decapsulated {
    /// Forward the inner packet, which now carries this codepoint (CE if the outer header was
    /// marked and the inner packet is ECN-capable; else unchanged).
    Forward(Codepoint),
    /// Drop it: the outer header is CE but the inner packet is Not-ECT, so its transport could
    /// not hear the mark (RFC 6040: "drop", as a queue would have dropped it).
    Drop,
}

/// Applies RFC 6040's decapsulation to `inner` (the inner IP packet, changed in place) given
/// the outer header's codepoint `outer`: an outer CE marks an ECN-capable inner packet CE (its
/// IPv4 checksum kept right) and asks for a Not-ECT one to be dropped; any other outer value
/// leaves the inner packet as it is. What is not an IP packet is forwarded untouched, as
/// Not-ECT.
pub fn decapsulate(outer: Codepoint, inner: &mut [u8]) -> Decapsulated {
    let Some(current) = codepoint(inner) else {
        return Decapsulated::Forward(Codepoint::NotEct);
    };
    let verdict = decapsulated(outer, current);
    if verdict == Decapsulated::Forward(Codepoint::Ce) {
        set_ce(inner);
    }
    verdict
}

/// RFC 6040 §4.2's table alone: what becomes of an inner packet with codepoint `inner` whose
/// outer header arrived with `outer` (for whoever keeps the headers apart, as the simulator).
pub fn decapsulated(outer: Codepoint, inner: Codepoint) -> Decapsulated {
    match (outer, inner) {
        (Codepoint::Ce, Codepoint::NotEct) => Decapsulated::Drop,
        (Codepoint::Ce, _) => Decapsulated::Forward(Codepoint::Ce),
        _ => Decapsulated::Forward(inner),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The IPv4 header of Wikipedia's worked checksum example (192.168.0.1 → 192.168.0.199,
    /// UDP, TOS 0): its checksum is 0xb861.
    fn wikipedia_header(tos: u8) -> Vec<u8> {
        let mut h = vec![
            0x45, tos, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        let c = ipv4_header_checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h
    }

    #[test]
    fn the_checksum_of_a_known_header() {
        assert_eq!(ipv4_header_checksum(&wikipedia_header(0)), 0xb861);
        // TOS 2 adds 2 to the first word's sum, so the complement is 2 less.
        assert_eq!(ipv4_header_checksum(&wikipedia_header(2)), 0xb85f);
    }

    #[test]
    fn marking_ipv4_sets_ce_and_keeps_the_checksum_right() {
        for (tos, before) in [
            (0x02, Codepoint::Ect0),
            (0x01, Codepoint::Ect1),
            (0xb8 | 0x02, Codepoint::Ect0), // DSCP EF with ECT(0): the DSCP bits stay
        ] {
            let mut h = wikipedia_header(tos);
            assert_eq!(codepoint(&h), Some(before));
            assert!(set_ce(&mut h));
            assert_eq!(codepoint(&h), Some(Codepoint::Ce));
            assert_eq!(h[1], tos | 0b11);
            let stored = u16::from_be_bytes([h[10], h[11]]);
            assert_eq!(stored, ipv4_header_checksum(&h), "TOS {tos:#x}");
        }
        // By hand: ECT(0) (TOS 2, checksum 0xb85f) marked CE (TOS 3) is one more in the sum.
        let mut h = wikipedia_header(0x02);
        set_ce(&mut h);
        assert_eq!(u16::from_be_bytes([h[10], h[11]]), 0xb85e);
    }

    #[test]
    fn not_ect_and_non_ip_are_left_alone_and_ce_stays_ce() {
        let mut h = wikipedia_header(0x00);
        let before = h.clone();
        assert!(!set_ce(&mut h));
        assert_eq!(h, before);
        let mut ce = wikipedia_header(0x03);
        let before = ce.clone();
        assert!(set_ce(&mut ce));
        assert_eq!(ce, before);
        let mut not_ip = vec![0xffu8; 60];
        assert_eq!(codepoint(&not_ip), None);
        assert!(!set_ce(&mut not_ip));
        assert_eq!(not_ip, vec![0xffu8; 60]);
        assert!(!set_ce(&mut [0x45, 0x02]), "a truncated header");
    }

    #[test]
    fn ipv6_traffic_class_low_bits() {
        // Version 6, traffic class 0x01 (ECT(1)), flow label 0x12345.
        let mut h = vec![0u8; 40];
        h[..4].copy_from_slice(&[0x60, 0x11, 0x23, 0x45]);
        assert_eq!(codepoint(&h), Some(Codepoint::Ect1));
        assert!(set_ce(&mut h));
        assert_eq!(&h[..4], &[0x60, 0x31, 0x23, 0x45]);
        assert_eq!(codepoint(&h), Some(Codepoint::Ce));
    }

    #[test]
    fn rfc_6040_normal_mode() {
        // Encapsulation copies the field, CE included.
        for tos in 0..4u8 {
            assert_eq!(
                encapsulate(&wikipedia_header(tos)),
                Codepoint::from_bits(tos)
            );
        }
        assert_eq!(encapsulate(&[0xff; 30]), Codepoint::NotEct);
        // Decapsulation (RFC 6040 Figure 4): rows are the inner field, columns the outer.
        use Codepoint::*;
        use Decapsulated::*;
        let table = [
            (
                NotEct,
                [Forward(NotEct), Forward(NotEct), Forward(NotEct), Drop],
            ),
            (
                Ect0,
                [Forward(Ect0), Forward(Ect0), Forward(Ect0), Forward(Ce)],
            ),
            (
                Ect1,
                [Forward(Ect1), Forward(Ect1), Forward(Ect1), Forward(Ce)],
            ),
            (Ce, [Forward(Ce), Forward(Ce), Forward(Ce), Forward(Ce)]),
        ];
        for (inner, row) in table {
            for (outer, want) in [NotEct, Ect0, Ect1, Ce].into_iter().zip(row) {
                let mut h = wikipedia_header(inner.bits());
                assert_eq!(decapsulate(outer, &mut h), want, "{inner:?} in {outer:?}");
                if let Forward(cp) = want {
                    assert_eq!(codepoint(&h), Some(cp));
                    assert_eq!(u16::from_be_bytes([h[10], h[11]]), ipv4_header_checksum(&h));
                }
            }
        }
        let mut not_ip = [0xffu8; 30];
        assert_eq!(decapsulate(Ce, &mut not_ip), Forward(NotEct));
        assert_eq!(not_ip, [0xff; 30]);
    }

    #[test]
    fn codepoint_bits_round_trip() {
        for bits in 0..4u8 {
            assert_eq!(Codepoint::from_bits(bits).bits(), bits);
        }
        assert_eq!(Codepoint::from_bits(0b10).name(), "ECT(0)");
        assert!(!Codepoint::NotEct.is_ecn_capable());
    }
}
